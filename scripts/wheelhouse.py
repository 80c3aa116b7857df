#!/usr/bin/env python3
"""Build a wheelhouse for a GPU host that reaches no package index (standard library only).

Run on a machine that reaches the index. The folder it fills (default var/wheelhouse/) holds every
wheel a GPU worker needs beyond the host's own torch and Triton (requirements.txt and
requirements-worker.txt, with their dependencies, resolved for the target Python and platform),
and the pinned liger-kernel source distribution that `manage.py fetch_harness --archive` unpacks
(its sha256 checked). Copy the folder to the host, then there:

    python3 -m pip install --no-index --find-links WHEELHOUSE -r requirements.txt -r requirements-worker.txt
    python3 manage.py fetch_harness --archive WHEELHOUSE

Target: the running interpreter by default; `--host h200` is the H200 hosts' image (Python 3.12,
manylinux x86_64, and what that image already has, left out); or give --python-version,
--platform, --implementation, --abi and --exclude yourself. Only wheels are taken
(`--only-binary=:all:`), so nothing is ever built on the host. Left out, always: torch and Triton
(a host brings the build that matches its CUDA). Left out with --exclude: packages the host
already has; the folder's HOST-NEEDS.txt lists what the kept wheels then ask of the host's copies.
"""

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = (ROOT / "requirements.txt", ROOT / "requirements-worker.txt")
# The host brings these, built for its CUDA; a wheelhouse never carries them.
HOST_TORCH = ("torch", "triton")
MANYLINUX_X86_64 = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)

