"""How long the input refresh takes a sample on this machine, for the set sizes a short operator rotates: the
one-index gather (both orders and the coin folded into one index, one index_select a set) against the block
path the same sets take above INDEX_MAX, and against an earlier inputs.py (--before FILE, e.g. the previous
commit's), in one run: ratios, not absolute times.

    git show HEAD~1:kernelbot/harness/inputs.py > /tmp/inputs_before.py
    python3 -m benchmarks.refresh_speed [--before /tmp/inputs_before.py] [--sizes 16384 262144 1048576]
    python3 -m benchmarks.refresh_speed --device cuda --sizes 1048576 16777216 --sets 8 --index-max 67108864
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from typing import Any

import torch

from benchmarks.benchlib import environment
from kernelbot.harness import inputs


def _per_refresh(
    module: Any, n: int, sets: int, repeat: int, index_max: int | None = None, device: str = "cpu"
) -> float:
    masters = [[torch.randn(n, device=device)] for _ in range(sets)]
    given = [[torch.empty(n, device=device)] for _ in range(sets)]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    saved = module.INDEX_MAX
    if index_max is not None:
        module.INDEX_MAX = index_max
    try:
        module.refresh(given, masters, seed=1)  # warm
        sync()
        best = float("inf")
        for r in range(repeat):
            t0 = time.perf_counter()
            module.refresh(given, masters, seed=2 + r)
            sync()
            best = min(best, time.perf_counter() - t0)
    finally:
        module.INDEX_MAX = saved
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[(1 << 14) + 1, 1 << 18, 1 << 20])
    parser.add_argument("--sets", type=int, default=16, help="input sets refreshed a sample")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads (the sandbox's: 1)")
    parser.add_argument("--before", help="an earlier kernelbot/harness/inputs.py to time beside this one")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--index-max",
        type=int,
        help="also time the index path with INDEX_MAX raised to this (sizes above it)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    before = None
    if args.before:
        spec = importlib.util.spec_from_file_location("inputs_before", args.before)
        assert spec is not None and spec.loader is not None
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
    rows = []
    for n in args.sizes:
        row: dict[str, Any] = {"elements": n, "sets": args.sets}
        row["index_ms"] = _per_refresh(inputs, n, args.sets, args.repeat, device=args.device)
        row["blocks_ms"] = _per_refresh(inputs, n, args.sets, args.repeat, index_max=0, device=args.device)
        if args.index_max:
            row["raised_ms"] = _per_refresh(inputs, n, args.sets, args.repeat, args.index_max, args.device)
        if before is not None:
            row["before_ms"] = _per_refresh(before, n, args.sets, args.repeat, device=args.device)
            row["before_over_now"] = row["before_ms"] / row["index_ms"]
        row["blocks_over_index"] = row["blocks_ms"] / row["index_ms"]
        rows.append(row)
        print(json.dumps(row))
    print(json.dumps({"env": environment(args.device), "threads": args.threads, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
