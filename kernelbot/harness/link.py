"""The link between the judge and the subject process: JSON headers on a pipe, tensor bytes in a shared region.

A tensor's bytes do not cross the pipe: the subject writes them into a region of shared memory (a sealed
memfd the parent made, `shared_region`) at offsets the judge derives from the header itself, and the judge
takes its own copy (`pread`, or a read-only mapping straight onto the GPU) before it looks at them. On
the 2-core CI box, under load, an answer crossed 1.7-1.9x as fast as through the 1 MiB pipe
(benchmarks/link_throughput.py). The region holds nothing but the subject's own outputs: a subject that
rewrites it while the judge reads only changes its own answer, which is then checked like any other, and
one that takes more pages there than its largest answer (memory no RLIMIT_AS counts) is refused at its
next answer (`check_held`). The judge reads a tensor's bytes in pieces, in an order of its own drawn for
each answer: a subject that sends its header first and writes its outputs while the judge reads (work after
a timed sample's answer, which the judge times only up to its own read: Judge._outputs) cannot stay ahead of
the reader without having written all of them first.

Everything that arrives from the subject is untrusted data: sizes are capped, dtypes and shapes checked,
and only exact `torch.Tensor` outputs are sent as tensors (anything else is named by its type, as the
comparison's rule on output types wants). Every request carries a fresh nonce that the answer must echo,
so a subject cannot queue an answer before it is asked (and so time a sample it has not run).
"""

from __future__ import annotations

import fcntl
import json
import json.encoder
import json.scanner
import math
import mmap
import os
import secrets
import struct
import time
import warnings
from typing import Any

import torch

from kernelbot.harness.protocol import ChannelError, read_exact, write_frame

LENGTH = struct.Struct(">Q")
MAX_HEADER = 1 << 20
# Pages the region may hold beyond the largest answer so far: more means the subject allocated memory
# through it (fallocate), which no process's RLIMIT_AS counts.
HELD_SLACK = 1 << 20
# The most of the region a subject maps at once: its address space stays small under a CPU memory limit.
WINDOW = 64 << 20
_MAP_FLAGS = mmap.MAP_SHARED | mmap.MAP_POPULATE  # the window's pages in one go, not a fault per page
_PROT_R = mmap.PROT_READ
_PAGESIZE, _MAP_SHARED, _MADV_REMOVE = mmap.PAGESIZE, mmap.MAP_SHARED, mmap.MADV_REMOVE
_READ_MAX = 1 << 30  # one pread at most (Linux returns at most ~2 GiB a call)
# The judge's reads of the region: pieces of this size, in a random order (the module's docstring says why).
PIECE = {"cpu": 1 << 20, "device": 4 << 20}  # a device copy from pageable memory costs ~10 us more a call
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
        torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip
_prod = math.prod
# Headers parsed by CPython's C scanner, made here: json.loads goes through a decoder instance whose
# attributes (scan_once) anything can replace; this scanner is reachable from nowhere and has none.
_c_scanner = getattr(json.scanner, "c_make_scanner", None)
_scan = _c_scanner(json.JSONDecoder()) if _c_scanner is not None else None


# Headers written by CPython's C encoder, made here too: json.dumps looks `c_make_encoder` up in json.encoder
# at every call, and a subject that replaced it ran its work while the worker encoded its "prep" answer,
# inside the judge's allowance for the refresh (attacker round 9, reward 3). This one is bound before any
# subject code runs and looks nothing up when called.
_c_encoder = getattr(json.encoder, "c_make_encoder", None)


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