# The image of the H200 hosts ('cuda', as its lender documented it on 2026-11-17):
# Python 3.12.3 and these packages. A package our requirement files pin with == is left out only
# where the image's version is known and equal (KNOWN_VERSIONS); the others travel as wheels.
H200_IMAGE = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split()
# Versions known on that image: KINDS.md's pip-list row, and scipy as requirements.txt pins it
# for Python 3.12. A pin of ours that differs makes the package travel as a wheel.
H200_KNOWN_VERSIONS = {
    "transformers": "5.17.0",
    "numpy": "2.5.2",
    "scipy": "1.18.1",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "huggingface-hub": "1.33.0",
    "tokenizers": "0.23.2",
    "safetensors": "0.8.0",
}
HOSTS = {
    "h200": {
        "python_version": "3.12",
        "implementation": "cp",
        "abi": "cp312",
        "platforms": MANYLINUX_X86_64,
        "image": H200_IMAGE,
        "known_versions": H200_KNOWN_VERSIONS,
    }
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return normalise(match.group(1)) if match else ""


def requirement_pin(line: str) -> str | None:
    """The version of a `name==version` (or `name[extra]==version`) line, else None."""
    match = re.match(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s*==\s*([^\s;,#]+)\s*(?:[;#]|$)", line)
    return match.group(1) if match else None


def requirement_lines(path: Path, seen=None) -> list[str]:
    """The requirement lines of a pip requirements file, following `-r` includes."""
    seen = seen if seen is not None else set()
    path = path.resolve()
    if path in seen:
        return []
    seen.add(path)
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            lines += requirement_lines(path.parent / line.split(None, 1)[1], seen)
        elif line.startswith("-"):
            continue  # index options: the wheelhouse decides where wheels come from
        else:
            lines.append(line)
    return lines


def wheel_name_version(filename: str) -> tuple[str, str]:
    name, version = filename.split("-")[:2]
    return normalise(name), version


def wheel_tags(filename: str) -> tuple[set[str], set[str], set[str]]:
    """(python tags, abi tags, platform tags) of a wheel file name (PEP 427, compressed tag sets)."""
    parts = filename[: -len(".whl")].split("-")
    python, abi, platform = parts[-3:]
    return set(python.split(".")), set(abi.split(".")), set(platform.split("."))


def wheel_fits(filename: str, *, python_version: str, platforms=()) -> bool:
    """Whether a wheel installs on CPython `python_version` on one of `platforms` (none given:
    the running machine, whose platform pip chose for itself)."""
    major, minor = (int(x) for x in python_version.split(".")[:2])
    exact = f"cp{major}{minor}"
    older_cp = {f"cp{major}{m}" for m in range(minor + 1)}
    pure = {f"py{major}", *(f"py{major}{m}" for m in range(minor + 1))}
    pythons, abis, plats = wheel_tags(filename)
    interpreter_ok = any(
        (abi == "none" and python in pure | older_cp)
        or (abi == "abi3" and python in older_cp)
        or (abi == exact and python == exact)
        for python in pythons
        for abi in abis
    )
    platform_ok = "any" in plats or not platforms or bool(plats & set(platforms))
    return interpreter_ok and platform_ok


def requires_dist(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA, without those of extras."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode("utf-8", "replace")
    lines = []
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line.startswith("Requires-Dist:"):
            requirement = line.split(":", 1)[1].strip()
            if not re.search(r"\bextra\s*==", requirement):
                lines.append(requirement)
    return lines


def load_upstream_module():
    """registry/reruns/harness/upstream.py, loaded on its own (it needs no Django): the pinned
    liger-kernel version and its sha256 live there, and only there."""
    spec = importlib.util.spec_from_file_location(
        "_harness_upstream", ROOT / "registry/reruns/harness/upstream.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pip(*args):
    command = [sys.executable, "-m", "pip", *map(str, args)]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def target_flags(python_version, implementation, abi, platforms) -> list[str]:
    flags = []
    if python_version:
        flags += ["--python-version", python_version]
    if implementation:
        flags += ["--implementation", implementation]
    if abi:
        flags += ["--abi", abi]
    for platform in platforms or ():
        flags += ["--platform", platform]
    return flags


def parse_requirement(text: str):
    """(name, specifier text, applies) of a PEP 508 requirement for `marker_env`; pip's vendored
    `packaging` does the parsing (pip is here anyway: it does the downloading)."""
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:  # no pip to vendor it: a plain reading, every marker taken as true
        name = requirement_name(text)
        rest = text.split(";", 1)[0][len(name) :].strip(" ()")
        return name, rest, lambda env: True
    requirement = Requirement(text)
    return (
        normalise(requirement.name),
        requirement.specifier,
        lambda env: requirement.marker is None or requirement.marker.evaluate(env),
    )


def marker_env(python_version: str, platforms=()) -> dict:
    major, minor = python_version.split(".")[:2]
    machine = "aarch64" if any("aarch64" in p for p in platforms) else "x86_64"
    return {
        "python_version": f"{major}.{minor}",
        "python_full_version": f"{major}.{minor}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": machine,
        "extra": "",
    }


def needs_of(wheel: Path, env: dict) -> list[tuple[str, object, str]]:
    """(name, specifier, requirement text) for each requirement of `wheel` that applies in `env`."""
    needs = []
    for text in requires_dist(wheel):
        name, specifier, applies = parse_requirement(text)
        if applies(env):
            needs.append((name, specifier, text))
    return needs


def satisfied_by(specifier, version: str | None) -> bool:
    """Whether a known host version meets `specifier` (an unversioned need is met by any)."""
    if not str(specifier):
        return True
    if version is None or not hasattr(specifier, "contains"):
        return False
    return specifier.contains(version, prereleases=True)


def build(
    dest: Path,
    *,
    python_version=None,
    implementation=None,
    abi=None,
    platforms=(),
    exclude=(),
    keep=(),
    image=(),
    known_versions=None,
    requirements=REQUIREMENTS,
    harness=True,
    clean=True,
    log=print,
) -> dict:
    """Fill `dest`; return what is in it. Raises RuntimeError when the result would not install.

    Left out: torch and Triton; every package named in `exclude` (the caller vouches for the
    host's copy); and a package of the host's `image` where the host's copy surely does: a
    requirement of ours pinned with == only where the image's version is known and equal, a
    dependency only where no wheel kept here asks for a version of it that the host's copy is not
    known to have (celery pins python-dateutil and asks for click>=8.3.1: those travel, and pip
    uses them only if the host's own copy falls short)."""
    upstream = load_upstream_module()
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env = marker_env(python_version or here, platforms)
    lines = [line for path in requirements for line in requirement_lines(Path(path))]
    # Only the lines whose marker holds on the target (numpy and scipy are pinned per Python).
    lines = [line for line in lines if parse_requirement(line)[2](env)]
    pinned = {requirement_name(line): requirement_pin(line) for line in lines}
    keep = {normalise(n) for n in keep}
    known = {normalise(k): v for k, v in (known_versions or {}).items()}
    explicit = ({normalise(n) for n in exclude} | set(HOST_TORCH)) - keep
    image = {normalise(n) for n in image} - keep
    dropped = set()
    for name, pin in pinned.items():
        if name in explicit or (name in image and (pin is None or known.get(name) == pin)):
            dropped.add(name)
            if name not in HOST_TORCH:
                log(f"left out: {name}; the host must already have {name}{'==' + pin if pin else ''}")
        elif name in image:
            log(f"kept: {name}=={pin} (the host has {name}, not known to be at {pin})")
    wanted = [line for line in lines if requirement_name(line) not in dropped]

    if clean and dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)
    flags = target_flags(python_version, implementation, abi, platforms)
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "requirements.txt"
        listing.write_text("\n".join(wanted) + "\n")
        download = Path(tmp) / "wheels"
        pip("download", "--only-binary=:all:", "--dest", download, *flags, "-r", listing)
        wheels = {}
        for wheel in sorted(download.iterdir()):
            if wheel.suffix != ".whl":
                raise RuntimeError(f"pip downloaded something other than a wheel: {wheel.name}")
            wheels[wheel_name_version(wheel.name)[0]] = wheel
        # Dependencies that the image has: out unless a kept wheel asks for a version of them.
        optional = {name for name in wheels if name in image and name not in pinned}
        kept = set(wheels) - explicit - dropped - optional
        needs = {name: needs_of(wheels[name], env) for name in wheels}
        changed = True
        while changed:
            changed = False
            for name in sorted(kept):
                for need, specifier, text in needs[name]:
                    if need in optional and not satisfied_by(specifier, known.get(need)):
                        optional.discard(need)
                        kept.add(need)
                        changed = True
                        log(
                            f"kept: {need} ({wheels[name].name.split('-')[0]} asks for {text.split(';')[0]}; the host's version is not known)"
                        )
        for name in sorted(kept):
            shutil.copy2(wheels[name], dest / wheels[name].name)
        if harness:
            version = upstream.LIGER_KERNEL_VERSION
            pip(
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                Path(tmp) / "sdist",
                f"liger-kernel=={version}",
            )
            archive = upstream.archive_find(Path(tmp) / "sdist", version)
            upstream.archive_check(archive, version=version, required=True)
            shutil.copy2(archive, dest / archive.name)

    left_out = explicit | dropped | optional
    report = check(
        dest, python_version=python_version or here, platforms=platforms, left_out=left_out, env=env
    )
    ours = [(line, "requirements") for line in lines if requirement_name(line) in dropped - set(HOST_TORCH)]
    report["host_needs"] = ours + report["host_needs"]
    (dest / "HOST-NEEDS.txt").write_text(
        "# What the wheels here ask of packages left out of this wheelhouse: the host's own copies must\n"
        "# satisfy these (only requirements that apply on the target are listed).\n"
        + "".join(f"{text}    # {who}\n" for text, who in report["host_needs"])
    )
    report["wheels"] = sorted(w.name for w in dest.glob("*.whl"))
    report["left_out"] = sorted(left_out)
    report["bytes"] = sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
    return report


def check(dest: Path, *, python_version: str, platforms=(), left_out=(), env=None) -> dict:
    """Each wheel fits the target, one version per package, no torch/Triton; and what the wheels
    ask of the packages left out."""
    env = env or marker_env(python_version, platforms)
    problems = []
    versions: dict[str, list[str]] = {}
    for wheel in sorted(dest.glob("*.whl")):
        name, version = wheel_name_version(wheel.name)
        versions.setdefault(name, []).append(version)
        if not wheel_fits(wheel.name, python_version=python_version, platforms=platforms):
            problems.append(f"{wheel.name} does not install on Python {python_version} {' '.join(platforms)}")
        if name in HOST_TORCH:
            problems.append(f"{wheel.name}: the host brings its own {name}")
    problems += [
        f"{name}: more than one version ({', '.join(v)})" for name, v in versions.items() if len(v) > 1
    ]
    if problems:
        raise RuntimeError("the wheelhouse would not install:\n  " + "\n  ".join(problems))
    host_needs = []
    for wheel in sorted(dest.glob("*.whl")):
        name, version = wheel_name_version(wheel.name)
        for need, _specifier, text in needs_of(wheel, env):
            if need in set(left_out):
                host_needs.append((text, f"{name} {version}"))
    return {"packages": {n: v[0] for n, v in versions.items()}, "host_needs": host_needs}


def size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MiB ({n:,} bytes)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="See docs/reruns.md.")
    parser.add_argument(
        "--dest", type=Path, default=ROOT / "var" / "wheelhouse", help="folder to fill (emptied first)"
    )
    parser.add_argument(
        "--host", choices=sorted(HOSTS), help="a known host image: its Python, platform and packages"
    )
    parser.add_argument("--python-version", help="e.g. 3.12 (default: this interpreter's)")
    parser.add_argument("--implementation", help="e.g. cp")
    parser.add_argument("--abi", help="e.g. cp312")
    parser.add_argument(
        "--platform",
        action="append",
        default=[],
        help="e.g. manylinux_2_28_x86_64; repeatable, or comma-separated",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="packages the host already has (comma-separated, repeatable)",
    )
    parser.add_argument(
        "--keep", action="append", default=[], help="carry these even where the host image has them"
    )
    parser.add_argument(
        "--requirement",
        "-r",
        action="append",
        type=Path,
        help="requirement files (default: requirements.txt and requirements-worker.txt)",
    )
    parser.add_argument(
        "--no-harness", action="store_true", help="leave out the liger-kernel source distribution"
    )
    args = parser.parse_args(argv)

    def names(values):
        return [n.strip() for value in values for n in value.split(",") if n.strip()]

    host = HOSTS.get(args.host, {})
    python_version = args.python_version or host.get("python_version")
    platforms = names(args.platform) or list(host.get("platforms", ()))
    implementation = (
        args.implementation or host.get("implementation") or ("cp" if python_version or platforms else None)
    )
    abi = args.abi or host.get("abi")
    if abi is None and python_version and implementation == "cp":
        abi = "cp" + "".join(python_version.split(".")[:2])
    try:
        report = build(
            args.dest.resolve(),
            python_version=python_version,
            implementation=implementation,
            abi=abi,
            platforms=platforms,
            exclude=names(args.exclude),
            keep=names(args.keep),
            image=host.get("image", ()),
            known_versions=host.get("known_versions"),
            requirements=args.requirement or REQUIREMENTS,
            harness=not args.no_harness,
        )
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        sys.exit(f"wheelhouse: {exc}")
    dest = args.dest.resolve()
    print(
        f"\n{len(report['wheels'])} wheels, one version each, all for Python {python_version or sys.version.split()[0]}"
        f"{' ' + ', '.join(platforms) if platforms else ''}:"
    )
    for wheel in report["wheels"]:
        print(f"  {(dest / wheel).stat().st_size / 2**10:8.0f} KiB  {wheel}")
    for sdist in sorted(dest.glob("*.tar.gz")):
        print(f"  {sdist.stat().st_size / 2**10:8.0f} KiB  {sdist.name} (sha256 checked)")
    if report["host_needs"]:
        print(f"\nThe host's own copies must satisfy (also in {dest / 'HOST-NEEDS.txt'}):")
        for requirement, who in report["host_needs"]:
            print(f"  {requirement}    # {who}")
    print(f"\nTotal: {size_text(report['bytes'])} in {dest}")
    print(
        "On the host:\n"
        f"  python3 -m pip install --no-index --find-links {dest.name} -r requirements.txt -r requirements-worker.txt\n"
        f"  python3 manage.py fetch_harness --archive {dest.name}"
    )


if __name__ == "__main__":
    main()
