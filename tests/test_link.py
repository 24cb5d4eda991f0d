"""The judge-subject link: tensor bytes through the sealed shared region, headers through the pipe."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from kernelbot.harness import link, sealed


def _send(fd: int, region: int, header: dict, tensors: list[torch.Tensor]) -> None:
    """The subject's side of one answer: each tensor into the region, then the header."""
    copy, _, _ = sealed.build(region, fd, -1)
    _, specs, _ = copy([tuple(tensors)], 0)
    link.send(fd, header, specs)


def _cross(tensors: list[torch.Tensor], max_bytes: int = 1 << 30) -> tuple[dict, list[torch.Tensor]]:
    """Send from a forked child (the subject's side), receive here (the judge's side)."""
    read_fd, write_fd = os.pipe()
    region = link.shared_region(1 << 30)
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _send(write_fd, region, {"ok": True, "n": 7}, tensors)
        os._exit(0)
    os.close(write_fd)
    try:
        return link.receive(read_fd, region, time.monotonic() + 60, max_bytes)
    finally:
        os.waitpid(pid, 0)
        os.close(read_fd)
        os.close(region)


def test_tensors_of_every_kind_cross_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link, "WINDOW", 3 * 4096)  # several windows per tensor, without gigabytes
    sent = [
        torch.randn(5000),  # 20000 bytes: two windows, the second partial
        torch.arange(12, dtype=torch.int64).reshape(3, 4),
        torch.rand(7) > 0.5,
        torch.randn(3, 2, dtype=torch.complex64),
        torch.empty(0, 4),
        torch.randn(8, 6).t().contiguous(),
    ]
    header, got = _cross(sent)
    assert header["ok"] is True and header["n"] == 7
    assert [g.dtype for g in got] == [s.dtype for s in sent]
    assert all(torch.equal(g, s) for g, s in zip(got, sent, strict=True))


def test_the_receiver_holds_a_budget() -> None:
    with pytest.raises(link.LinkError, match="at most 4000"):
        _cross([torch.randn(1001)], max_bytes=4000)


def test_offsets_come_from_the_header_alone() -> None:
    assert link.layout([1, 4096, 0, 5000, 3]) == [0, 4096, 8192, 8192, 16384]


def test_the_region_cannot_be_resized() -> None:
    region = link.shared_region(1 << 30)
    try:
        assert os.fstat(region).st_size == 1 << 30
        for size in (0, (1 << 30) + 4096):  # a shrink would fault a mapping; growth is not allowed
            with pytest.raises(PermissionError):
                os.ftruncate(region, size)
    finally:
        os.close(region)


def test_the_receivers_copy_is_its_own() -> None:
    """What the subject writes into the region after its answer does not reach the judge's tensors, on
    either way out of the region (pread on the CPU, mapped windows for a device)."""
    region, sink = link.shared_region(1 << 30), os.open(os.devnull, os.O_WRONLY)
    try:
        first = torch.randn(3000)
        _send(sink, region, {}, [first])
        by_read = torch.empty(first.numel() * 4, dtype=torch.uint8)
        link._read_region(region, by_read.numpy(), 0)
        by_window = torch.empty_like(by_read)
        link._from_windows(region, 0, by_window)
        _send(sink, region, {}, [torch.zeros(3000)])  # the subject rewrites the region afterwards
        assert torch.equal(by_read.view(torch.float32), first)
        assert torch.equal(by_window.view(torch.float32), first)
    finally:
        os.close(region), os.close(sink)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_outputs_cross_straight_onto_the_device() -> None:
    """A CUDA subject's outputs go from device memory into the region and from there onto the judge's device."""
    sent = [torch.randn(3000, device="cuda"), torch.arange(7, device="cuda")]
    read_fd, write_fd = os.pipe()
    region = link.shared_region(1 << 30)
    try:
        _send(write_fd, region, {"ok": True}, sent)
        _, got = link.receive(read_fd, region, time.monotonic() + 60, 1 << 20, device="cuda")
        assert all(g.is_cuda and torch.equal(g, s) for g, s in zip(got, sent, strict=True))
    finally:
        for fd in (read_fd, write_fd, region):
            os.close(fd)


