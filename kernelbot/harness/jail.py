"""Parent side: the OS-level sandbox every process that runs PR or candidate code starts in (bubblewrap).

A jailed process gets: no network (its own, empty network namespace), its own PID namespace and `/proc`
(the runner's processes, their environments and `/proc/<ppid>` are not there), the system and Python
read-only, the repository under test read-only with its `.git` hidden, a private writable `/tmp` (also
its HOME), only the caches it is given writable, an allow-listed environment, no capabilities, and death
with its parent (bwrap's `--die-with-parent`, and the PID namespace ends every process in it when its
first process dies, so a double-forked daemon does not outlive the run). GPU device nodes are bound in.

bubblewrap is Debian's `bubblewrap` package; it needs user namespaces (or root). Where it cannot run,
untrusted code is refused unless the configuration says `harness.sandbox: none` (documented as unsafe).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the kernelbot package: the only part of it a jail sees
MODES = ("bwrap", "none")

# The environment a jailed process gets: names, or prefixes ending in "_"; never a deny-list, so a secret
# under a name nobody thought of (GH_PAT, a database URL with a password) stays outside.
ENV_ALLOWED = frozenset(
    {
        "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
        "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING",
        "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
        "PYTORCH_CUDA_ALLOC_CONF", "TORCH_CUDA_ARCH_LIST", "CC", "CXX",
        "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",  # some processors need them (wrong results without)
    }
)  # fmt: skip
ENV_ALLOWED_PREFIXES = ("NCCL_",)  # the device docs' NVLink multicast switches

# /etc entries the dynamic loader, compilers and torch need; the rest of /etc (shadow, machine secrets,
# the runner's configuration) stays outside.
_ETC = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
    "localtime", "timezone", "ssl", "ca-certificates", "gai.conf", "os-release", "debian_version",
)  # fmt: skip
# Not /opt: runners live there (/opt/actions-runner keeps its credentials); a Python under /opt comes in
# through python_paths().
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/sys")


class JailUnavailable(Exception):
    """bubblewrap cannot run here; the message says why and what to do, in one line."""


def environment(extra: dict[str, str]) -> dict[str, str]:
    """The allow-listed part of this process's environment, plus what the harness sets itself."""
    kept = {k: v for k, v in os.environ.items() if k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)}
    kept.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return {**kept, "HOME": "/tmp", "TMPDIR": "/tmp", **extra}


def python_paths() -> list[Path]:
    """What the interpreter needs to start and import torch: its prefixes and every import path that exists.

    Absolute and resolved; never a folder that holds kernelbot's own checkout (its .git, its working tree):
    the package folder alone is bound for that (bwrap_command)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    paths |= set(sysconfig.get_paths().values())
    paths |= {p for p in sys.path if p}
    paths |= {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    resolved = {Path(p).resolve() for p in paths}
    # A working directory on sys.path ('' or '.') must not bring the runner's /tmp, home or root in.
    # Nor a checkout (a folder with a .git: a script's folder or the working directory of `python -m`).
    never = {Path("/"), Path("/tmp"), Path.home()}
    return sorted(
        p
        for p in resolved
        if p.is_dir() and p not in never and not PACKAGE_DIR.is_relative_to(p) and not (p / ".git").exists()
    )


# The compilers a subject may build with (torch.compile's C++ wrapper, load_inline, CuPy's nvcc mode).
TOOLS = ("cc", "c++", "gcc", "g++", "nvcc", "ninja", "ld")


def _temp_dirs() -> set[Path]:
    return {Path("/tmp"), Path(tempfile.gettempdir()).resolve()}


def toolchain_paths(path: str | None = None) -> list[Path]:
    """Install prefixes of the compilers on PATH (and CC/CXX) that lie outside the system folders already
    bound (a GPU image's /opt/gcc, say): each prefix is the folder above the compiler's bin/, read-only.
    Never a folder of fewer than two levels (`/opt`, `/data`), anything in the home folder (~/.local holds
    tokens; a Python there comes in through python_paths()) or a temporary folder, nor a folder above one
    of those, this checkout or the working directory (bwrap_command adds: nor above a bound tree)."""
    search = path if path is not None else os.environ.get("PATH", "")
    search = os.pathsep.join(p for p in search.split(os.pathsep) if os.path.isabs(p))  # no relative entries
    names = [*TOOLS, *(os.environ[k] for k in ("CC", "CXX") if os.environ.get(k))]
    temp = _temp_dirs()
    found = set()
    for name in names:
        where = shutil.which(name, path=search)
        if where is None or not os.path.isabs(where):
            continue
        real = Path(where).resolve()
        prefix = real.parent.parent if real.parent.name == "bin" else real.parent
        if len(prefix.parts) < 3 or any(prefix.is_relative_to(d) for d in _SYSTEM):
            continue  # `/`, `/opt`, `/data` are too wide; system folders are bound already
        if prefix.is_relative_to(Path.home()) or any(prefix.is_relative_to(t) for t in temp):
            continue
        if any(p.is_relative_to(prefix) for p in (PACKAGE_DIR, Path.cwd(), Path.home(), *temp)):
            continue
        found.add(prefix)
    return sorted(found)


def _gpu_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri/*"))


def _hide_git(root: Path) -> list[str]:
    """A checkout's .git (a folder, or a worktree's pointer file) holds the remote's credentials: hidden."""
    git = root / ".git"
    if git.is_dir():
        return ["--tmpfs", str(git)]
    if git.exists():
        return ["--ro-bind", "/dev/null", str(git)]
    return []


