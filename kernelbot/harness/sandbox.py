"""Parent side: a judge and a subject process per evaluation, each jailed, with a time limit and a private
result channel from the judge (the subject has none)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelbot.harness import jail, link
from kernelbot.harness.protocol import ChannelError, open_sealed, read_frame, widen

MAX_FILE_BYTES = 256 << 20
# The candidates' compiler caches outlive each candidate (later ones reuse its builds); beyond this, what is
# there is thrown away as a candidate's sandbox closes, so no candidate can fill the disk across evaluations
# (within one, each file is held to MAX_FILE_BYTES).
CANDIDATE_CACHE_BYTES = 4 << 30


ENTRY_BYTES = 4096  # what an entry is counted at besides its blocks: empty files fill a disk's inodes too


def trim_cache(folder: Path, limit: int | None = None) -> bool:
    """Empty `folder` where what it holds passes `limit` (CANDIDATE_CACHE_BYTES): the disk its files take plus
    ENTRY_BYTES an entry, a folder that cannot be read counting as over. Its entries go, not the folder: it is
    the mount point of any candidate sandbox running beside. Links are removed, never followed (a candidate
    wrote the folder). Whether it emptied it."""
    limit = CANDIDATE_CACHE_BYTES if limit is None else limit
    total, unreadable = 0, list[OSError]()
    for root, dirs, files in os.walk(folder, onerror=unreadable.append):
        total += ENTRY_BYTES * (len(dirs) + len(files))
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
        if total > limit or unreadable:
            break
    if total <= limit and not unreadable:
        return False
    with contextlib.suppress(OSError):  # a failed chmod still leaves the entries to try
        os.chmod(folder, 0o700)
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                _unlock(entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    return True


def _unlock(path: str) -> None:
    """Make every folder under `path` writable by its owner (a candidate can lock one: chmod 000), top down, so
    each is opened after its parent was; links are skipped, never followed."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            sub = os.path.join(root, name)
            if not os.path.islink(sub):
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o700)


