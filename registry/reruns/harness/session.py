"""The parent side: one child process (runner.py) per session, a time limit per job, a memory guard,
and a bounded log. A harness failure of any kind comes back as a result, never as an exception.

A session stays warm between jobs (importing torch, transformers and liger-kernel takes seconds;
upstream itself runs a whole sweep in one process). A job that fails, times out or crashes
ends its session, so the next job starts from a fresh process and a fresh CUDA context.
"""

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "runner.py"
LOG_LIMIT = 20_000  # bytes of log kept per job: the end, where the error is
TIMED_OUT = "timed out: the job ran past its time limit and was killed"


class HarnessSession:
    def __init__(self, *, device: str, root: Path):
        self.device, self.root = device, Path(root)
        self.process = None
        self.environment = None
        self._log = None
        self._answers = None
        self._buffer = b""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def run(self, plan: dict, *, timeout_s: float) -> dict:
        """Run one plan; the time limit covers starting the process when it is not warm yet."""
        deadline = time.monotonic() + timeout_s
        offset = self._log_size()
        process_start_s = 0.0
        try:
            if not self.alive:
                began = time.monotonic()
                self._start(deadline)
                process_start_s = time.monotonic() - began
                offset = 0
            answer = self._ask({"plan": plan}, deadline)
            answer.setdefault("measured", {})["process_start_s"] = process_start_s
        except HarnessFailure as failure:
            self.close()
            answer = {
                "status": "failed",
                "error": str(failure),
                "timed_out": isinstance(failure, HarnessTimeout),
            }
        answer["log"] = self._log_since(offset)
        if answer["status"] != "ok":
            self.close()
        return answer

    def _start(self, deadline: float) -> None:
        self.close()
        if self._log is not None:
            self._log.close()
        self._log = tempfile.TemporaryFile()
        read_end, write_end = os.pipe()
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "KERNELINDEX_HARNESS_RESULT_FD": str(write_end),
            "KERNELINDEX_HARNESS_MEMORY_BYTES": str(memory_limit_bytes(self.device)),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-u", str(RUNNER)],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            env=env,
            cwd=tempfile.gettempdir(),
            start_new_session=True,
        )
        os.close(write_end)
        self._answers = read_end
        self._buffer = b""
        options = {"root": str(self.root), "device": self.device}
        ready = self._ask({"start": options}, deadline)
        if ready.get("status") != "ready":
            raise HarnessFailure(f"the harness could not start: {ready.get('error', 'no reason given')}")
        self.environment = ready["environment"]

    def _ask(self, request: dict, deadline: float) -> dict:
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise HarnessFailure(self._death()) from None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HarnessTimeout(TIMED_OUT)
            ready, _, _ = select.select([self._answers], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._answers, 65536)
            if not chunk:
                raise HarnessFailure(self._death())
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _death(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "the harness process stopped answering"
        if code < 0:
            return f"the harness process crashed: killed by {signal.Signals(-code).name}"
        return f"the harness process crashed: it exited with status {code}"

    def _log_size(self) -> int:
        return os.fstat(self._log.fileno()).st_size if self._log else 0

    def _log_since(self, offset: int) -> str:
        if self._log is None:
            return ""
        size = self._log_size()
        start = max(offset, size - LOG_LIMIT)
        self._log.seek(start)
        text = self._log.read(size - start).decode("utf-8", "replace")
        return ("[... earlier output cut ...]\n" if start > offset else "") + text

    def close(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.process.wait()
            self.process.stdin.close()
            self.process = None
        if self._answers is not None:
            os.close(self._answers)
            self._answers = None


class HarnessFailure(Exception):
    pass


class HarnessTimeout(HarnessFailure):
    """The job ran past its time limit: its process is killed, and its result says `timed_out`."""


def memory_limit_bytes(device: str) -> int:
    """The child's address-space limit. CPU only: CUDA reserves far more virtual address space
    than it uses, so on a GPU the allocator's own out-of-memory error is the guard."""
    if device != "cpu":
        return 0
    configured = os.environ.get("KERNELINDEX_HARNESS_MEMORY_MB", "")
    if configured:
        return int(configured) * 2**20
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(physical * 0.75)


_warm: dict[tuple, HarnessSession] = {}
_lock = threading.Lock()


def session_run(plan: dict, *, root: Path, timeout_s: float) -> dict:
    """Run on this process's warm session for the device (KERNELINDEX_HARNESS_WARM=0: a fresh
    process for every job)."""
    key = (plan["device"], str(root))
    with _lock:
        session = _warm.get(key) or HarnessSession(device=plan["device"], root=root)
        answer = session.run(plan, timeout_s=timeout_s)
        if session.alive and os.environ.get("KERNELINDEX_HARNESS_WARM", "1") != "0":
            _warm[key] = session
        else:
            session.close()
            _warm.pop(key, None)
        return answer


@atexit.register
def sessions_close() -> None:
    with _lock:
        for session in _warm.values():
            session.close()
        _warm.clear()