SHM_BYTES = 64 << 20  # /dev/shm (POSIX semaphores and shared memory a library may make)


@functools.cache
def _sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bubblewrap takes --size for a tmpfs (0.7 and later; Debian 12 ships 0.8)."""
    done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30, check=False)
    return "--size" in done.stdout + done.stderr


def bwrap_command(
    argv: list[str],
    *,
    readable: Iterable[Path],
    writable: Iterable[Path],
    env: dict[str, str],
    tmp_bytes: int | None = None,
) -> list[str]:
    """The bwrap command line that runs `argv` jailed; `readable` paths bind read-only, `writable` read-write.

    `tmp_bytes` caps the private /tmp: a tmpfs is memory the address-space limit does not count, so without
    a cap a subject could hold half the host's memory there (the kernel's default size)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise JailUnavailable("bubblewrap (bwrap) is not installed")
    cmd = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    sized = _sizes_tmpfs(bwrap)
    cmd += [*(["--size", str(tmp_bytes)] if sized and tmp_bytes is not None else []), "--tmpfs", "/tmp"]
    cmd += [*(["--size", str(SHM_BYTES)] if sized else []), "--tmpfs", "/dev/shm"]  # /dev is read-only below
    for node in _gpu_nodes():
        cmd += ["--dev-bind", node, node]
    system = [p for p in _SYSTEM if os.path.exists(p)] + [
        f"/etc/{n}" for n in _ETC if os.path.exists(f"/etc/{n}")
    ]
    for where in system:
        cmd += ["--ro-bind", where, where]
    readable = list(readable)
    tools = [p for p in toolchain_paths(env.get("PATH")) if not any(r.is_relative_to(p) for r in readable)]
    for path in [*python_paths(), PACKAGE_DIR]:
        cmd += ["--ro-bind", str(path), str(path)]
    for path in tools:
        cmd += ["--ro-bind", str(path), str(path), *_hide_git(path)]
    for path in readable:
        cmd += ["--ro-bind", str(path), str(path), *(_hide_git(path) if path.is_dir() else [])]
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)
        cmd += ["--bind", str(path), str(path)]
    # The root bwrap builds the mounts on is a tmpfs too: read-only once they are made, so /tmp and the
    # writable caches are the only places a subject can write (and hold memory in).
    # /dev is a tmpfs bwrap fills with device nodes: read-only too (the nodes still open for writing).
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--clearenv", "--chdir", "/tmp"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *argv]


@functools.cache
def probe() -> str | None:
    """None where bwrap runs a jailed process here; otherwise why not (one line)."""
    try:
        cmd = bwrap_command(["/bin/true"], readable=[], writable=[], env=environment({}))
        done = subprocess.run(cmd, capture_output=True, timeout=30, check=False)
    except JailUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0]
        return f"bubblewrap failed here ({first}): user namespaces may be disabled"
    return None


def require(mode: str) -> None:
    """Raise JailUnavailable (one line: the cause and the fix) unless untrusted code can be jailed in `mode`."""
    if mode not in MODES:
        raise JailUnavailable(f"harness.sandbox must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "none":
        return
    why = probe()
    if why is not None:
        raise JailUnavailable(
            f"cannot sandbox untrusted code: {why}; install it (apt-get install bubblewrap) or, on a "
            "machine that holds no secrets, set harness.sandbox: none in .github/kernelbot.yml"
        )
