"""What the CPU path needs of Triton, for a machine without it (CI, CPU workers).

liger-kernel's modules import `triton` and `triton.language` at the top and decorate their
kernels with `@triton.jit` / `@triton.autotune`, so the upstream benchmark scripts cannot even be
imported without it, although the plain-PyTorch providers (huggingface, torch) never launch a
Triton kernel. Where Triton is not installed, the child process registers this stand-in: any
`triton.*` import succeeds, decorators return the function wrapped so that launching it raises,
and `triton.testing.do_bench` is `cpu_do_bench`, the same timing loop on `time.perf_counter`.

Where Triton is installed, the CPU path still replaces only `triton.testing.do_bench` with
`cpu_do_bench` (Triton's own times CUDA events).
"""

import importlib.abc
import importlib.machinery
import sys
import time
import types

VERSION = "0+kernelindex.cpu-stand-in"


def cpu_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """triton.testing.do_bench's loop and statistics, timed with the CPU's wall clock: estimate
    the time of one call, warm up for `warmup` ms, then time calls for about `rep` ms. The
    estimate is the median of 5 calls, not their mean: one slow call on a shared CPU would
    otherwise cut the run to a single timed call."""
    import torch

    assert return_mode in ("min", "max", "mean", "median", "all")
    fn()
    estimates = []
    for _ in range(5):
        began = time.perf_counter()
        fn()
        estimates.append((time.perf_counter() - began) * 1000)
    estimate_ms = max(sorted(estimates)[2], 1e-6)
    for _ in range(max(1, int(warmup / estimate_ms))):
        fn()
    times = []
    for _ in range(max(1, int(rep / estimate_ms))):
        if grad_to_none is not None:
            for tensor in grad_to_none:
                tensor.grad = None
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    if return_mode == "all":
        return times
    values = torch.tensor(times, dtype=torch.float)
    if quantiles is not None:
        result = torch.quantile(values, torch.tensor(quantiles, dtype=torch.float)).tolist()
        return result[0] if len(result) == 1 else result
    return getattr(torch, return_mode)(values).item()


class TritonUnavailable(RuntimeError):
    pass


class _Kernel:
    """A function decorated with @triton.jit (or autotune, heuristics): launching it raises."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, grid):
        return self._launch

    def __call__(self, *args, **kwargs):
        self._launch()

    def _launch(self, *args, **kwargs):
        raise TritonUnavailable(f"Triton kernel {self.__name__} cannot run here: Triton needs a GPU")

    def __getattr__(self, name):
        return _Anything(f"{self.__name__}.{name}")


class _Anything:
    """Any attribute of the stand-in: a decorator, a decorator factory, a dtype, a constant."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Anything):
            return args[0] if isinstance(args[0], _Kernel) else _Kernel(args[0])
        return _Anything(f"{self._name}()")

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self._name}.{name}")

    def __getitem__(self, item):
        return _Anything(f"{self._name}[]")

    def __repr__(self):
        return f"<triton stand-in {self._name}>"


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "triton" or fullname.startswith("triton."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        if module.__name__ == "triton":
            module.__version__ = VERSION
        if module.__name__ == "triton.testing":
            module.do_bench = cpu_do_bench


def install() -> None:
    """Make `import triton` give the stand-in in this process."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