def test_pages_beyond_the_largest_answer_are_refused() -> None:
    """An answer's pages stay for the next answer to reuse; pages past the largest answer are memory the
    subject took through the region (fallocate), which no RLIMIT_AS counts."""
    region = link.shared_region(1 << 30)
    read_fd, write_fd = os.pipe()
    try:
        _send(write_fd, region, {}, [torch.randn(1 << 20)])
        _, (got,) = link.receive(read_fd, region, time.monotonic() + 60, 8 << 20)
        extent = got.numel() * got.element_size()
        link.check_held(region, extent)  # the answer's own 4 MiB
        os.posix_fallocate(region, 1 << 29, 8 << 20)
        with pytest.raises(link.LinkError, match="held in the shared region"):
            link.check_held(region, extent)
    finally:
        for fd in (read_fd, write_fd, region):
            os.close(fd)


def test_a_shape_that_overflows_the_element_count_is_refused() -> None:
    read_fd, write_fd = os.pipe()
    region = link.shared_region(1 << 20)
    try:
        body = b'{"n":1,"tensors":[{"dtype":"float32","shape":[549755813888,549755813888,0]}]}'
        os.write(write_fd, len(body).to_bytes(8, "big") + body)
        with pytest.raises(link.LinkError, match="tensor shape"):
            link.receive(read_fd, region, time.monotonic() + 60, 1 << 20)
    finally:
        for fd in (read_fd, write_fd, region):
            os.close(fd)


def test_outputs_of_a_failed_answer_are_freed_not_announced() -> None:
    """A subject whose second run fails after the first run's outputs went into the region: those pages go,
    so the judge reads the failure itself, not a region holding pages no answer announced."""
    region = link.shared_region(1 << 30)
    read_fd, write_fd = os.pipe()
    try:
        copy, _, _ = sealed.build(region, write_fd, read_fd)
        copy([torch.randn(1 << 20)], 0)
        link.free(region, os.fstat(region).st_size)  # what the worker does with a failed answer's outputs
        link.send(write_fd, {"ok": False, "status": "crashed"})
        header, tensors = link.receive(read_fd, region, time.monotonic() + 60, 8 << 20)
        assert header["status"] == "crashed" and tensors == []
        assert os.fstat(region).st_blocks == 0
    finally:
        for fd in (read_fd, write_fd, region):
            os.close(fd)


def test_a_candidate_that_fails_on_its_second_run_is_reported_as_crashed(tmp_path: Path) -> None:
    """End to end: the first run's 4 MiB output was already in the region when the second run raised (never
    compared: the answer is the failure)."""
    from kernelbot.harness.evaluate import Settings, evaluate

    ops = Path(__file__).parent / "adversarial" / "ops"
    job = {"kind": "kernelbench", "root": str(ops), "file": "matmul_op.py", "device": "cpu",
           "allow_tf32": False, "atol": None, "rtol": None}  # fmt: skip
    candidate = tmp_path / "second_run_fails.py"
    candidate.write_text(
        "import torch\n\nCALLS = []\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, a, b):\n        CALLS.append(1)\n"
        "        if len(CALLS) == 2:\n            raise RuntimeError('second run')\n"
        "        return torch.zeros(1024, 1024)  # 4 MiB: more than the region may hold unannounced\n"
    )
    ev = evaluate(job, "candidate", Settings(timeout_s=60), candidate=str(candidate), time_it=False)
    assert ev.status == "crashed" and "second run" in ev.reason, (ev.status, ev.reason)


def test_answers_are_encoded_without_looking_anything_up_in_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """json.dumps looks c_make_encoder up in json.encoder at every call: a subject that replaced it worked
    while its answers were encoded (attacker round 9). The link's encoder was bound before that."""
    import json
    import json.encoder

    def replaced(*args: object) -> object:
        raise AssertionError("the link called json.encoder.c_make_encoder")

    monkeypatch.setattr(json.encoder, "c_make_encoder", replaced)
    monkeypatch.setattr(json.encoder.JSONEncoder, "iterencode", replaced)
    read, write = os.pipe()
    try:
        header = {"ok": True, "n": 7, "ms_total": 1.25, "reason": 'é"\n', "outputs": [None, False, 3]}
        link.send(write, header)
        body = os.read(read, 1 << 16)[8:]  # after the frame's length (8 bytes)
    finally:
        os.close(read)
        os.close(write)
    assert json.loads(body) == {**header, "tensors": []}
