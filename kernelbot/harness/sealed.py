"""Subject side: the copy of a subject's outputs into the shared region, sealed from the subject's own code.

A timed sample's outputs are copied only when the judge asks, after the sample's answer has stopped its
clock. Any code of the subject's that ran between that answer and the copy could compute the outputs then,
out of every timed window, while the timed calls skipped the work. Attacker rounds 9 to 13 each found one
more name the worker looked up at call time on that path (json's encoder, the audit hook's class, a ctypes
class, an mmap constant, the audit hook's own attribute): replaced, it ran the work and put itself back
before the guard looked. A guard cannot close that: it is code that looks names up too.

So the path from the sample's answer to the copied outputs is built here once, before any untrusted file is
imported, as closures over values bound then. Its code reads no global and no builtin name (a bytecode test
says so), calls C functions only, on objects whose exact type it checks first, and is held only by
`worker.main`'s locals: a closure's cells can be rewritten through `__closure__`, which Python does not
audit, so being out of reach (frames are refused by the audit hook) is what keeps them. Signals wait and the
cyclic collector is off from the answer on (it stays off: the worker collects only where no sample is owed);
no object of a class the subject can reach is made and dropped there (a __del__ on it would run, cyclic collector or not: attacker round 15), and a torch mode is
refused before any tensor is read (its getters would call one: round 14).

What is left is below Python: native code of the candidate's can hook the C library calls made here
(docs/security.md).
"""

from __future__ import annotations

import _signal
import builtins
import gc
import json
import json.decoder
import json.encoder
import json.scanner
import mmap
import os
import re
import signal
import struct
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from kernelbot.harness.link import WINDOW

Copy = Callable[[list[Any], int], tuple[list[Any], list[dict[str, Any]], int]]
Verify = Callable[[], None]
Tail = Callable[..., "dict[str, Any] | None"]


def _not_json(value: Any) -> Any:
    raise TypeError("not JSON")


# The ATen operators the copy runs (detach, for every output; the rest on the torch path below;
# tests/test_sealed.py traces them): their kernels, as the dispatcher lists them for the keys a CPU or CUDA
# call passes through, are held against those at build.
TORCH_PATH_OPS = (
    "aten::alias", "aten::as_strided", "aten::clone", "aten::contiguous", "aten::copy_", "aten::detach",
    "aten::empty.memory_format", "aten::empty_like", "aten::empty_strided", "aten::reshape", "aten::slice.Tensor",
    "aten::view", "aten::view.dtype", "aten::_unsafe_view",
)  # fmt: skip
# The dispatch keys of a plain CPU or CUDA tensor (and of a sparse one, which is named, not read).
_PLAIN_KEYS = frozenset(
    {"CPU", "CUDA", "ADInplaceOrView", "AutogradCPU", "AutogradCUDA", "AutocastCPU", "AutocastCUDA"}
)
_SPARSE_KEYS = frozenset({"SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA"})
# The dispatch keys whose kernels are not compared with those at build (here and in the guard): a Meta kernel
# runs only for a tensor without data, which neither the copy nor the refresh is given. Every other key is
# compared: a kernel on the Negative key ran for an input whose neg bit a timed call had set (round 24).
META_KEYS = frozenset({"Meta", "SparseMeta", "SparseCsrMeta", "QuantizedMeta", "NestedTensorMeta"})
# In `pinned`: a slot whose value may change (the sets, each timing's), held to its types only.
UNPINNED = object()
# The "added name" rule, here and in the guard (guards._added): values honest code adds to a watched class
# (dynamo: nn.Module.___needs_generation_tag_patch, a flag; copyreg: a class's __slotnames__, a list) are
# exact built-in data types, none of them a descriptor; a name added to a module may not shadow a builtin.
PLAIN_VALUES = (bool, int, float, str, bytes, type(None), list, tuple, dict, set, frozenset)
SHADOWING_NAMES = frozenset(vars(builtins)) | {"__getattr__", "__dir__"}


