"""How fast an output crosses from the subject to the judge: the shared region (link.py) against the 1 MiB
pipe that carried tensor bytes before, in one run on this machine (a ratio; absolute rates are the box's).

    python3 benchmarks/link_throughput.py [--mib 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from kernelbot.harness import link
from kernelbot.harness.protocol import read_exact, widen, write_frame


def _through_region(tensor: torch.Tensor, repeat: int) -> float:
    to_r, to_w = os.pipe()
    region = link.shared_region(1 << 32)
    pid = os.fork()
    if pid == 0:  # the subject's side
        os.close(to_r)
        for _ in range(repeat):
            outgoing = link.Outgoing(region)
            outgoing.add(tensor)
            link.send(to_w, {"ok": True}, outgoing)
        os._exit(0)
    os.close(to_w)
    t0 = time.perf_counter()
    for _ in range(repeat):
        link.receive(to_r, region, time.monotonic() + 600, tensor.numel() * tensor.element_size(), free=True)
    seconds = time.perf_counter() - t0
    os.waitpid(pid, 0)
    os.close(to_r), os.close(region)
    return seconds


def _through_pipe(tensor: torch.Tensor, repeat: int) -> float:
    """The previous way: the bytes written from the tensor's memory into a 1 MiB pipe, read into a new one."""
    to_r, to_w = os.pipe()
    widen(to_r)
    raw = tensor.reshape(-1).view(torch.uint8).numpy()
    pid = os.fork()
    if pid == 0:
        os.close(to_r)
        for _ in range(repeat):
            write_frame(to_w, raw.data)
        os._exit(0)
    os.close(to_w)
    t0 = time.perf_counter()
    for _ in range(repeat):
        read_exact(to_r, raw.nbytes, time.monotonic() + 600)
    seconds = time.perf_counter() - t0
    os.waitpid(pid, 0)
    os.close(to_r)
    return seconds


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