class SandboxFailure(Exception):
    """The evaluation ended without an answer: timeout, crash, or a forged channel."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


# The compiler caches under a cache root (worker_env names each); a sandbox may write these and nothing else of
# the root. The root also holds the trusted results (cached baselines: pipeline/baselines.py), which the
# operator's own processes (PR code) could once rewrite, since the whole root was bound writable (attacker
# round 58's reading): a forged eager or torch.compile baseline for a later run.
# load_inline's builds: by default under $HOME, which is the sandbox's own /tmp and gone when it ends, so every
# evaluation of the same source rebuilt it (40+ s for a CUDA extension on an H100).
COMPILER_CACHES = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "CUPY_CACHE_DIR": "cupy",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
}


def compiler_caches(cache_dir: Path) -> list[Path]:
    """The compiler cache folders under `cache_dir`, made if missing (a bind needs its source)."""
    folders = [cache_dir / name for name in COMPILER_CACHES.values()]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    return folders


def worker_env(cache_dir: Path | None, device: str = "cpu", gpu: str | None = None) -> dict[str, str]:
    """The environment of a process that runs untrusted code: an allow-list (jail.environment), plus ours;
    `gpu`: the one GPU it sees (a pool's pick), whatever this process sees."""
    extra = {"PYTHONPATH": str(jail.PACKAGE_DIR.parent), "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1"}
    if device == "cpu":
        # One thread: on a shared 2-core CI box, idle OpenMP spinners of the other side's process would
        # otherwise dominate the noise; single-threaded CPU timings compare base and head fairly.
        extra["OMP_NUM_THREADS"] = extra["MKL_NUM_THREADS"] = "1"
    extra["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no compile-worker pool: a child process is a red flag
    if gpu is not None:
        extra["CUDA_VISIBLE_DEVICES"] = gpu
    if cache_dir is not None:
        extra.update({variable: str(cache_dir / name) for variable, name in COMPILER_CACHES.items()})
    return jail.environment(extra)


def region_bytes(memory_limit_mb: int, device: str) -> int:
    """The size of the shared region outputs cross in, which bounds what a subject can hold there: its memory
    limit on the CPU; on CUDA (no limit on host memory) half the host's memory, as its private /tmp has."""
    if device == "cpu":
        return memory_limit_mb << 20
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def launch(
    argv: list[str],
    *,
    mode: str,
    env: dict[str, str],
    readable: list[Path],
    writable: list[Path],
    pass_fds: tuple[int, ...] = (),
    memory_limit_bytes: int | None = None,
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """Start `argv` (untrusted code) in the OS sandbox of `mode` (jail.py), in a process group of its own."""
    jail.require(mode)
    if mode == "bwrap":
        # /tmp (memory too) is held to the address-space limit where there is one (the CPU).
        argv = jail.bwrap_command(
            argv, readable=readable, writable=writable, env=env, tmp_bytes=memory_limit_bytes
        )

    def preexec() -> None:
        # Killed when the run dies, however it dies (bubblewrap does the same again for its child).
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if memory_limit_bytes is not None:  # CUDA reserves huge virtual ranges: CPU runs only
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
        # No file it writes (its log on the runner's disk, a cache entry) grows past this: a flood dies of SIGXFSZ.
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))

    return subprocess.Popen(
        argv, env=env, pass_fds=pass_fds, start_new_session=True, preexec_fn=preexec, **popen
    )


def run_jailed(
    argv: list[str],
    *,
    sandbox: str,
    env: dict[str, str],
    readable: list[Path],
    writable: list[Path],
    timeout_s: float,
    cwd: Path | None = None,
    capture: bool = False,
) -> tuple[int | None, bytes, bytes]:
    """Run untrusted `argv` to its end in the OS sandbox of the `harness.sandbox` setting, then kill its whole
    process group (a daemon it left goes with it). Returns its exit code (None: it ran past `timeout_s`) and,
    with `capture`, what it printed. For one-off runs outside the judge (the operator's trace, Nsight
    Compute's profile): with the container setting these take bubblewrap on the host, since what they answer
    is hints for the search, never a verdict."""
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    proc = launch(
        argv, mode="bwrap" if sandbox == "container" else sandbox, env=env, readable=readable,
        writable=writable, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, b"", b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode, stdout or b"", stderr or b""


def _signal_reason(returncode: int) -> str:
    if 128 < returncode < 128 + signal.NSIG:  # bubblewrap passes a signal death on as 128 + the signal
        returncode = 128 - returncode
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


# What an allocation or a library load that RLIMIT_AS refused prints (Python, C++, the loader).
OUT_OF_ADDRESS_SPACE = ("std::bad_alloc", "MemoryError", "Cannot allocate memory", "failed to map segment")


class Sandbox:
    """A judge process and a subject process, each jailed: `request` sends one command to the judge and
    waits for its sealed answer. The subject (operator, baseline or candidate) talks only to the judge."""

    def __init__(
        self,
        *,
        device: str,
        memory_limit_mb: int,
        cache_dir: Path | None = None,
        readable: list[Path] = (),  # type: ignore[assignment]
        mode: str = "bwrap",
        untrusted_cache: bool = False,
        gpu: str | None = None,
        lazy: bool = False,
    ) -> None:
        """`lazy`: the two processes start (interpreter, imports) but touch no device until the first
        request, so a sandbox can be started ahead while another one times on the same GPU."""
        jail.require(mode)  # before anything is opened: nothing to leak when it refuses
        self.key = secrets.token_bytes(32)
        key_r, key_w = os.pipe()
        self._result_r, result_w = os.pipe()
        to_subject_r, to_subject_w = os.pipe()
        from_subject_r, from_subject_w = os.pipe()
        for fd in (to_subject_w, from_subject_w):  # headers cross these; tensors cross the shared region
            widen(fd)
        region = link.shared_region(region_bytes(memory_limit_mb, device))
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the sandbox; closed in close())
        self._subject_log = tempfile.TemporaryFile()  # noqa: SIM115 (likewise)
        limit = memory_limit_mb * 1024 * 1024 if device == "cpu" else None
        self._limit_mb = memory_limit_mb if limit is not None else None

        def jailed(caches: Path | None) -> dict[str, Any]:
            writable = compiler_caches(caches) if caches is not None else []
            env = worker_env(caches, device, gpu)
            return {"mode": mode, "env": env, "readable": list(readable), "writable": writable}

        # A candidate writes compiler caches of its own: it cannot plant a kernel for a baseline's build, nor
        # for the judge's reference, which keeps to the trusted caches.
        subject_caches = cache_dir / "candidate" if cache_dir is not None and untrusted_cache else cache_dir
        # Trimmed as the sandbox closes (one walk an evaluation): a run killed before that is caught by the
        # next candidate's close.
        self._candidate_caches = subject_caches if untrusted_cache else None
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            self.subject = launch(
                [
                    sys.executable,
                    "-m",
                    "kernelbot.harness.worker",
                    str(to_subject_r),
                    str(from_subject_w),
                    str(region),
                    device,
                    *(["lazy"] if lazy else []),
                ],
                pass_fds=(to_subject_r, from_subject_w, region),
                memory_limit_bytes=limit,
                stdin=subprocess.DEVNULL,
                stdout=self._subject_log,
                stderr=subprocess.STDOUT,
                **jailed(subject_caches),
            )
            self.procs.append(self.subject)
            argv = [sys.executable, "-m", "kernelbot.harness.judge"]
            fds = (key_r, result_w, to_subject_w, from_subject_r, region)
            self.proc = launch(
                [*argv, *(str(fd) for fd in fds), device, *(["lazy"] if lazy else [])],
                pass_fds=fds,
                memory_limit_bytes=limit,
                stdin=subprocess.PIPE,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                **jailed(cache_dir),
            )
            self.procs.append(self.proc)
        finally:
            for fd in (key_r, result_w, to_subject_r, to_subject_w, from_subject_r, from_subject_w, region):
                os.close(fd)
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
            answer = open_sealed(self.key, read_frame(self._result_r, deadline))
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
                        "crashed", _signal_reason(self.proc.returncode) + self.log_tail(self._log)
                    ) from None
            self.kill()
            raise SandboxFailure("rejected", f"anti-hack check: {exc}") from None
        if answer.pop("subject_gone", False):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.subject.wait(timeout=5)
            code = self.subject.poll()
            why = _signal_reason(code) if code is not None else "the subject process stopped answering"
            answer["reason"] = why + self.log_tail(self._subject_log)
        return answer

    def log_tail(self, log: Any, lines: int = 6) -> str:
        log.seek(0)
        text = log.read()[-4000:].decode(errors="replace").strip().splitlines()[-lines:]
        shown = " | ".join(line.strip() for line in text if line.strip())
        hint = ""
        if self._limit_mb is not None and any(m in shown for m in OUT_OF_ADDRESS_SPACE):
            # A CUDA build of torch maps GBs of address space on import even for a CPU evaluation (the H100
            # image's torch 2.11+cu130 failed under 3000 MB): the limit, not the code, may be what broke.
            hint = (f"; it ran out of address space under the CPU memory limit ({self._limit_mb} MB): "
                    "raise memory_limit_mb in the config if this is not the code's own doing")  # fmt: skip
        return hint + (f"; it printed last: {shown}" if shown else "")  # the hint first: a reason may be cut

    def kill(self) -> None:
        """Both processes and all they started: killing a jail's first process ends its PID namespace."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(SandboxFailure):
                self.request({"cmd": "quit"}, timeout_s=10)
        self.kill()
        if self._candidate_caches is not None:
            trim_cache(self._candidate_caches)
        if self.proc.stdin is not None:  # the command pipe: its writer end is ours to close
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        os.close(self._result_r)
        self._log.close()
        self._subject_log.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
