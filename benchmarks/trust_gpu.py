"""The sandbox on a GPU: CUDA candidates (CuPy, load_inline) verified and timed through the jailed judge and
subject processes, and the evaluation's wall time per candidate with harnesses of other commits beside it.

    python3 benchmarks/trust_gpu.py --out DIR [--old PATH] [--prev PATH] [--cases eager,relu_cupy,...]

`--old` names a checkout of kernelbot before the judge/subject split (its harness is run in a child process
with that PYTHONPATH), `--prev` another commit's: the overhead figures compare them on the same subjects,
same machine, same run. Each harness evaluates each subject with a fresh compiler cache (cold: torch.compile
and CuPy build), then `--reps` times again with that cache (warm: what a later evaluation of the same
fingerprint costs; the run of median wall time is shown). Where the harness reports it (`Handle.spent`), the judge's account of where the time went
is kept beside the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "trust"
# load_inline before torch.compile: its build is the case earlier calls ran out of time for.
CASES = [
    ("eager", None),
    ("candidate", HERE / "relu_inline.py"),
    ("candidate", HERE / "relu_cupy.py"),
    ("compile", None),
]
CHILD = r"""
import json, sys, time
from pathlib import Path
from kernelbot.harness.evaluate import Handle, Settings, timing_from
job, subject, candidate, cache = json.loads(sys.argv[1]), sys.argv[2], (sys.argv[3] or None), Path(sys.argv[4])
kw = {"sandbox": "bwrap"} if "sandbox" in Settings.__dataclass_fields__ else {}
settings = Settings(time_budget_s=2.0, timeout_s=300, cache_dir=cache, **kw)
marks = [("start", time.perf_counter())]
status, reason, timing, spent = "ok", "", None, None
with Handle(job, subject, settings, candidate=candidate) as handle:
    marks.append(("load", time.perf_counter()))
    if handle.check() is not None:
        marks.append(("check", time.perf_counter()))
        answer = handle.time_batch(settings.min_samples, settings.max_samples, settings.time_budget_s)
        marks.append(("time", time.perf_counter()))
        timing = timing_from([answer]) if answer is not None else None
    if handle.failure is not None:
        status, reason = handle.failure.status, handle.failure.reason
    spent = getattr(handle, "spent", None)
marks.append(("close", time.perf_counter()))
phases = {name: round(t - marks[i][1], 2) for i, (name, t) in enumerate(marks[1:])}
print(json.dumps({"status": status, "reason": (reason or "")[:300], "wall_s": marks[-1][1] - marks[0][1],
                  "phases_s": phases, "spent_ms": spent,
                  "median_ms": timing.median_ms if timing else None,
                  "samples": timing.samples if timing else None,
                  "wall_bound": timing.wall_bound if timing else None}))
"""


def run(pythonpath: str, subject: str, candidate: Path | None, cache: Path, device: str = "cuda") -> dict:
    job = {"kind": "kernelbench", "root": str(HERE), "file": "relu_big.py", "device": device,
           "allow_tf32": False, "atol": None, "rtol": None}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job), subject, str(candidate or ""), str(cache)],
        env=env, capture_output=True, text=True, timeout=900, check=False, cwd="/",
    )  # fmt: skip
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "harness_error", "reason": (done.stderr or done.stdout)[-400:], "wall_s": None}


def _wall(result: dict) -> str:
    if not result.get("wall_s"):
        return "–"
    parts = "/".join(
        f"{result['phases_s'][k]:.1f}" for k in ("load", "check", "time") if k in result.get("phases_s", {})
    )
    return f"{result['wall_s']:.1f} ({parts})" if parts else f"{result['wall_s']:.1f}"


def _added(new: dict, base: dict) -> str:
    if not new.get("wall_s") or not base.get("wall_s"):
        return "–"
    return f"{new['wall_s'] - base['wall_s']:+.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--old", type=Path, help="a checkout before the judge/subject split")
    parser.add_argument("--prev", type=Path, help="a checkout of an earlier commit of the jailed harness")
    parser.add_argument("--cases", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--device", default="cuda", help="cpu: a try-out of the script (eager, compile)")
    parser.add_argument(
        "--reps", type=int, default=1, help="warm runs per harness and subject (median shown)"
    )
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    harnesses = {"now": Path(__file__).resolve().parents[1]}
    harnesses |= {name: p.resolve() for name, p in (("prev", args.prev), ("old", args.old)) if p}
    chosen = [c for c in args.cases.split(",") if c]
    rows = []
    for subject, candidate in CASES:
        label = candidate.stem if candidate else subject
        if chosen and label not in chosen:
            continue
        row: dict = {"case": label}
        for name, path in harnesses.items():
            with tempfile.TemporaryDirectory(prefix=f"kb-cache-{name}-") as cache:
                row[name] = run(str(path), subject, candidate, Path(cache), args.device)  # cold caches
                warm = [
                    run(str(path), subject, candidate, Path(cache), args.device) for _ in range(args.reps)
                ]
                # the run of median wall time stands for the warm ones (all kept in the JSON)
                warm.sort(key=lambda r: r.get("wall_s") or float("inf"))
                row[name + "_warm"], row[name + "_warm_all"] = warm[(len(warm) - 1) // 2], warm
        rows.append(row)
        print(json.dumps(row), flush=True)
    eager = next((r["now_warm"].get("median_ms") for r in rows if r["case"] == "eager"), None)
    names = list(harnesses)
    head = "| subject | caches | status | median ms | vs eager | " + " | ".join(
        f"wall s {n} (load/check/time)" for n in names
    )
    head += " | " + " | ".join(f"added vs {n}" for n in names[1:]) + " |"
    lines = [head, "|" + "---|" * (5 + 2 * len(names) - 1)]
    for r in rows:
        for caches, suffix in (("cold", ""), ("warm", "_warm")):
            n = r["now" + suffix]
            ratio = f"{eager / n['median_ms']:.2f}×" if eager and n.get("median_ms") else "–"
            med = f"{n['median_ms']:.4f}" if n.get("median_ms") else "–"
            walls = " | ".join(_wall(r[name + suffix]) for name in names)
            added = " | ".join(_added(n, r[name + suffix]) for name in names[1:])
            lines.append(f"| {r['case']} | {caches} | {n['status']} | {med} | {ratio} | {walls} | {added} |")
    lines += ["", "Where the time went (the judge's account, ms, the warm run shown, this harness):", ""]
    steps = sorted({k for r in rows for k in (r["now_warm"].get("spent_ms") or {})})
    lines.append("| step | " + " | ".join(r["case"] for r in rows) + " |")
    lines.append("|---|" + "---|" * len(rows))
    for step in steps:
        cells = [f"{(r['now_warm'].get('spent_ms') or {}).get(step, 0):.0f}" for r in rows]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    (args.out / "trust_gpu.md").write_text(table + "\n")
    (args.out / "trust_gpu.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    start = time.time()
    main()
    print(f"total {time.time() - start:.0f} s")
