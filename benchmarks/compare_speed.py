"""How long the comparison of one output takes on its two paths: chunks where both sides are finite
(compare._finite_chunk, in-place float64 arithmetic) against the path that masks NaN and Inf
(compare._special_chunk, which every chunk of an output off by rounding took before), on the same data, in
one run on this machine (a ratio; absolute times are the box's). Also the float64 rule over the output.

    python3 -m benchmarks.compare_speed [--mib 256] [--repeat 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from benchmarks.benchlib import environment
from kernelbot.harness import compare


def _best(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the float32 output")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads (the judge's sandbox: 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    n = args.mib * (1 << 20) // 4
    gen = torch.Generator().manual_seed(0)
    ref = torch.nn.functional.gelu(torch.randn(n, generator=gen))
    out = ref * (1 + 1e-7 * torch.randn(n, generator=gen))  # off by rounding, as a compiled kernel is
    golden = ref.double()

    def chunks(path) -> None:
        for start in range(0, n, compare.CHUNK):
            path(out[start : start + compare.CHUNK], ref[start : start + compare.CHUNK])

    finite_s = _best(args.repeat, lambda: chunks(lambda o, r: compare._finite_chunk(o, r, 1e-4, 1e-4)))
    special_s = _best(
        args.repeat, lambda: chunks(lambda o, r: compare._special_chunk(o, r, 1e-4, 1e-4, o.shape, 0, ""))
    )
    whole_s = _best(args.repeat, lambda: compare.compare(out, ref, None, None))
    rule_s = _best(args.repeat, lambda: compare.fp64_rule(out, ref, golden, torch.float32))
    print(
        json.dumps(
            {
                "environment": environment("cpu"),
                "threads": args.threads,
                "elements": n,
                "finite_path_s": round(finite_s, 3),
                "special_value_path_s": round(special_s, 3),
                "speedup": round(special_s / finite_s, 2),
                "compare_s": round(whole_s, 3),
                "fp64_rule_s": round(rule_s, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