def build(
    region: int,
    to_fd: int,
    from_fd: int,
    cuda_memcpy: Any = None,
    *,
    torch_path: bool = False,
    watched: tuple[str, ...] = (),
    spaces: tuple[tuple[str, Any, type, Any, tuple[tuple[str, Any, type], ...]], ...] = (),
    rewrap_code: Any = None,
    failure: type[Exception] | None = None,
    refusals: list[Any] | None = None,
    pinned: tuple[tuple[str, Any, Any, Any, tuple[type, ...], str], ...] = (),
) -> tuple[Copy, Tail, Verify]:
    """`copy(values, start)`: each call's output described, exact tensors written into the region from offset
    `start` (page-aligned, one after another, as link.layout derives them), with their specs and the end.
    `tail(answer, outputs, prep, arm, command)`: send a timed sample's answer (a whole frame; None: none),
    then serve the judge until the next sample's `go` (or any other command, which is returned; None: the
    judge is gone), starting with `command` if one is given: `outputs` (the copy of `outputs`), `check`
    (the modes and `verify()`), `prep` (`prep(seed, fresh)`, the subject's input refresh, run only right after a
    check passed in here) and `arm` (`arm()`). So from the answer of one timed sample to the next sample's
    `go`, the subject process runs only this and the refresh, and the refresh starts from a state checked
    with nothing of the subject's run since: attacker rounds 21 to 25 each ran work in the refresh through
    something the checks then did not look at before it ran.
    `cuda_memcpy`: CuPy's cudaMemcpy where outputs may be on the GPU (without it, torch's copy).
    `torch_path`: every tensor through torch's copy (tests: the path CUDA without CuPy takes).
    `watched`: more ATen operators whose kernels each check holds against those at build: the ones the harness
    runs in this process between samples (guards.HARNESS_OPS, the input refresh). A kernel of the subject's
    in the refresh did a sample's work there, where the clock charges only beyond the judge's own refresh, and
    removed itself when the guard first read a name (attacker round 21): every refresh runs right after a
    check in this server, and nothing of the subject's runs between them to put such a kernel back. A copy
    checks only what it runs itself (the modes, its own operators' kernels: `ready`), so that its cost is
    the same before and after the subject loads and the judge can time it against a floor.
    `spaces`: the guard's snapshot of the namespaces the harness looks names up in (guards.Integrity.sealed):
    (name, object, its class, its live dict or mapping proxy, (attribute, value, its class) triples). Each
    check holds them to it too: a replacement the refresh calls (builtins.zip, attacker round 23) must then be
    gone before each refresh, and so must a value given another class in place (swap_tensors, round 28). `rewrap_code`: the code of torch's _disable_dynamo wrapper, which importing
    torch._dynamo puts around torch.manual_seed (not a replacement).
    `pinned`: slots of the harness's own objects in this process (worker.pins: the Subject's, the Timer's,
    the Integrity's), as (label, the slot's member descriptor, the object, its value at build or UNPINNED, the
    exact types it may hold, what is checked inside: "rows" plain lists, "tensors" exact tensors, "function"
    its code, defaults and closure cells as at build, or ""): a candidate
    that reaches one (a frame a trusted helper handed back, attacker round 30) may not put its own object where
    the refresh and the timer look (a value given at build must stay that object, the others keep their types).
    `verify()`: those checks alone, raising PermissionError (the guard command runs it first: round 23 also
    put its replacement back from inside the guard's own reads). `failure`: the class whose `status` and
    `reason` a failed prep answers with (inputs.Failure); `refusals`: the audit hook's own list of what it
    refused (audit.REFUSALS), read after each step the server runs (a refusal the step caught is still the
    subject's): the list itself, bound here, not a function of the module's (its names are the subject's to
    rebind, and the tail reads it right after a timed sample's job, before any check)."""
    encoder = getattr(json.encoder, "c_make_encoder", None)
    scanner = getattr(json.scanner, "c_make_scanner", None)
    if encoder is None or scanner is None:
        raise RuntimeError("this Python has no C JSON codec: the sealed copy cannot be built")
    # Everything the closures call, bound here as locals of this function.
    encode = encoder(
        None, _not_json, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    scan = scanner(json.decoder.JSONDecoder())
    length = struct.Struct(">Q")
    pack, unpack, header_size = length.pack, length.unpack, length.size
    write, read, getpid = os.write, os.read, os.getpid
    type_, list_t, tuple_t, dict_t, int_t, str_t, float_t = type, list, tuple, dict, int, str, float
    len_, range_, min_, zip_, slice_, issubclass_, memoryview_, bytearray_, bytes_, any_ = (
        len, range, min, zip, slice, issubclass, memoryview, bytearray, bytes, any
    )  # fmt: skip
    join, strip, remove_prefix, str_encode, decode = (
        str.join,
        str.strip,
        str.removeprefix,
        str.encode,
        bytes.decode,
    )
    list_iter, tuple_iter = list.__iter__, tuple.__iter__
    error_text = BaseException.__str__
    failures, refused = (Exception,), PermissionError
    tensor_t, base = torch.Tensor, torch._C.TensorBase
    class_dict = type.__dict__["__dict__"].__get__
    device_of, shape_of, dtype_of = (base.__dict__[n].__get__ for n in ("device", "shape", "dtype"))
    value_error = ValueError
    data_ptr, stride, element_size, numel, is_contiguous = (
        base.data_ptr, base.stride, base.element_size, base.numel, base.is_contiguous
    )  # fmt: skip
    device_type = torch.device.__dict__["type"].__get__
    dtype_str = torch.dtype.__str__
    type_module, type_qualname = type.__dict__["__module__"].__get__, type.__dict__["__qualname__"].__get__
    sync = getattr(torch._C, "_cuda_synchronize", None)
    function_modes, dispatch_modes = torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack
    keys_of, keys_text = torch._C._dispatch_keys, torch._C.DispatchKeySet.__repr__
    included, excluded = torch._C._dispatch_tls_local_include_set, torch._C._dispatch_tls_local_exclude_set
    plain_keys, sparse_keys, lazy_keys = _PLAIN_KEYS, _SPARSE_KEYS, frozenset({"Negative", "Conjugate"})
    set_t, split_by, sorted_ = frozenset, str.split, sorted
    # PEP 523's callback (worker.main clears it after each call of the subject's; held here too)
    eval_frame_callback = getattr(
        getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None), "get_eval_frame_callback", None
    ) or (lambda: None)
    mode_at, mode_keys = (
        torch._C._get_dispatch_mode,
        tuple(torch._C._TorchDispatchModeKey.__members__.values()),
    )
    detach, contiguous, reshape, view, getitem, copy_into = (
        base.detach, base.contiguous, base.reshape, base.view, base.__getitem__, base.copy_
    )  # fmt: skip
    frombuffer_t, uint8_t = torch.frombuffer, torch.uint8
    frombuffer, ndarray, as_contiguous, np_empty, uint8 = (
        np.frombuffer, np.ndarray, np.ascontiguousarray, np.empty, np.uint8
    )  # fmt: skip
    array_interface = np.ndarray.__dict__["__array_interface__"].__get__
    map_file, as_array, namespace = mmap.mmap, np.asarray, types.SimpleNamespace
    map_flags, prot_rw, page = (
        mmap.MAP_SHARED | mmap.MAP_POPULATE,
        mmap.PROT_READ | mmap.PROT_WRITE,
        mmap.PAGESIZE,
    )
    window_size = WINDOW
    gc_disable, sigmask = gc.disable, signal.pthread_sigmask
    block, set_mask, all_signals = signal.SIG_BLOCK, signal.SIG_SETMASK, signal.valid_signals()
    memcpy, owner = cuda_memcpy, getpid()
    dump, skipped = torch._C._dispatch_dump, META_KEYS
    # The copy's own operators apart from the refresh's: a copy checks only what it runs (below, `ready`).
    copy_ops, other_ops = tuple(sorted(TORCH_PATH_OPS)), tuple(sorted(set(watched) - set(TORCH_PATH_OPS)))
    # The collector's callbacks (this list is the one the collector calls: rebinding gc.callbacks does not
    # change it) run inside whichever harness step happens to allocate.
    collector_callbacks = gc.callbacks
    callbacks_at_build = len(collector_callbacks)
    # Python-level signal handlers run between any two bytecodes of the harness's steps (an interval timer
    # would run one inside every refresh): each must still be the one at build.
    getsignal = _signal.getsignal  # C's: signal.getsignal is a Python wrapper that makes enums
    signal_numbers = tuple(map(int_t, signal.valid_signals()))
    handlers_at_build = tuple(getsignal(number) for number in signal_numbers)
    split_lines, partition = str.splitlines, str.partition
    remove_suffix = str.removesuffix

    function_t, cell_t, proxy_t = types.FunctionType, types.CellType, types.MappingProxyType
    code_of, closure_of = (function_t.__dict__[n].__get__ for n in ("__code__", "__closure__"))
    cell_contents = cell_t.__dict__["cell_contents"].__get__
    dict_get, dict_iter, proxy_get, proxy_iter = dict.get, dict.__iter__, proxy_t.get, proxy_t.__iter__
    missing, wrapper_code = object(), rewrap_code
    # Each space with the names it held at build, whether it is a class, and its module's sys.modules entry.
    # A name added to a module shadows the builtin of that name for the module's own code (attacker round 26
    # added `zip` to kernelbot.harness.inputs, and the refresh's zip computed each set's product); one added to
    # a class can be a descriptor that overrides its instances' own attributes (round 26's probe: a property
    # `_initializing` on ModuleSpec, read by every import torch's C++ makes inside the refresh). Honest code
    # adds submodules to modules and plain data to classes (PLAIN_VALUES). Unlike the guard, this check lets a
    # plain value through under a hook's or a base's name: such a value is data, not code the harness runs.
    modules_now = sys.modules
    watched_spaces = tuple(
        (
            label,
            obj,
            cls,
            live,
            # each function's code too (a trampoline may still set the code of one of the standard library's:
            # audit.py), read now, held at every check
            tuple_t((n, v, k, code_of(v) if k is function_t else missing) for n, v, k in items),
            set_t(live),
            issubclass_(cls, type_),
            label == "kernelbot" or label.startswith("kernelbot."),
            obj if modules_now.get(label) is obj else missing,
        )
        for label, obj, cls, live, items in spaces
    )
    builtin_names, plain_values = SHADOWING_NAMES, PLAIN_VALUES
    member_get, unpinned = types.MemberDescriptorType.__get__, UNPINNED  # a slot, by its descriptor
    defaults_of, kwdefaults_of = (function_t.__dict__[n].__get__ for n in ("__defaults__", "__kwdefaults__"))

    def insides(fn: Any) -> tuple[Any, ...]:
        """A function's code, defaults and closure cells' contents, as objects compared by identity."""
        cells = []
        for cell in tuple_iter(closure_of(fn) or ()):
            try:
                cells.append(cell_contents(cell))
            except failures:  # an empty cell
                cells.append(missing)
        return (code_of(fn), defaults_of(fn), kwdefaults_of(fn), *cells)

    # A pinned function (the Subject's factory, which a refresh drawing inputs afresh calls on this thread)
    # is held whole: its closure's cells can be rewritten by anyone holding it, with no audit event.
    held_pins = tuple((*entry, insides(entry[3]) if entry[5] == "function" else ()) for entry in pinned)

    def rewrapped(new: Any, old: Any) -> bool:
        """torch's own wrapper around the value at build (guards._rewrapped_by_torch), by its code and cells."""
        if type_(new) is not function_t or code_of(new) is not wrapper_code:
            return False
        for cell in tuple_iter(closure_of(new) or ()):
            try:
                if type_(cell) is cell_t and cell_contents(cell) is old:
                    return True
            except failures:  # an empty cell
                pass
        return False

    # The warnings machinery: a warning raised inside the refresh or the copy (torch's C++ warnings are Python
    # warnings) makes CPython call each filter's `.match()` and the module's show and format functions, and write
    # to sys.stderr; none of it is watched by name (attacker round 34 put an object with a `.match()` first in
    # warnings.filters and had every write of the refresh warn: each set's product was computed there). Held:
    # the module, its functions as at build, the filters as plain entries (honest code adds some), the streams.
    warnings_module = warnings
    warnings_dict = vars(warnings_module)
    warning_functions = tuple(
        (name, warnings_dict.get(name, missing))
        for name in (
            "showwarning", "_showwarnmsg", "_showwarnmsg_impl", "formatwarning", "_formatwarnmsg",
            "_formatwarnmsg_impl", "WarningMessage",
        )
    )  # fmt: skip
    none_t, pattern_t, warning_t, sys_dict = type(None), re.Pattern, Warning, vars(sys)
    streams = tuple((name, sys_dict.get(name)) for name in ("stderr", "stdout", "__stderr__", "__stdout__"))

    # While the server serves, a warning is ignored before anything of Python's looks at it: this entry first in
    # the filters, put there as the server starts and taken out as it hands the go back. A warning raised there
    # still leaves `__warningregistry__` in the module whose code raised it, and the next check refuses that.
    ignore_all = ("ignore", None, Warning, None, 0)
    filters_mutated = getattr(warnings, "_filters_mutated", None) or (lambda: None)
    list_insert, list_pop = list.insert, list.pop

    def warnings_off() -> Any:
        filters = dict_get(warnings_dict, "filters", missing)
        if type_(filters) is not list_t:
            return None  # the check refuses it
        list_insert(filters, 0, ignore_all)
        filters_mutated()
        return filters

    def warnings_back(filters: Any) -> None:
        if filters is not None and len_(filters) and filters[0] is ignore_all:
            list_pop(filters, 0)
            filters_mutated()

    def warnings_state() -> None:
        if dict_get(modules_now, "warnings", missing) is not warnings_module:
            raise refused("sys.modules['warnings'] was replaced")
        for name, value in tuple_iter(warning_functions):
            if dict_get(warnings_dict, name, missing) is not value:
                raise refused(
                    "warnings." + name + " was replaced (a warning inside the harness's steps runs it)"
                )
        filters = dict_get(warnings_dict, "filters", missing)
        if type_(filters) is not list_t:
            raise refused("warnings.filters was replaced by something other than a plain list")
        for entry in list_iter(filters):
            if type_(entry) is not tuple_t or len_(entry) != 5:
                raise refused("warnings.filters was given an entry that is not a plain 5-tuple")
            action, message, category, module, lineno = entry
            if type_(action) is not str_t or type_(lineno) is not int_t:
                raise refused("warnings.filters was given an entry with an odd action or line number")
            # CPython compares an exact str itself and calls .match() on anything else
            # (by identity: `in` would compare with ==, which a class's own metaclass may define)
            kinds = (type_(message), type_(module))
            if any_(k is not none_t and k is not str_t and k is not pattern_t for k in tuple_iter(kinds)):
                raise refused(
                    "warnings.filters was given a pattern that is not a str or a compiled expression"
                )
            if type_(category) is not type_ or not issubclass_(category, warning_t):
                raise refused("warnings.filters was given a category that is not a plain Warning class")
        for name, stream in tuple_iter(streams):
            if dict_get(sys_dict, name, missing) is not stream:
                raise refused(
                    "sys." + name + " was replaced (a warning inside the harness's steps writes to it)"
                )

    def namespaces() -> None:
        # sys.modules is the subject's to write (sys is not watched): every key is read as it stands before
        # any lookup there, since a lookup calls a key's __eq__ when hashes meet (attacker round 27 put a str
        # subclass hashing as "torch.fft" there, whose __eq__ computed the outputs inside this check).
        for key in dict_iter(modules_now):
            if type_(key) is not str_t:
                raise refused("sys.modules was given a name that is not a plain string")
        for label, obj, cls, live, items, known, is_class, harness, module in tuple_iter(watched_spaces):
            if type_(obj) is not cls:
                raise refused(label + " was given another class")
            if module is not missing and dict_get(modules_now, label, missing) is not module:
                raise refused("sys.modules[" + label + "] was replaced")
            proxy = type_(live) is proxy_t
            for key in proxy_iter(live) if proxy else dict_iter(live):
                if type_(key) is not str_t:  # its __eq__ would run in the lookups below
                    raise refused(label + " was given a name that is not a plain string")
                if key in known:
                    continue
                if is_class:
                    added = proxy_get(live, key, None) if proxy else dict_get(live, key, None)
                    kind = type_(added)  # by identity: `in` would call a metaclass's __eq__
                    if not any_(kind is plain for plain in plain_values):
                        raise refused(label + "." + key + " was added to the class")
                elif harness or key in builtin_names:
                    raise refused(
                        label + "." + key + " was added (it shadows a builtin for the module's code)"
                    )
            for name, value, kind, code in tuple_iter(items):
                now = proxy_get(live, name, missing) if proxy else dict_get(live, name, missing)
                if now is not value and not rewrapped(now, value):
                    raise refused(label + "." + name + " was replaced")
                if now is value and type_(now) is not kind:  # changed in place (swap_tensors, round 28)
                    raise refused(label + "." + name + " was given another class in place")
                if code is not missing and now is value and code_of(now) is not code:
                    raise refused(label + "." + name + "'s code was replaced")

    def slots() -> None:
        for label, member, obj, value, kinds, inside, held in tuple_iter(held_pins):
            try:
                now = member_get(member, obj)
            except failures:
                if value is unpinned:  # not set yet (a timing's set-up assigns the sets)
                    continue
                raise refused(label + " was removed") from None
            if value is not unpinned and now is not value:
                raise refused(label + " was replaced")
            kind = type_(now)
            if kinds and not any_(kind is allowed for allowed in tuple_iter(kinds)):
                raise refused(label + " was given an object of another type")
            if inside == "rows":  # iterated by the refresh: each row a plain list (the refresh checks items)
                for row in list_iter(now):
                    if type_(row) is not list_t:
                        raise refused(label + " was given a row that is not a plain list")
            elif inside == "tensors":  # dropped inside the refresh: nothing with a finalizer of its own
                for item in list_iter(now):
                    if type_(item) is not tensor_t:
                        raise refused(label + " was given an object that is not a plain tensor")
            elif inside == "function":
                found = insides(now)
                if len_(found) != len_(held) or any_(a is not b for a, b in zip_(found, held)):
                    raise refused(label + "'s code, defaults or closure was changed")

    def kernels(ops: tuple[str, ...]) -> list[tuple[str, str]]:
        found = []
        for name in ops:
            try:
                lines = split_lines(dump(name))
            except failures:  # an operator this build does not have
                lines = []
            for line in lines:
                key = remove_suffix(remove_suffix(partition(line, ":")[0], " (inactive)"), "[alias]")
                if key not in skipped:
                    found.append((name, line))
        return found

    registered = (kernels(copy_ops), kernels(other_ops))
    # The thread's own dispatch-key sets, as they are with no subject code on the stack: dispatch adds them to
    # a tensor's keys (the Python dispatcher left on ran a py_impl kernel of aten::detach: attacker round 20).
    thread_keys = (keys_text(included()), keys_text(excluded()))

    def round_up(nbytes: int) -> int:
        return -(-nbytes // page) * page

    def host_into_region(offset: int, raw: Any) -> None:
        """A uint8 array's bytes into the region at `offset`, a window at a time."""
        size = raw.size
        for start in range_(0, size, window_size):
            part = raw[start : start + window_size]
            with map_file(region, part.size, flags=map_flags, prot=prot_rw, offset=offset + start) as window:
                frombuffer(window, dtype=uint8, count=part.size)[:] = part

    def device_into_region(offset: int, ptr: int, size: int) -> None:
        """A contiguous CUDA tensor's bytes straight into the region's pages: no host copy of ours between."""
        for start in range_(0, size, window_size):
            part = min_(window_size, size - start)
            with map_file(region, part, flags=map_flags, prot=prot_rw, offset=offset + start) as window:
                pages_view = frombuffer(window, dtype=uint8, count=part)
                memcpy(array_interface(pages_view)["data"][0], ptr + start, part, 2)  # device to host
                del pages_view  # the window closes only once no array views it

    def through_torch(offset: int, tensor: Any) -> int:
        """CUDA without CuPy: torch's own copy (copy checked the modes, the kernels and torch.Tensor first)."""
        flat = view(reshape(contiguous(detach(tensor)), -1), uint8_t)
        size = numel(flat)
        for start in range_(0, size, window_size):
            part = getitem(flat, slice_(start, start + window_size))
            count = numel(part)
            with map_file(region, count, flags=map_flags, prot=prot_rw, offset=offset + start) as window:
                mapped = frombuffer_t(window, dtype=uint8_t, count=count)
                copy_into(mapped, part)
                del mapped
        return size

    def put(offset: int, tensor: Any) -> int:
        """An exact, strided tensor's bytes in row-major order into the region; the bytes written."""
        item, count = element_size(tensor), numel(tensor)
        if count == 0:
            return 0
        where = device_type(device_of(tensor))  # cpu or cuda: copy() let only a plain tensor's keys through
        if where == "cuda" and sync is not None:
            sync()  # its kernels ran on torch's stream; the copies below are on the legacy default one
        if torch_path or (where == "cuda" and memcpy is None):
            return through_torch(offset, tensor)
        ptr = data_ptr(tensor)
        if where == "cuda" and is_contiguous(tensor):
            device_into_region(offset, ptr, count * item)
            return count * item
        shape, strides = tuple_t(shape_of(tensor)), stride(tensor)
        span = 1  # torch has no negative strides: the span starts at the first element
        for n, s in zip_(shape, strides, strict=True):
            span += (n - 1) * s
        span *= item
        if where == "cuda":
            host = np_empty(span, dtype=uint8)
            memcpy(array_interface(host)["data"][0], ptr, span, 2)
        else:
            # A view of the memory by address, through an object of an immutable type made here: a ctypes
            # array class (`c_char * span`) is one the subject can reach and set __del__ on, which ran as the
            # view died (attacker round 15; round 11 had set from_address there).
            where_ = {"shape": (span,), "typestr": "|u1", "data": (ptr, False), "version": 3}
            host = as_array(namespace(__array_interface__=where_))
        if not is_contiguous(tensor):
            steps = (*tuple_t(s * item for s in strides), 1)
            host = as_contiguous(ndarray(shape=(*shape, item), dtype=uint8, buffer=host, strides=steps))
        host_into_region(offset, host[: count * item] if is_contiguous(tensor) else host.reshape(-1))
        return count * item

    def type_name(kind: Any) -> str:
        module, name = type_module(kind), type_qualname(kind)
        return join(".", [module if type_(module) is str_t else "?", name if type_(name) is str_t else "?"])

    def same_kernels(now: list[tuple[str, str]], then: list[tuple[str, str]]) -> None:
        if now != then:
            named = [a[0] for a, b in zip_(now, then) if a != b]
            if not named:  # one list goes on past the other: its next line
                longer = now if len_(now) > len_(then) else then
                named = [longer[min_(len_(now), len_(then))][0]]
            raise refused(
                "replaced the kernel of " + named[0] + ", an operator the harness runs in this process (the "
                "outputs' copy, the input refresh)"
            )

    def ready() -> None:
        """What the copy itself needs: no Python of the subject's can run in it. Each output is read through a
        plain alias of it (detach, below), and torch's own temporaries die in here: the kernels of the
        operators that run must be those seen at build, and no finalizer of the subject's may hang on
        torch.Tensor. Its cost does not grow with what the subject loaded, so the judge can hold a copy's time
        to a floor taken before any untrusted code was in (Judge._outputs)."""
        if (keys_text(included()), keys_text(excluded())) != thread_keys:
            raise refused("the thread's dispatch keys were changed (the Python dispatcher left on?)")
        if "__del__" in class_dict(tensor_t):
            raise refused("torch.Tensor was given a __del__")
        same_kernels(kernels(copy_ops), registered[0])
        if len_(collector_callbacks) != callbacks_at_build:
            raise refused("a garbage-collector callback was registered (it runs inside the harness's steps)")
        for number, handler in zip_(signal_numbers, handlers_at_build):
            if getsignal(number) is not handler:
                raise refused("a signal handler was set (it runs inside the harness's steps)")

    def verify() -> None:
        """What must be as at build before the refresh and at the guard: what a copy needs, the refresh's
        kernels, and every watched namespace, the warnings' state and the harness's slots (all the checks but
        the modes', which checked() makes first)."""
        ready()
        same_kernels(kernels(other_ops), registered[1])
        namespaces()  # first: it reads sys.modules' keys before any lookup there
        warnings_state()
        slots()

    def modes_off(when: str) -> None:
        """No torch mode (checked first: with one active, the checks' own tensor getters would call into it)
        and no frame-evaluation callback."""
        if function_modes() or dispatch_modes() or any_(mode_at(key) is not None for key in mode_keys):
            raise refused("a torch mode was left active " + when)
        if eval_frame_callback() is not None:
            raise refused("a frame-evaluation callback (PEP 523) was set " + when)

    def checked(when: str) -> None:
        modes_off(when)
        verify()

    def copy(values: list[Any], start: int) -> tuple[list[Any], list[dict[str, Any]], int]:
        """Each value as [is a sequence, item descriptions]; tensors named by dtype and shape and written."""
        # Before any tensor is touched: with a mode on torch's stack, even an exact tensor's getters (layout,
        # shape, data_ptr) call its Python (attacker round 14 computed the owed outputs there). What the refresh
        # needs besides is checked before each refresh (the `check` command), not here.
        modes_off("as the outputs were read")
        ready()
        described, specs, end = [], [], start
        for value in list_iter(values):
            kind = type_(value)
            sequence = (
                tuple_t if issubclass_(kind, tuple_t) else list_t if issubclass_(kind, list_t) else None
            )
            items = (
                list_t(tuple_iter(value))
                if sequence is tuple_t
                else list_t(list_iter(value))
                if sequence
                else [value]
            )
            parts: list[dict[str, Any]] = []
            for item in items:
                if type_(item) is tensor_t:
                    # Before anything is dispatched on it: an exact tensor can carry keys whose kernels or
                    # getters run Python (the Python key, round 16; Meta, round 17; Negative or Meta kernels
                    # for the detach below, round 19). Only a plain CPU or CUDA tensor is read; a sparse one is
                    # named (the judge asks for .to_dense()).
                    keys = set_t(
                        split_by(remove_prefix(keys_text(keys_of(item)), "DispatchKeySet(")[:-1], ", ")
                    )
                    if keys & sparse_keys and not keys - sparse_keys - plain_keys:
                        parts.append({"layout": "sparse"})
                        continue
                    if (
                        keys - plain_keys and not keys - plain_keys - lazy_keys
                    ):  # its bytes are not its values
                        raise value_error(
                            "an output is a lazy negative or conjugate view: return it resolved"
                        )
                    if keys - plain_keys:
                        odd = join(", ", sorted_(keys - plain_keys))
                        raise refused(
                            f"an output carries torch's {odd} dispatch key(s) (only plain tensors are read)"
                        )
                    # A plain alias: an output made with a custom device or layout (`_make_subclass(...,
                    # dispatch_device=True)`) answers those reads from its own __torch_dispatch__, even with
                    # no Python key (attacker round 18); the alias does not carry that over.
                    item = detach(item)
                if type_(item) is tensor_t:
                    spec = {
                        "dtype": remove_prefix(dtype_str(dtype_of(item)), "torch."),
                        "shape": list_t(shape_of(item)),
                        # gathered element by element: the judge holds the copy to its strided floor
                        "strided": not is_contiguous(item),
                    }
                    parts.append(spec)
                    specs.append(spec)
                    end += round_up(put(end, item))
                else:
                    parts.append({"type": type_name(type_(item))})
            described.append([sequence is not None, parts])
        return described, specs, end

    def write_all(data: bytes) -> None:
        view = memoryview_(data)
        while view:
            view = view[write(to_fd, view) :]

    def send(body: bytes) -> None:
        write_all(pack(len_(body)) + body)

    def receive() -> Any:
        """The next command, parsed (None: the judge is gone or sent what is not an object)."""
        buffer = bytearray_()
        while len_(buffer) < header_size:
            got = read(from_fd, header_size - len_(buffer))
            if not got:
                return None
            buffer += got
        (size,) = unpack(bytes_(buffer))
        buffer = bytearray_()
        while len_(buffer) < size:
            got = read(from_fd, min_(size - len_(buffer), 1 << 20))
            if not got:
                return None
            buffer += got
        try:
            text = decode(bytes_(buffer))
            value, end = scan(text, 0)
        except failures:
            return None
        return value if type_(value) is dict_t and not strip(text[end:]) else None

    def encoded(header: dict[str, Any]) -> bytes:
        return str_encode(join("", encode(header, 0)))

    def answer_outputs(outputs: list[Any], nonce: Any) -> bytes:
        try:
            described, specs, _ = copy(outputs, 0)
            header = {"ok": True, "outputs": described, "tensors": specs, "n": nonce}
        except refused as exc:
            header = {
                "ok": False,
                "status": "rejected",
                "reason": "anti-hack check: " + error_text(exc),
                "n": nonce,
            }
        except failures as exc:
            reason = (
                "the outputs could not be copied: " + type_name(type_(exc)) + ": " + error_text(exc)[:200]
            )
            header = {"ok": False, "status": "crashed", "reason": reason, "n": nonce}
        return encoded(header)

    def check() -> None:
        """What the refresh needs to run nothing but the harness's own code."""
        checked("before the input refresh")

    def step(run: Callable[..., Any], args: tuple[Any, ...], nonce: Any) -> tuple[bool, bytes]:
        """run(*args) for the judge: whether it passed, and the answer."""
        header: dict[str, Any] = {"ok": True, "n": nonce}
        try:
            run(*args)
        except refused as exc:
            header = {"ok": False, "status": "rejected", "reason": "anti-hack check: " + error_text(exc)}
        except failures as exc:
            if failure is not None and type_(exc) is failure:
                header = {"ok": False, "status": exc.status, "reason": exc.reason}  # type: ignore[attr-defined]
            else:
                text = type_name(type_(exc)) + ": " + error_text(exc)[:200]
                header = {"ok": False, "status": "crashed", "reason": text}
        found = refusal()
        if found is not None:  # even where the step caught the PermissionError and carried on
            header = {
                "ok": False,
                "status": "rejected",
                "reason": "anti-hack check: the sandbox refused " + found,
            }
        header["n"] = nonce
        return header["ok"] is True, encoded(header)

    def refusal() -> str | None:
        if refusals is None or not len_(refusals):
            return None
        first = refusals[0]  # an exact list's item: the hook appends its text; anything else is the subject's
        return first if type_(first) is str_t else "an object put in the audit hook's list of refusals"

    def sample_answer(sample: Any, nonce: Any, hooked: Any) -> bytes:
        """A timed sample's answer as the worker's main thread hands it over straight from the job (it looks up
        no name in between: attacker round 43 rebound `link.frame` there): plain figures only, or why not."""
        header: dict[str, Any] = {"ok": False, "status": "rejected"}
        figures = (
            (dict_get(sample, "ms_total"), dict_get(sample, "descheduled"), dict_get(sample, "hidden"))
            if type_(sample) is dict_t
            else (None, None, None)
        )
        ms, descheduled, hidden = figures
        if hooked is not None:
            header["reason"] = (
                "anti-hack check: a frame-evaluation callback (PEP 523, torch._C._dynamo.eval_frame) was left "
                "set: it would run at the entry of every frame of the harness's"
            )
        elif type_(ms) is not float_t or not (descheduled is True or descheduled is False):
            header["reason"] = (
                "anti-hack check: the subject's thread answered a sample with other than figures"
            )
        else:
            header = {"ok": True, "ms_total": ms, "descheduled": descheduled, "hidden": hidden is True}
        found = refusal()
        if found is not None:
            header = {
                "ok": False,
                "status": "rejected",
                "reason": "anti-hack check: the sandbox refused " + found,
            }
        header["n"] = nonce if type_(nonce) is int_t else None
        header["tensors"] = []
        body = encoded(header)
        return pack(len_(body)) + body

    def tail(
        answer: Any,
        outputs: list[Any],
        prep: Callable[[int, bool], None],
        arm: Callable[[], None],
        command: Any = None,
        nonce: Any = None,
        hooked: Any = None,
    ) -> dict[str, Any] | None:
        if getpid() != owner:  # a fork of the subject's: it has no business on the judge's pipe
            return None
        if answer is not None and type_(answer) is not bytes_:  # a timed sample's, from the job (above)
            answer = sample_answer(answer, nonce, hooked)
        # The cyclic collector goes off here and stays off (the worker collects only at a check's calls and a
        # timing's set-up). A collection in the next refresh ran a finalizer of the subject's there, which did
        # the next sample's work (attacker round 22).
        gc_disable()
        blocked = sigmask(block, all_signals)
        quiet = warnings_off()
        checked = False  # the last command was a check that passed
        # A check passed in this call: before a command goes back to the worker's main code, which looks names
        # up, one must have (entered straight from a timed sample's job, nothing has checked since it ran).
        verified = False
        try:
            if answer is not None:
                write_all(answer)
            while True:
                if command is None:
                    command = receive()
                if type_(command) is not dict_t:
                    return None
                kind, nonce = command.get("cmd"), command.get("n")
                nonce = nonce if type_(nonce) is int_t else None
                passed = False
                if kind == "outputs":
                    send(answer_outputs(outputs, nonce))
                elif kind == "check":
                    passed, reply = step(check, (), nonce)
                    verified = verified or passed
                    send(reply)
                elif kind == "prep":
                    # The judge sends a check first; without one just before, the prep makes it.
                    ready, reply = (True, b"") if checked else step(check, (), nonce)
                    verified = verified or ready
                    seed = command.get("seed")
                    if not ready:
                        send(reply)
                    elif type_(seed) is not int_t:
                        send(
                            encoded(
                                {
                                    "ok": False,
                                    "status": "crashed",
                                    "reason": "a prep without a seed",
                                    "n": nonce,
                                }
                            )
                        )
                    else:  # drawn afresh or not: the judge's word with each prep (attacker round 45)
                        send(step(prep, (seed, command.get("fresh") is True), nonce)[1])
                elif kind == "arm":
                    send(step(arm, (), nonce)[1])
                elif verified:
                    return command
                else:
                    verified, reply = step(check, (), nonce)
                    if verified:
                        return command
                    send(reply)  # this command's answer: the refusal
                # A passed check stands for the command right after it only.
                checked, command = passed, None
        finally:
            warnings_back(quiet)
            sigmask(set_mask, blocked)

    return copy, tail, verify
