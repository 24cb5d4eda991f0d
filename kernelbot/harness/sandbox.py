"""Parent side: one fresh worker process per evaluation, with a time limit and a private result channel."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelbot.harness.protocol import ChannelError, open_sealed, read_frame

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
# Secrets never reach untrusted code: any variable whose name looks like one is dropped.
_SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL")


class SandboxFailure(Exception):
    """The evaluation ended without an answer: timeout, crash, or a forged channel."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def worker_env(cache_dir: Path | None, device: str = "cpu") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not any(m in k.upper() for m in _SECRET_MARKERS)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        # One thread: on a shared 2-core CI box, idle OpenMP spinners of the other side's process would
        # otherwise dominate the noise; single-threaded CPU timings compare base and head fairly.
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no compile-worker pool: a child process is a red flag
    if cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / "inductor")
        env["TRITON_CACHE_DIR"] = str(cache_dir / "triton")
    return env


def _signal_reason(returncode: int) -> str:
    if returncode < 0:
        sig = signal.Signals(-returncode)
        hints = {
            signal.SIGSEGV: "segmentation fault",
            signal.SIGKILL: "killed (out of memory?)",
            signal.SIGABRT: "aborted",
            signal.SIGBUS: "bus error",
            signal.SIGFPE: "floating-point exception",
        }
        return f"the process died of {sig.name} ({hints.get(sig, 'signal')})"
    return f"the process exited with code {returncode} before answering (os._exit or sys.exit in candidate code?)"


class Sandbox:
    """A worker process: `request` sends one command and waits for its sealed answer."""

    def __init__(self, *, device: str, memory_limit_mb: int, cache_dir: Path | None = None) -> None:
        self.key = secrets.token_bytes(32)
        key_r, key_w = os.pipe()
        self._result_r, result_w = os.pipe()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the sandbox; closed in close())
        limit = memory_limit_mb * 1024 * 1024 if device == "cpu" else None

        def preexec() -> None:
            if limit is not None:  # CUDA reserves huge virtual ranges, so the cap is for CPU runs only
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelbot.harness.worker", str(key_r), str(result_w)],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=(key_r, result_w),
            env=worker_env(cache_dir, device),
            start_new_session=True,
            preexec_fn=preexec,
        )
        os.close(key_r)
        os.close(result_w)
        os.write(key_w, self.key)
        os.close(key_w)

    def request(self, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(command) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the process is gone; the read below classifies why
        deadline = time.monotonic() + timeout_s
        try:
            return open_sealed(self.key, read_frame(self._result_r, deadline))
        except TimeoutError:
            self.kill()
            raise SandboxFailure(
                "timeout", f"no answer within {timeout_s:g} s (hang or far too slow); the process was killed"
            ) from None
        except ChannelError as exc:
            if "closed" in str(exc):  # EOF: the process is gone (or closed its end, which we treat alike)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
                if self.proc.poll() is not None:
                    raise SandboxFailure(
                        "crashed", _signal_reason(self.proc.returncode) + self.log_tail()
                    ) from None
            self.kill()
            raise SandboxFailure("rejected", f"anti-hack check: {exc}") from None

    def log_tail(self, lines: int = 6) -> str:
        self._log.seek(0)
        text = self._log.read()[-4000:].decode(errors="replace").strip().splitlines()[-lines:]
        return (": " + " | ".join(line.strip() for line in text if line.strip())) if text else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(SandboxFailure):
                self.request({"cmd": "quit"}, timeout_s=10)
        self.kill()
        os.close(self._result_r)
        self._log.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
