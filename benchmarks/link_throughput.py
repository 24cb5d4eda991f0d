"""How fast an output crosses from the subject to the judge: the shared region (link.py) against the 1 MiB
pipe that carried tensor bytes before, in one run on this machine (a ratio; absolute rates are the box's).

    python3 benchmarks/link_throughput.py [--mib 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from kernelbot.harness import link, sealed
from kernelbot.harness.protocol import read_exact, widen, write_frame


def _exchange(repeat: int, subject: Callable[[int], None], judge: Callable[[int], None]) -> float:
    """`repeat` answers, each asked for first (one byte), as the judge asks: a forked subject answers with
    `subject(fd)`, this process reads each with `judge(fd)`. The seconds it took."""
    ask_r, ask_w = os.pipe()
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the subject's side
        for _ in range(repeat):
            os.read(ask_r, 1)
            subject(answer_w)
        os._exit(0)
    t0 = time.perf_counter()
    for _ in range(repeat):
        os.write(ask_w, b"?")
        judge(answer_r)
    seconds = time.perf_counter() - t0
    os.waitpid(pid, 0)
    for fd in (ask_r, ask_w, answer_r, answer_w):
        os.close(fd)
    return seconds


def _through_region(tensor: torch.Tensor, repeat: int) -> float:
    region = link.shared_region(1 << 32)
    nbytes = tensor.numel() * tensor.element_size()

    def subject(fd: int) -> None:
        copy, _ = sealed.build(region, fd, -1)
        _, specs, _ = copy([tensor], 0)
        link.send(fd, {"ok": True}, specs)

    try:
        return _exchange(
            repeat,
            subject,
            lambda fd: link.receive(fd, region, time.monotonic() + 600, nbytes),
        )
    finally:
        os.close(region)


def _through_pipe(tensor: torch.Tensor, repeat: int) -> float:
    """The previous way: the bytes written from the tensor's memory into a 1 MiB pipe, read into a new one."""
    raw = tensor.reshape(-1).view(torch.uint8).numpy()

    def subject(fd: int) -> None:
        widen(fd)
        write_frame(fd, raw.data)

    return _exchange(repeat, subject, lambda fd: read_exact(fd, raw.nbytes, time.monotonic() + 600))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tensor = torch.randn(args.mib << 18)
    moved = args.repeat * tensor.numel() * tensor.element_size() / 1e9
    rows = []
    for name, way in (("pipe", _through_pipe), ("region", _through_region), ("pipe", _through_pipe),
                      ("region", _through_region)):  # fmt: skip
        rows.append((name, moved / way(tensor, args.repeat)))
    best = {name: max(rate for n, rate in rows if n == name) for name, _ in rows}
    for name, rate in rows:
        print(f"{name:7s} {rate:6.2f} GB/s")
    print(
        f"region / pipe (best of two each): {best['region'] / best['pipe']:.2f}x, {args.mib} MiB x {args.repeat}"
    )


if __name__ == "__main__":
    main()
