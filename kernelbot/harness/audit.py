"""Sandbox side: a PEP 578 audit hook that refuses introspection and escapes to operator and candidate code.

Installed in the judge and the subject process after the harness and torch are imported and before any
untrusted file is; an audit hook cannot be removed from Python. For each watched event the Python stack is
read from the innermost frame outwards, skipping the standard library (`inspect`, `traceback`, `ctypes`,
`subprocess` ... act for whoever called them): the first frame outside it decides. Code in the installed
packages (torch, CuPy, Triton) and kernelbot may do what it needs (torch.compile reads frames and starts
compilers; load_inline runs the C++ compiler); code from any other file (the repository under test, the
candidate, `/tmp`, strings given to exec) is refused with PermissionError.

The hook runs on the harness's own events too (the guard's reads of /proc, the worker's copy), so nothing it
does may run code a subject could have put in place: attacker round 10 replaced the hook's class's
`__call__`, round 13 the hook instance's `getframe`, and each computed a sample's outputs inside the
harness's own calls. So the hook is a closure over values bound when it is built (C functions, tuples of
strings): its code reads no global and no builtin name (tests/test_trust.py reads its bytecode), and it is
referenced from nowhere a subject can reach (only the interpreter's list of hooks holds it: Python lets
anyone rewrite a closure's cells through `__closure__`, which raises no audit event, so being unreachable
is what keeps them).

This is one layer of several (docs/security.md): native code (a C++ extension the candidate builds) is not
seen by it; the OS sandbox, the judge's separate process and its own clock hold whatever happens here.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from typing import Any

from kernelbot.harness.forbidden import FRAME_HANDERS

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
# Of those, the ones nothing honest raises while operator or candidate code is on the stack: judged by every frame,
# not the innermost caller alone, since a function of torch's that calls what it is handed (a trampoline:
# `torch.utils._pytree.tree_map(sys.addaudithook, [hook])`) is otherwise the caller that decides (attacker round
# 33 added an audit hook of its own so, which ran the subject's code at the sealed copy's mmap event). The rest
# (a compile's files, processes, code objects, dynamic shapes' frame reads) torch raises on its own behalf
# under a compiled candidate, so they stay judged by the innermost caller.
_STRICT = frozenset(
    {
        "sys.addaudithook", "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
        "sys._current_frames", "sys._current_exceptions", "gc.get_objects", "gc.get_referrers",
        "gc.get_referents",
    }
)  # fmt: skip
# ctypes: what reads or writes memory or calls a C function. Loading a library (ctypes.dlopen) is allowed:
# CuPy, a compiled extension with no Python frames of its own, loads NVRTC that way on the caller's behalf.
_REFUSED_PREFIXES = (
    "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.PyObj_FromPtr",
    "ctypes.call_function", "ctypes.set_errno", "ctypes.get_errno", "os.ptrace",
)  # fmt: skip
# torch's helpers that hand their caller a frame act for whoever called them, like the standard library's
# `inspect`: a candidate calling one directly is refused; torch's own calls (TorchScript's name resolution,
# dynamic shapes' source locations) are judged by torch's frames below. By name and file, read from each
# frame's code: no spelling of the candidate's changes them.
_PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir"})
_IMPORT_STEPS = frozenset({"_load_unlocked", "_find_and_load_unlocked", "exec_module"})


def _dirs(paths: set[str]) -> tuple[str, ...]:
    return places([p for p in paths if p])


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


def places(paths: list[str]) -> tuple[str, ...]:
    """Untrusted locations as the hook compares them: real paths, each ending in a separator."""
    return tuple(os.path.join(os.path.realpath(p), "") for p in paths)


def build(
    box: list[tuple[str, ...]], refusals: list[str], *, trusted: tuple[str, ...] = ()
) -> tuple[Callable[[str, tuple[Any, ...]], None], Callable[[str], str]]:
    """The hook, and its judgement of a file ("trusted", "untrusted", "generated", "skip": for tests).

    `box[0]`: the untrusted locations (`places`), read at each event, so that a later install can add some.
    `refusals`: what the hook refused, appended to. Both are the only state shared with the outside; a
    subject that rewrites them can mark nothing trusted (a file outside the trusted folders is untrusted
    whatever they hold) and can hide only a refusal it caught, not undo it."""
    # Everything the hook calls, bound here as locals of this function (cells of the closures below).
    getframe, getattr_, type_, len_, issubclass_ = sys._getframe, getattr, type, len, issubclass
    str_t, tuple_t, bytes_t, int_t = str, tuple, bytes, int
    starts, ends, split, join, decode = str.startswith, str.endswith, str.split, str.join, bytes.decode
    open_fd, close_fd, readlink, getcwd = os.open, os.close, os.readlink, os.getcwd
    o_path = os.O_PATH | os.O_CLOEXEC
    errors = (OSError, ValueError, TypeError)
    permission_error, function_t, module_t = PermissionError, types.FunctionType, types.ModuleType
    class_dict = type.__dict__["__dict__"].__get__  # a class's own namespace, whatever its metaclass says
    module_dict: Any = vars(types.ModuleType)["__dict__"].__get__
    code_of = types.FunctionType.__dict__["__code__"].__get__
    defaults_of = types.FunctionType.__dict__["__defaults__"].__get__
    kwdefaults_of = types.FunctionType.__dict__["__kwdefaults__"].__get__
    name_of = type.__dict__["__name__"].__get__
    modules = sys.modules
    append = refusals.append
    strict_events = _STRICT
    refused, refused_prefixes, path_events, import_steps = (
        _REFUSED,
        _REFUSED_PREFIXES,
        _PATH_EVENTS,
        _IMPORT_STEPS,
    )
    generated_dirs, stdlib, trusted_dirs = _generated_dirs(), _stdlib_dirs(), _trusted_dirs() + trusted
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "")
    handers = dict(FRAME_HANDERS)
    first = box[0]
    state = threading.local()  # busy: the hook's own work raises events too (frame reads, the open below)
    kinds: dict[str, str] = {}
    seen = [first]  # the untrusted locations `kinds` was filled for

    def lexical(path: str) -> str:
        """os.path.normpath(os.path.join(cwd, path)) from str's methods alone (posixpath is patchable)."""
        if not starts(path, "/"):
            path = getcwd() + "/" + path
        parts: list[str] = []
        for part in split(path, "/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return "/" + join("/", parts)

    def resolve(path: str) -> str:
        """os.path.realpath from C calls: the kernel's own name of the file, where it can be opened."""
        try:
            fd = open_fd(path, o_path)
        except errors:
            return lexical(path)
        try:
            return readlink("/proc/self/fd/" + str_t(fd))
        except errors:
            return lexical(path)
        finally:
            close_fd(fd)

    def kind(filename: str) -> str:
        current = box[0] if box else first
        if type_(current) is not tuple_t:
            current = first
        if current is not seen[0]:
            kinds.clear()
            seen[0] = current
        if type_(filename) is not str_t:
            return "untrusted"
        known = kinds.get(filename)
        if known is not None:
            return known
        real = resolve(filename)
        longest = -1
        for place in current:
            if type_(place) is str_t and starts(real, place) and len_(place) > longest:
                longest = len_(place)
        if starts(real, generated_dirs):
            found = "generated"
        elif longest >= 0:
            # kernelbot's own package inside the tree under test (kernelbot measuring its own benchmarks from
            # its checkout) is still the harness. Only it: an in-tree .venv's site-packages stays the tree's.
            found = "trusted" if starts(real, package) and len_(package) > longest else "untrusted"
        elif starts(real, trusted_dirs):
            found = "trusted"
        else:
            found = "skip" if starts(real, stdlib) else "untrusted"
        kinds[filename] = found
        return found

    def caller_untrusted(strict: bool) -> str | None:
        """The file of the first frame that is neither the standard library nor generated code, when it is
        not trusted code; `strict`: of the first untrusted frame anywhere on the stack (_STRICT).

        Frozen importlib frames are skipped like the standard library, except that a real import in progress
        (`_load_unlocked`) allows the import's own steps: running a module's code is then judged by that
        module's own frames. Code with a made-up name ('<eval_with_key>', torch's generated modules) is
        skipped too: whoever called it decides, so wrapping a call in generated code gains nothing."""
        frame: Any = getframe(3)  # past this function, judge and the hook
        made = False  # a module from a writable cache ran: an import step then does not vouch for it
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            hander = handers.get(code.co_name)
            if hander is not None and ends(name, hander):
                pass  # acts for its caller (FRAME_HANDERS)
            elif starts(name, "<"):
                if (
                    starts(name, "<frozen importlib")
                    and code.co_name in import_steps
                    and not made
                    and not strict
                ):
                    return None
            else:
                found = kind(name)
                if found == "generated":
                    made = True
                elif found == "untrusted":
                    return name
                elif found != "skip" and not strict:
                    return None
            frame = frame.f_back
        return None

    def own(obj: Any) -> bool:
        """A class or function the untrusted code defined itself may be changed by it (its own state)."""
        if type_(obj) is function_t:
            return kind(code_of(obj).co_filename) == "untrusted"
        name = class_dict(obj).get("__module__")
        module = modules.get(name) if type_(name) is str_t else None
        where: Any = module_dict(module).get("__file__") if type_(module) is module_t else None
        return type_(where) is str_t and kind(where) == "untrusted"

    def short(args: tuple[Any, ...]) -> str:
        shown = []
        for arg in args:
            shown.append(arg.__repr__() if type_(arg) in (str_t, int_t, bytes_t) else name_of(type_(arg)))
        return join(", ", shown)[:80]

    def judge(event: str, args: tuple[Any, ...]) -> tuple[str | None, str] | None:
        """(what is refused, to record as a refusal, or None; why) or None."""
        arg: Any = args[0] if args else None
        if type_(arg) is bytes_t:
            arg = decode(arg, "utf-8", "surrogateescape")
        # Bytecode read from outside the read-only trees may carry any file name (torch's): the frames it makes
        # would pass for trusted ones. Refused, not recorded: the import machinery then compiles the source.
        pyc = event == "open" and type_(arg) is str_t and ends(arg, ".pyc")
        if pyc and not starts(resolve(arg), stdlib + trusted_dirs):
            return None, f"open({arg[:80]!r}) would load code under a false name"
        watched = event in refused or starts(event, refused_prefixes)
        strict = event in strict_events
        if not watched and event in path_events:
            if type_(arg) is str_t:
                # Relative paths and '//proc' count as what they name (a dir_fd-relative open stays the jail's).
                path = lexical(arg)
                watched = starts(path, "/proc") and not starts(path, ("/proc/self/stat", "/proc/cpuinfo"))
            else:  # a path object (its __fspath__ is the caller's): whoever passed it decides
                watched = arg is not None and type_(arg) is not int_t
        if not watched and (event == "object.__setattr__" or event == "object.__delattr__"):
            if len_(args) > 1 and args[1] == "__class__":
                # An object's class changed: a module given a class of its own answers every attribute read
                # of the harness's with the subject's code (attacker round 15 hid a thread from the guard so);
                # a tensor subclass's instance made a plain tensor keeps its Python dispatch key (round 16).
                new = args[2] if len_(args) > 2 else None
                watched = not (own(type_(arg)) and issubclass_(type_(new), type_) and own(new))
            else:  # a class's attribute (where Python audits it), a function's code or defaults
                watched = (type_(arg) is function_t or issubclass_(type_(arg), type_)) and not own(arg)
                # A function's code or defaults, by every frame (a trampoline of torch's calling setattr for
                # the candidate rewrote a harness function's code so). Honest code sets the defaults of a
                # function it has just made with none (namedtuple's __new__, dynamo's rebuilt frames): that
                # first setting stays judged by the innermost caller; torch changes the code of functions
                # made from the candidate's own (own: they pass).
                if watched and type_(arg) is not function_t:
                    # A class of kernelbot's (the worker's handoff, the Subject, the Integrity): nothing of
                    # torch's changes them, and the worker's main thread calls their methods between checks.
                    # (`__main__` is the harness too: the worker and the judge run as `python -m`, attacker
                    # round 44 set a descriptor on __main__.Subject through a trampoline.)
                    module = class_dict(arg).get("__module__")
                    ours = type_(module) is str_t and (starts(module, "kernelbot") or module == "__main__")
                    strict = strict or ours
                elif watched:
                    # Of a function of kernelbot's or an installed package's (the worker's main thread runs
                    # them); the standard library's own decorators change functions they were just handed
                    # (types.coroutine sets __code__ as asyncio is imported), so its functions stay judged by
                    # the innermost caller, and the sealed check holds the code of every function it watches.
                    name = args[1] if len_(args) > 1 else None
                    first = (name == "__defaults__" and defaults_of(arg) is None) or (
                        name == "__kwdefaults__" and kwdefaults_of(arg) is None
                    )
                    ours = kind(code_of(arg).co_filename) == "trusted"
                    strict = strict or (ours and not first)
        if not watched:
            return None
        # Another audit hook runs on every event after (the sealed copy's among them), and with no untrusted
        # frame below at all when a trusted callable calls it later for the subject (weakref.finalize): refused
        # whoever asks. The harness installs its one hook before any untrusted code, when none is there to ask.
        who = "the subject" if event == "sys.addaudithook" else caller_untrusted(strict)
        if who is None:
            return None
        what = f"{event}({short(args)})"
        return f"{what} from {split(who, '/')[-1]}", f"{what} is not allowed in operator or candidate code"

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if getattr_(state, "busy", False) or type_(event) is not str_t or type_(args) is not tuple_t:
            return
        state.busy = True
        try:
            found = judge(event, args)
        finally:
            state.busy = False
        if found is not None:
            if found[0] is not None:
                append(found[0])
            raise permission_error(f"kernelbot sandbox: {found[1]}")

    return hook, kind


def locations(job: dict[str, Any]) -> list[str]:
    """Where a job's untrusted files live: the operator's tree and the candidate's folder."""
    found = [job["root"]]
    if job.get("candidate"):
        found.append(os.path.dirname(os.path.abspath(job["candidate"])))
    return found


_box: list[tuple[str, ...]] = []
_refusals: list[str] = []
# Libraries that add an audit hook of their own when imported, and that torch.compile imports lazily, under a
# candidate's call: imported before ours, since a hook added with untrusted code on the stack is refused (an
# H100 image's filelock registers fork hooks so; torch's inductor imports it at its first compile).
HOOKING_LIBRARIES = ("filelock",)


def install(untrusted: list[str]) -> None:
    """Install the hook once per process; later calls add locations to what counts as untrusted."""
    if not _box:
        for name in HOOKING_LIBRARIES:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        _box.append(places(untrusted))
        hook, _ = build(_box, _refusals)
        sys.addaudithook(hook)  # held by the interpreter alone from here
    else:
        _box[0] = tuple(dict.fromkeys(_box[0] + places(untrusted)))


REFUSALS = _refusals  # the list itself, for the sealed server to bind (sealed.build's `refusals`)


def refusal() -> str | None:
    """The first thing this process's hook refused, if any (caught or not by the code that tried it). The list
    is reachable: only a str the hook wrote is read out as it is."""
    if not _refusals:
        return None
    first = _refusals[0]
    return first if type(first) is str else "an object put in the audit hook's list of refusals"
