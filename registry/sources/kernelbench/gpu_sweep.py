"""Measure KernelBench's problems on this host's GPU under kernelindex-cuda-v1, for the registry to
record (`manage.py record_kernelbench_gpu`). No Django: it runs on a GPU host with torch, numpy,
scipy and nvidia-ml-py, from a copy of the repository.

    python -m registry.sources.kernelbench.gpu_sweep --out var/kernelbench-gpu.jsonl --deadline 500

The problems are the files the newest bundled version's timings name (the current KernelBench
runs), level by level, each under every `--implementation` in turn. One child process
(`harness --serve`) measures them one after another, so torch is imported once, not once per
problem; a problem that kills it (a poisoned CUDA context) is recorded as failed and a new child
takes the next. A problem that runs past `--problem-timeout` is recorded as such, and its child
killed. Each answer is one JSON line of `--out`, written as soon as it comes, so a sweep stopped
by the host's limit keeps what it measured; a second sweep on the same file measures only what
is not in it yet, and `--skip FILE` leaves out what another output file holds (a card's earlier
sweep, already shipped), so that new measurements go to a new file. The deadline is checked
before each problem: one started before it may end after it, by at most the problem timeout.
"""

import argparse
import gzip
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from registry.reruns.harness.timing import DEFAULT_SETTINGS
from registry.sources.kernelbench.harness import CONFIGURATIONS
from registry.sources.kernelbench.history import versions

BUNDLED = Path(__file__).resolve().parent / "data" / "kernelbench.tar.xz"
GPU_DIR = BUNDLED.parent / "gpu"  # this module's output from GPU hosts, as recorded (services.bundled_load)
PROBLEM_TIMEOUT_S = 120.0


def problems(archive: Path, levels: list[str]) -> list[dict]:
    """The problem files the newest version's timings name, in level and file order, each once."""
    newest = versions(archive)[-1]
    blobs = {(row.level, row.problem): row.problem_blob for row in newest.rows() if row.problem_blob}
    chosen = []
    for (level, name), blob in sorted(blobs.items(), key=lambda item: (item[0][0], _number(item[0][1]))):
        if level in levels:
            text = newest.problem_text(blob)
            chosen.append(
                {
                    "level": level,
                    "problem": name,
                    "commit": newest.commit,
                    "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                    "problem_text": text,
                }
            )
    return chosen


def _number(name: str) -> int:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**6


class Child:
    """The harness serving specs, one line each way; started again after it dies."""

    def __init__(self):
        self.process = None
        self.answers: queue.Queue = queue.Queue()

    def ask(self, spec: dict, timeout: float) -> dict:
        if self.process is None or self.process.poll() is not None:
            self._start()
        self.process.stdin.write(json.dumps(spec) + "\n")
        self.process.stdin.flush()
        try:
            answer = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            return {"error": f"ran past the problem timeout of {timeout:.0f} s", "timeout": True}
        if answer is None:  # the child's stdout closed: it died on this problem
            code = self.process.wait()
            self.process = None
            return {"error": f"the harness process died (exit {code})"}
        return answer

    def _start(self) -> None:
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "registry.sources.kernelbench.harness", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.answers = queue.Queue()
        threading.Thread(target=self._read, args=(self.process, self.answers), daemon=True).start()

    @staticmethod
    def _read(process, answers) -> None:
        for line in process.stdout:
            try:
                answers.put(json.loads(line))
            except ValueError:
                answers.put({"error": f"the harness wrote a line that is not JSON: {line[:200]!r}"})
        answers.put(None)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


def output_lines(path: Path) -> list[str]:
    """The lines of a sweep's output file, plain or gzip-compressed (`.gz`): what both this sweep
    (resuming) and the registry's recorder (measurements._entries) read."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8").splitlines()


def done_keys(out: Path) -> set:
    """The (problem digest, implementation) pairs a sweep's output file holds (plain or .gz)."""
    if not out.is_file():
        return set()
    keys = set()
    for line in output_lines(out):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill: measured again
        keys.add((entry["sha256"], entry["implementation"]))
    return keys


def sweep(args) -> int:
    began = time.monotonic()
    timing_settings = {**DEFAULT_SETTINGS, "budget_s": args.budget}
    todo = [
        (problem, implementation)
        for problem in problems(args.archive, args.levels)
        if not args.names or problem["problem"] in args.names
        for implementation in args.implementations
    ]
    if args.again:  # another card's sweep: measure what it measured, to judge it
        wanted = done_keys(args.again)
        todo = [
            (problem, implementation)
            for problem in problems(args.archive, args.levels)
            for implementation in sorted(CONFIGURATIONS)
            if (problem["sha256"], implementation) in wanted
        ]
    done = done_keys(args.out)
    skipped = set().union(*(done_keys(path) for path in args.skip or [])) - done
    leave = done | skipped
    todo = [(p, i) for p, i in todo if (p["sha256"], i) not in leave]
    print(
        f"{len(todo)} to measure ({len(done)} already in {args.out}"
        + (
            f", {len(skipped)} skipped as in {', '.join(str(path) for path in args.skip)})"
            if args.skip
            else ")"
        ),
        flush=True,
    )
    child, measured = Child(), 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        for problem, implementation in todo:
            if time.monotonic() - began > args.deadline:
                print(f"deadline: {len(todo) - measured} left", flush=True)
                break
            spec = {
                "problem_text": problem["problem_text"],
                "implementation": implementation,
                "device": args.device,
                "timing": timing_settings,
            }
            started = time.monotonic()
            answer = child.ask(spec, args.problem_timeout)
            entry = {
                **{key: problem[key] for key in ("level", "problem", "commit", "sha256")},
                "implementation": implementation,
                "timing": timing_settings,
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "seconds": round(time.monotonic() - started, 3),
                **answer,
            }
            out.write(json.dumps(entry) + "\n")
            out.flush()
            measured += 1
            result = answer.get("result") or {}
            print(
                f"{problem['level']}/{problem['problem']} {implementation}: "
                + (f"{result['median']:.4g} ms" if result else answer.get("error", "")[:160])
                + f" ({entry['seconds']:.1f} s)",
                flush=True,
            )
    child.stop()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--archive", type=Path, default=BUNDLED)
    parser.add_argument("--levels", nargs="+", default=["level1", "level2", "level3"])
    parser.add_argument(
        "--implementation", dest="implementations", action="append", choices=sorted(CONFIGURATIONS)
    )
    parser.add_argument("--problem", dest="names", action="append", help="only these files (e.g. 19_ReLU.py)")
    parser.add_argument(
        "--again", type=Path, help="measure again what this output file of another card's sweep holds"
    )
    parser.add_argument(
        "--skip",
        type=Path,
        action="append",
        help="leave out what this output file holds (a sweep already shipped); may be given again",
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of sampling a problem")
    parser.add_argument("--deadline", type=float, default=500.0, help="seconds; no problem starts after")
    parser.add_argument("--problem-timeout", type=float, default=PROBLEM_TIMEOUT_S)
    args = parser.parse_args(argv)
    args.implementations = args.implementations or ["eager"]
    for path in args.skip or []:
        if not path.is_file():
            parser.error(f"--skip {path}: no such file")
    return sweep(args)


if __name__ == "__main__":
    sys.exit(main())