_encode = (
    _c_encoder(None, _not_json, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    if _c_encoder is not None
    else None
)


def _dump(value: Any) -> bytes:
    if _encode is None:  # a Python without the C encoder
        return json.dumps(value, separators=(",", ":")).encode()
    return "".join(_encode(value, 0)).encode()


def _parse(data: bytes) -> Any:
    if _scan is None:  # a Python without the C scanner
        return json.loads(data)
    text = data.decode()
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip():
        raise ValueError("extra data after the JSON value")
    return value


_mmap = mmap.mmap
cuda_memcpy: Any = None  # cupy.cuda.runtime.memcpy, bound by arm_device_copy before any subject code runs


class LinkError(Exception):
    """The other side sent something that is not a well-formed answer to the question asked."""


def shared_region(size: int) -> int:
    """A new shared region for one judge-subject pair (the parent makes it and hands it to both). Sparse: only
    pages written take memory. Sealed at `size`, neither side can resize it: a shrink under the writer's
    mapping would kill it with SIGBUS, and growth would meet the sandbox's file-size limit
    (sandbox.MAX_FILE_BYTES) in the process that grew it. `size` bounds what a subject can hold in it."""
    fd = os.memfd_create("kernelbot-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, _pages(size))
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def layout(sizes: list[int]) -> list[int]:
    """Each tensor's offset in the region: one after another, each on a page boundary (mappable). Both
    sides compute it from the header, so no offset the subject names is ever read."""
    offsets, at = [], 0
    for size in sizes:
        offsets.append(at)
        at += _pages(size)
    return offsets


def arm_device_copy(device: str) -> None:
    """On CUDA, bind CuPy's cudaMemcpy now (before any subject code runs: a subject could plant a module
    named cupy later), so outputs leave the GPU without a torch operator. Without CuPy: torch's copy."""
    global cuda_memcpy
    if device != "cuda" or cuda_memcpy is not None:
        return
    try:  # CuPy's runtime bindings alone: importing the cupy package would add to every subject's start-up
        from cupy_backends.cuda.api import runtime
    except ImportError:
        try:
            from cupy.cuda import runtime
        except ImportError:
            return
    cuda_memcpy = runtime.memcpy


def frame(header: dict[str, Any], specs: list[dict[str, Any]] | None = None) -> bytes:
    """One message as it crosses the pipe: the header, with the dtype and shape of each tensor already
    written into the shared region (sealed.build's copy; the header tells the other side they are there)."""
    body = _dump({**header, "tensors": specs or []})
    return LENGTH.pack(len(body)) + body


def send(fd: int, header: dict[str, Any], specs: list[dict[str, Any]] | None = None) -> None:
    write_frame(fd, frame(header, specs))


def _pages(nbytes: int) -> int:
    return -(-nbytes // _PAGESIZE) * _PAGESIZE


_system_random = secrets.SystemRandom()


def _shuffled(nbytes: int, piece: int) -> list[int]:
    """The starts of `nbytes` cut into pieces, in an order drawn now from the OS's randomness."""
    starts = list(range(0, nbytes, piece))
    _system_random.shuffle(starts)
    return starts


def _from_windows(region: int, offset: int, flat: torch.Tensor) -> None:
    """The judge's copy of a tensor's bytes straight onto its device, through read-only mappings of the region
    a window at a time, windows and their pieces in a random order. Safe for both sides: the region is sealed
    at its size, so no page of a window can vanish under it; a device copy from pageable memory is
    synchronous, so each piece's copy is a snapshot."""
    for start in _shuffled(flat.numel(), WINDOW):
        part = flat[start : start + WINDOW]
        with _mmap(region, part.numel(), flags=_MAP_FLAGS, prot=_PROT_R, offset=offset + start) as window:
            with warnings.catch_warnings():  # a read-only buffer is what the reading side wants
                warnings.simplefilter("ignore", UserWarning)
                mapped = torch.frombuffer(window, dtype=torch.uint8, count=part.numel())
            for at in _shuffled(part.numel(), PIECE["device"]):
                part[at : at + PIECE["device"]].copy_(mapped[at : at + PIECE["device"]])
            del mapped  # the mapping closes only once no tensor views it


def free(region: int, nbytes: int) -> None:
    """Give back the memory of the region's first `nbytes` (its pages, not its size)."""
    for start in range(0, nbytes, WINDOW):
        length = min(WINDOW, nbytes - start)
        with _mmap(region, length, flags=_MAP_SHARED, offset=start) as window:
            window.madvise(_MADV_REMOVE)


def check_held(region: int, extent: int) -> None:
    """Refuse a region holding more pages than the largest answer so far put there (`extent`) plus
    HELD_SLACK: pages the subject allocated itself (fallocate), outside any answer. An answer's pages stay
    for the next one to reuse (freeing them made every answer fault its pages in anew: ~1.5x slower)."""
    held = os.fstat(region).st_blocks * 512
    if held > extent + HELD_SLACK:
        raise LinkError(
            f"{held} bytes held in the shared region outside any answer (memory taken through it)"
        )


def receive(
    fd: int,
    region: int,
    deadline: float,
    max_bytes: int,
    device: str = "cpu",
    heard: list[int] | None = None,
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """One message, its tensors copied out of the shared region onto `device` (the receiver's own copies).
    `heard` gets the moment (perf_counter_ns) the header was in, before any tensor is read."""
    (size,) = LENGTH.unpack(_read(fd, LENGTH.size, deadline))
    if size > MAX_HEADER:
        raise LinkError(f"a header of {size} bytes")
    try:
        header = _parse(_read(fd, size, deadline))
    except (ValueError, RecursionError) as exc:
        raise LinkError(f"a header that is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise LinkError("a header that is not an object")
    if heard is not None:
        heard.append(time.perf_counter_ns())
    budget = max_bytes
    specs = header.get("tensors", [])
    if not isinstance(specs, list):
        raise LinkError("a header whose tensors are not a list")
    shapes = [_spec(spec) for spec in specs]
    sizes = [_prod(shape) * dtype.itemsize for dtype, shape in shapes]
    if sum(sizes) > budget:
        raise LinkError(f"tensors of {sum(sizes)} bytes where at most {budget} were due")
    offsets = layout(sizes)
    tensors = []
    try:
        for (dtype, shape), size, offset in zip(shapes, sizes, offsets, strict=True):
            flat = torch.empty(size, dtype=torch.uint8, device=device)
            if size and device == "cpu":
                _read_region(region, flat.numpy(), offset)
            elif size:  # straight onto the device, no host copy of ours between
                _from_windows(region, offset, flat)
            tensors.append(flat.view(dtype).reshape(shape))
    except LinkError:
        raise
    except torch.OutOfMemoryError:
        raise LinkError("outputs the judge's device memory cannot hold beside the subject's") from None
    except Exception as exc:  # whatever the subject's bytes or shapes make of a read: its answer, not ours
        raise LinkError(f"outputs that could not be read ({type(exc).__name__}: {exc})"[:300]) from None
    return header, tensors


def _read_region(region: int, buffer: Any, offset: int) -> None:
    """The judge's own copy of the bytes at `offset`, read into memory the caller owns (the CPU path), its
    pieces in a random order."""
    whole = memoryview(buffer).cast("B")
    for start in _shuffled(len(whole), PIECE["cpu"]):
        _read_piece(region, whole[start : start + PIECE["cpu"]], offset + start)


def _read_piece(region: int, view: memoryview, offset: int) -> None:
    while view:
        try:
            got = os.preadv(region, [view[:_READ_MAX]], offset)
        except OSError as exc:
            raise LinkError(f"the shared region could not be read: {exc}") from None
        if not got:
            raise LinkError("the shared region ended before the tensor did")
        view, offset = view[got:], offset + got


def _spec(spec: Any) -> tuple[torch.dtype, list[int]]:
    if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
        raise LinkError(f"a tensor description {str(spec)[:80]!r}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not all(type(n) is int and 0 <= n < 2**40 for n in shape):
        raise LinkError(f"a tensor shape {str(shape)[:80]!r}")
    if len(shape) > 64 or math.prod(n for n in shape if n) >= 2**62:  # torch's element count would overflow
        raise LinkError(f"a tensor shape {str(shape)[:80]!r}")
    return DTYPES[spec["dtype"]], shape


def _read(fd: int, size: int, deadline: float) -> bytes:
    """A read's failures as the link names them: end of file means the other side is gone. (No context
    manager: contextlib's classes are the subject's to patch, and the subject reads its commands here.)"""
    try:
        return read_exact(fd, size, deadline)
    except ChannelError:
        raise EOFError("the other process is gone") from None
    except OSError as exc:
        raise LinkError(str(exc)) from None


class Peer:
    """The judge's end: ask one question, get its answer (checked against the question's nonce)."""

    def __init__(self, to_fd: int, from_fd: int, region: int, device: str = "cpu") -> None:
        self.to_fd, self.from_fd, self.region, self.device = to_fd, from_fd, region, device
        self.extent = 0  # the most of the region one answer has used

    def post(self, command: dict[str, Any]) -> int:
        """Send one question; its answer is read by `answer` (the judge works meanwhile). The nonce back."""
        nonce = secrets.randbits(63)
        try:
            send(self.to_fd, {**command, "n": nonce})
        except OSError:
            raise EOFError("the subject process is gone") from None
        return nonce

    def answer(
        self, nonce: int, *, max_bytes: int = 0, timeout_s: float = 1e9, heard: list[int] | None = None
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        deadline = time.monotonic() + timeout_s
        header, tensors = receive(self.from_fd, self.region, deadline, max_bytes, self.device, heard)
        self.extent = max(self.extent, sum(_pages(t.numel() * t.element_size()) for t in tensors))
        check_held(self.region, self.extent)
        if header.get("n") != nonce:
            raise LinkError("an answer to a question not asked (its nonce does not match)")
        return header, tensors

    def ask(
        self, command: dict[str, Any], *, max_bytes: int = 0, timeout_s: float = 1e9
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        return self.answer(self.post(command), max_bytes=max_bytes, timeout_s=timeout_s)
