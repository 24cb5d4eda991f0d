"""The pipe between the judge and the subject process: a JSON header, then raw tensor bytes.

Everything that arrives from the subject is untrusted data: sizes are capped, dtypes and shapes checked,
and only exact `torch.Tensor` outputs are sent as tensors (anything else is named by its type, as the
comparison's rule on output types wants). Every request carries a fresh nonce that the answer must echo,
so a subject cannot queue an answer before it is asked (and so time a sample it has not run).
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import struct
import time
from collections.abc import Iterator
from typing import Any

import torch

from kernelbot.harness.protocol import ChannelError, read_exact, read_into, write_frame

_LEN = struct.Struct(">Q")
MAX_HEADER = 1 << 20
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
        torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip
_tensor_type = torch.Tensor  # captured before any subject code runs


class LinkError(Exception):
    """The other side sent something that is not a well-formed answer to the question asked."""


def describe(output: Any) -> tuple[list[Any], list[torch.Tensor]]:
    """An output as a list of item descriptions and the exact tensors among them (CPU, contiguous)."""
    items = list(output) if isinstance(output, tuple | list) else [output]
    described: list[Any] = []
    tensors: list[torch.Tensor] = []
    for item in items:
        if type(item) is _tensor_type:
            described.append({"dtype": str(item.dtype).removeprefix("torch."), "shape": list(item.shape)})
            tensors.append(item.detach().cpu().contiguous())
        else:
            described.append({"type": f"{type(item).__module__}.{type(item).__qualname__}"})
    return [isinstance(output, tuple | list), described], tensors


def send(fd: int, header: dict[str, Any], tensors: list[torch.Tensor] = ()) -> None:  # type: ignore[assignment]
    """One message: the header (with each tensor's dtype and shape added), then each tensor's bytes, written
    from the tensor's own memory."""
    specs = [{"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for t in tensors]
    body = json.dumps({**header, "tensors": specs}, separators=(",", ":")).encode()
    write_frame(fd, _LEN.pack(len(body)) + body)
    for t in tensors:
        raw = t.reshape(-1).view(torch.uint8).numpy()
        write_frame(fd, _LEN.pack(raw.nbytes))
        if raw.nbytes:
            write_frame(fd, raw.data)  # the tensor's own memory, no copy


def receive(fd: int, deadline: float, max_bytes: int) -> tuple[dict[str, Any], list[torch.Tensor]]:
    (size,) = _LEN.unpack(_read(fd, _LEN.size, deadline))
    if size > MAX_HEADER:
        raise LinkError(f"a header of {size} bytes")
    try:
        header = json.loads(_read(fd, size, deadline))
    except (ValueError, RecursionError) as exc:
        raise LinkError(f"a header that is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise LinkError("a header that is not an object")
    tensors = []
    budget = max_bytes
    specs = header.get("tensors", [])
    if not isinstance(specs, list):
        raise LinkError("a header whose tensors are not a list")
    for spec in specs:
        dtype, shape = _spec(spec)
        (nbytes,) = _LEN.unpack(_read(fd, _LEN.size, deadline))
        expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if nbytes != expected or nbytes > budget:
            raise LinkError(f"a tensor of {nbytes} bytes where {expected} (at most {budget}) were due")
        budget -= nbytes
        flat = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes:
            _read_into(fd, flat.numpy(), deadline)
        tensors.append(flat.view(dtype).reshape(shape))
    return header, tensors


def _spec(spec: Any) -> tuple[torch.dtype, list[int]]:
    if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
        raise LinkError(f"a tensor description {str(spec)[:80]!r}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not all(type(n) is int and 0 <= n < 2**40 for n in shape):
        raise LinkError(f"a tensor shape {str(shape)[:80]!r}")
    return DTYPES[spec["dtype"]], shape


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """A read's failures as the link names them: end of file means the other side is gone."""
    try:
        yield
    except ChannelError:
        raise EOFError("the other process is gone") from None
    except OSError as exc:
        raise LinkError(str(exc)) from None


def _read(fd: int, size: int, deadline: float) -> bytes:
    with _reading():
        return read_exact(fd, size, deadline)


def _read_into(fd: int, buffer: Any, deadline: float) -> None:
    with _reading():
        read_into(fd, buffer, deadline)


class Peer:
    """The judge's end: ask one question, get its answer (checked against the question's nonce)."""

    def __init__(self, to_fd: int, from_fd: int) -> None:
        self.to_fd, self.from_fd = to_fd, from_fd

    def post(self, command: dict[str, Any]) -> int:
        """Send one question; its answer is read by `answer` (the judge works meanwhile). The nonce back."""
        nonce = secrets.randbits(63)
        try:
            send(self.to_fd, {**command, "n": nonce})
        except OSError:
            raise EOFError("the subject process is gone") from None
        return nonce

    def answer(
        self, nonce: int, *, max_bytes: int = 0, timeout_s: float = 1e9
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        header, tensors = receive(self.from_fd, time.monotonic() + timeout_s, max_bytes)
        if header.get("n") != nonce:
            raise LinkError("an answer to a question not asked (its nonce does not match)")
        return header, tensors

    def ask(
        self, command: dict[str, Any], *, max_bytes: int = 0, timeout_s: float = 1e9
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        return self.answer(self.post(command), max_bytes=max_bytes, timeout_s=timeout_s)
