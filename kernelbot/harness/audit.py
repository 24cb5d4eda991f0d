"""Sandbox side: a PEP 578 audit hook that refuses introspection and escapes to operator and candidate code.

Installed in the judge and the subject process after the harness and torch are imported and before any
untrusted file is; an audit hook cannot be removed from Python. For each watched event the Python stack is
read from the innermost frame outwards, skipping the standard library (`inspect`, `traceback`, `ctypes`,
`subprocess` ... act for whoever called them): the first frame outside it decides. Code in the installed
packages (torch, CuPy, Triton) and kernelbot may do what it needs (torch.compile reads frames and starts
compilers; load_inline runs the C++ compiler); code from any other file (the repository under test, the
candidate, `/tmp`, strings given to exec) is refused with PermissionError.

This is one layer of several (docs/security.md): native code (a C++ extension the candidate builds) is not
seen by it; the OS sandbox, the judge's separate process and its own clock hold whatever happens here.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
from typing import Any

# Events refused to untrusted callers. Frames are the way to the harness's objects; gc hands out every
# object; ctypes and code objects reach memory and forge filenames; the rest leave the process.
_REFUSED = frozenset(
    {
        "sys._getframe", "sys._getframemodulename", "sys._current_frames", "sys._current_exceptions",
        "object.__getattr__", "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
        "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "code.__new__", "function.__new__", "marshal.loads", "marshal.load", "exec", "compile",
        "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
        "os.killpg", "subprocess.Popen", "pty.spawn", "os.startfile",
        "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.sendto",
        "socket.sendmsg", "socket.gethostbyname", "socket.gethostbyaddr",
        "mmap.__new__", "sys.addaudithook",
        # Python 3.12+ (no such event before): a thread of the subject's own runs beside the timed calls,
        # unseen by threading.enumerate when started through _thread, and may finish before any guard looks.
        "_thread.start_new_thread", "_thread.start_joinable_thread",
    }
)  # fmt: skip
# ctypes: what reads or writes memory or calls a C function. Loading a library (ctypes.dlopen) is allowed:
# CuPy, a compiled extension with no Python frames of its own, loads NVRTC that way on the caller's behalf.
_REFUSED_PREFIXES = (
    "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.PyObj_FromPtr",
    "ctypes.call_function", "ctypes.set_errno", "ctypes.get_errno", "os.ptrace",
)  # fmt: skip
_PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir"})
_SETATTR_EVENTS = frozenset({"object.__setattr__", "object.__delattr__"})

_IMPORT_STEPS = frozenset({"_load_unlocked", "_find_and_load_unlocked", "exec_module"})
_state = threading.local()


def _dirs(paths: set[str]) -> tuple[str, ...]:
    return tuple(os.path.join(os.path.realpath(p), "") for p in paths if p)


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return _dirs({paths["stdlib"], paths["platstdlib"]})


def _trusted_dirs() -> tuple[str, ...]:
    """Installed packages and kernelbot: read-only inside the sandbox, so no file there is the subject's.
    Checked before the standard library: some interpreters keep site-packages inside the stdlib folder."""
    import kernelbot

    paths = sysconfig.get_paths()
    dirs = {paths["purelib"], paths["platlib"], os.path.dirname(os.path.dirname(kernelbot.__file__ or ""))}
    dirs |= {p for p in sys.path if "-packages" in p}
    return _dirs(dirs)


def _generated_dirs() -> tuple[str, ...]:
    """Where torch.compile and Triton write the modules they generate and import. Skipped like generated
    code: the frame that called into them decides (torch's runtime, or the subject's own frame)."""
    import tempfile

    names = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUPY_CACHE_DIR")
    dirs = {os.environ[n] for n in names if os.environ.get(n)}
    dirs |= {os.path.join(tempfile.gettempdir(), f"torchinductor_{os.environ.get('USER', '')}")}
    dirs |= {os.path.join(tempfile.gettempdir(), "torchinductor_root"), os.path.expanduser("~/.triton")}
    return _dirs(dirs)


class Hook:
    def __init__(self, untrusted: list[str]) -> None:
        self.generated = _generated_dirs()
        self.stdlib = _stdlib_dirs()
        self.trusted = _trusted_dirs()
        self.package = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "")
        # The operator's and candidate's own locations win over a trusted prefix they may sit under.
        self.untrusted = tuple(os.path.join(os.path.realpath(p), "") for p in untrusted)
        self.getframe = sys._getframe
        self.refusals: list[str] = []

    def _caller_untrusted(self) -> str | None:
        """The file of the first frame that is neither the standard library nor generated code, when it is
        not trusted code.

        Frozen importlib frames are skipped like the standard library, except that a real import in progress
        (`_load_unlocked`) allows the import's own steps: running a module's code is then judged by that
        module's own frames. Code with a made-up name ('<eval_with_key>', torch's generated modules) is
        skipped too: whoever called it decides, so wrapping a call in generated code gains nothing."""
        frame: Any = self.getframe(2)
        generated = False  # a module from a writable cache ran: an import step then does not vouch for it
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            if name.startswith("<"):
                if name.startswith("<frozen importlib") and code.co_name in _IMPORT_STEPS and not generated:
                    return None
            else:
                kind = self._kind(name)
                if kind == "generated":
                    generated = True
                elif kind != "skip":
                    return name if kind == "untrusted" else None
            frame = frame.f_back
        return None

    @functools.lru_cache(maxsize=4096)  # noqa: B019 (one hook a process, alive as long as the process)
    def _kind(self, filename: str) -> str:
        real = os.path.realpath(filename)
        if real.startswith(self.generated):
            return "generated"
        untrusted = max((len(p) for p in self.untrusted if real.startswith(p)), default=-1)
        if untrusted >= 0:
            # kernelbot's own package inside the tree under test (kernelbot measuring its own benchmarks from
            # its checkout) is still the harness. Only it: an in-tree .venv's site-packages stays the tree's
            # (a PR could add files there).
            return (
                "trusted" if real.startswith(self.package) and len(self.package) > untrusted else "untrusted"
            )
        if real.startswith(self.trusted):
            return "trusted"
        return "skip" if real.startswith(self.stdlib) else "untrusted"

    def _forged(self, path: str) -> bool:
        """Bytecode read from outside the read-only trees: a .pyc there may carry any file name (torch's), and
        the frames it makes would pass for trusted ones. Refused, the import machinery compiles the source."""
        return path.endswith(".pyc") and not os.path.realpath(path).startswith(self.stdlib + self.trusted)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if getattr(_state, "busy", False):
            return
        if event == "open" and args and isinstance(args[0], str) and self._forged(args[0]):
            raise PermissionError(f"kernelbot sandbox: open({args[0]!r}) would load code under a false name")
        watched = event in _REFUSED or event.startswith(_REFUSED_PREFIXES)
        if not watched and event in _PATH_EVENTS:
            path = os.fsdecode(args[0]) if args and isinstance(args[0], str | bytes) else ""
            # Relative paths and '//proc' count as what they name (a dir_fd-relative open stays the jail's).
            path = "/" + os.path.normpath(os.path.join(os.getcwd(), path)).lstrip("/") if path else ""
            watched = path.startswith("/proc") and not path.startswith(("/proc/self/stat", "/proc/cpuinfo"))
        if not watched and event in _SETATTR_EVENTS:
            watched = isinstance(args[0], type) and not self._own_type(args[0])
        if not watched:
            return
        _state.busy = True
        try:
            who = self._caller_untrusted()
        finally:
            _state.busy = False
        if who is not None:
            what = f"{event}({_short(args)})"
            self.refusals.append(f"{what} from {os.path.basename(who)}")
            raise PermissionError(f"kernelbot sandbox: {what} is not allowed in operator or candidate code")

    def _own_type(self, cls: type) -> bool:
        """A class the untrusted code defined itself may be changed by it (its own state, not ours)."""
        module = sys.modules.get(getattr(cls, "__module__", "") or "")
        where = getattr(module, "__file__", None) or ""
        return bool(where) and os.path.realpath(where).startswith(self.untrusted)


def _short(args: tuple[Any, ...]) -> str:
    try:
        text = ", ".join(repr(a) if isinstance(a, str | int | bytes) else type(a).__name__ for a in args)
    except Exception:
        text = "..."
    return text[:80]


def locations(job: dict[str, Any]) -> list[str]:
    """Where a job's untrusted files live: the operator's tree and the candidate's folder."""
    places = [job["root"]]
    if job.get("candidate"):
        places.append(os.path.dirname(os.path.abspath(job["candidate"])))
    return places


_installed: Hook | None = None


def install(untrusted: list[str]) -> Hook:
    """Install the hook once per process; later calls add locations to what counts as untrusted."""
    global _installed
    if _installed is None:
        _installed = Hook(untrusted)
        # The method bound now, not the instance: an instance is called through type(hook).__call__, looked up
        # on the class at every audited event (attacker round 10 replaced it and computed outputs as the worker
        # copied them). The class is a watched namespace besides.
        sys.addaudithook(_installed.__call__)
    else:
        extra = tuple(os.path.join(os.path.realpath(p), "") for p in untrusted)
        _installed.untrusted = tuple(dict.fromkeys(_installed.untrusted + extra))
        _installed._kind.cache_clear()
    return _installed


def refusal() -> str | None:
    """The first thing this process's hook refused, if any (caught or not by the code that tried it)."""
    return _installed.refusals[0] if _installed is not None and _installed.refusals else None
