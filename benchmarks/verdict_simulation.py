"""The verdict rule (kernelbot.stats) on synthetic rounds with known noise: false alarms and detections.

    python3 benchmarks/verdict_simulation.py [--runs 2000] [--out FILE.json]

Each trial takes base and head batches (SAMPLES_PER_BATCH samples each) round by round and looks at the verdict
on kernelbot.pipeline.measure's schedule (ROUNDS rounds, then LOOK_STEP more while unsettled, up to ROUNDS + EXTRA_ROUNDS), each look
at alpha / number of looks, exactly as kernelbot.pipeline.measure.run_rounds does on CUDA (up to 40 rounds). Noise models, each seen on a real machine:
  steady      3% sample noise only;
  shared      whole rounds run 2x slow 30% of the time, both sides alike (clocks, a neighbour for a while);
  independent single batches run 2x slow 30% of the time, each side on its own (this project's 2-core CI VM);
  process     3% sample noise, and each sandbox process a steady offset drawn once (lognormal, --process-sd,
              default 2%: the H200's processes at 25 µs, benchmarks/results/2026-12-04-h200-verdict).
--rule rounds (default) is run_rounds' rule (two processes a side, used in turn); --rule processes is
stats.compare_processes: --rounds-per-pair rounds from each fresh base/head process pair, looked at after
each count of pairs in --pairs (alpha split over the looks).
Printed per model and planted slowdown: the share called a regression or an improvement, with a 95% Wilson
interval, and the share left ambiguous. Pure CPU arithmetic: no timing is involved, so the figures hold on
any machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.benchlib import wilson
from kernelbot.pipeline.measure import EXTRA_ROUNDS, ROUNDS, SAMPLES_PER_BATCH, looks
from kernelbot.stats import compare, compare_processes

MODELS = ("steady", "shared", "independent", "process")
PROCESS_SD = 0.02
SLOWDOWNS = (1.0, 1.03, 1.10, 1.67)
THRESHOLD = {1.0: 0.03, 1.03: 0.03, 1.10: 0.05, 1.67: 0.25}  # the practical threshold each is judged with


def _rounds(
    rng: np.random.Generator,
    model: str,
    slowdown: float,
    n: int,
    pair_of: list[int] | None = None,
    process_sd: float = PROCESS_SD,
) -> tuple[list, list]:
    """n rounds; under "process", round r comes from process pair pair_of[r] (default: two pairs in turn)."""
    pair_of = pair_of or [r % 2 for r in range(n)]
    pairs = max(pair_of) + 1
    sd = process_sd if model == "process" else 0.0
    offset_b, offset_h = np.exp(sd * rng.standard_normal(pairs)), np.exp(sd * rng.standard_normal(pairs))
    base, head = [], []
    for r in range(n):
        swing_b = 2.0 if model in ("shared", "independent") and rng.random() < 0.3 else 1.0
        swing_h = (
            swing_b if model == "shared" else (2.0 if model == "independent" and rng.random() < 0.3 else 1.0)
        )
        k = pair_of[r]
        base.append(list(offset_b[k] * swing_b * (1 + 0.03 * rng.standard_normal(SAMPLES_PER_BATCH))))
        head.append(
            list(offset_h[k] * slowdown * swing_h * (1 + 0.03 * rng.standard_normal(SAMPLES_PER_BATCH)))
        )
    return base, head


def trial(
    rng: np.random.Generator, model: str, slowdown: float, alpha: float = 0.01, process_sd: float = PROCESS_SD
) -> str:
    schedule = looks(ROUNDS, EXTRA_ROUNDS["cuda"])
    base, head = _rounds(rng, model, slowdown, schedule[-1], process_sd=process_sd)
    for n in schedule:
        result = compare(base[:n], head[:n], threshold=THRESHOLD[slowdown], alpha=alpha / len(schedule))
        if result.settled:
            break
    return result.verdict


def trial_processes(
    rng: np.random.Generator,
    model: str,
    slowdown: float,
    pairs: list[int],
    per_pair: int,
    alpha: float = 0.01,
    process_sd: float = PROCESS_SD,
) -> str:
    pair_of = [r // per_pair for r in range(pairs[-1] * per_pair)]
    base, head = _rounds(rng, model, slowdown, len(pair_of), pair_of, process_sd)
    for n in pairs:
        rounds = n * per_pair
        result = compare_processes(
            base[:rounds],
            head[:rounds],
            pair_of[:rounds],
            threshold=THRESHOLD[slowdown],
            alpha=alpha / len(pairs),
        )
        if result.settled:
            break
    return result.verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="trials per model and slowdown")
    parser.add_argument("--slowdowns", type=float, nargs="*", default=list(SLOWDOWNS))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    parser.add_argument("--rule", choices=["rounds", "processes"], default="rounds")
    parser.add_argument("--pairs", default="8,16,24,32", help="processes rule: pair counts at which to look")
    parser.add_argument("--rounds-per-pair", type=int, default=2)
    parser.add_argument("--process-sd", type=float, default=PROCESS_SD)
    args = parser.parse_args()
    pairs = [int(x) for x in args.pairs.split(",")]
    rng = np.random.default_rng(20261201)
    rows = []
    print(
        f"{'noise':<12} {'head/base':>9} {'called':>8} {'95% interval':>16} {'ambiguous':>9}  (of {args.runs})"
    )
    for model in args.models:
        for slowdown in args.slowdowns:
            if args.rule == "rounds":
                verdicts = [trial(rng, model, slowdown, process_sd=args.process_sd) for _ in range(args.runs)]
            else:
                verdicts = [
                    trial_processes(
                        rng, model, slowdown, pairs, args.rounds_per_pair, process_sd=args.process_sd
                    )
                    for _ in range(args.runs)
                ]
            called = sum(v in ("regression", "improvement") for v in verdicts)
            right = verdicts.count("regression") if slowdown > 1 else called  # A/A: any call is false
            low, high = wilson(right, args.runs)
            ambiguous = verdicts.count("ambiguous") / args.runs
            rows.append({"noise": model, "rule": args.rule, "slowdown": slowdown, "threshold": THRESHOLD[slowdown], "runs": args.runs,
                         "called": right / args.runs, "ci95": [low, high], "ambiguous": ambiguous,
                         "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))}})  # fmt: skip
            print(
                f"{model:<12} {slowdown:>9.2f} {right / args.runs:>8.1%} {f'{low:.1%} – {high:.1%}':>16} {ambiguous:>9.1%}"
            )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
