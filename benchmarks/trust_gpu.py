"""The sandbox on a GPU: CUDA candidates (CuPy, load_inline) verified and timed through the jailed judge and
subject processes, and the evaluation's wall time per candidate with the harness before and after.

    python3 benchmarks/trust_gpu.py --out DIR [--old PATH_TO_OLD_CHECKOUT]

`--old` names a checkout of kernelbot before the judge/subject split (its harness is run in a child process with
that PYTHONPATH): the overhead figures compare the two on the same candidates, same machine, same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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
from kernelbot.harness.evaluate import Handle, Settings, timing_from
job, subject, candidate = json.loads(sys.argv[1]), sys.argv[2], (sys.argv[3] or None)
kw = {"sandbox": "bwrap"} if "sandbox" in Settings.__dataclass_fields__ else {}
settings = Settings(time_budget_s=2.0, timeout_s=300, **kw)
marks = [("start", time.perf_counter())]
status, reason, timing = "ok", "", None
with Handle(job, subject, settings, candidate=candidate) as handle:
    marks.append(("load", time.perf_counter()))
    if handle.check() is not None:
        marks.append(("check", time.perf_counter()))
        answer = handle.time_batch(settings.min_samples, settings.max_samples, settings.time_budget_s)
        marks.append(("time", time.perf_counter()))
        timing = timing_from([answer]) if answer is not None else None
    if handle.failure is not None:
        status, reason = handle.failure.status, handle.failure.reason
marks.append(("close", time.perf_counter()))
phases = {name: round(t - marks[i][1], 2) for i, (name, t) in enumerate(marks[1:])}
print(json.dumps({"status": status, "reason": (reason or "")[:300], "wall_s": marks[-1][1] - marks[0][1],
                  "phases_s": phases,
                  "median_ms": timing.median_ms if timing else None,
                  "samples": timing.samples if timing else None,
                  "wall_bound": timing.wall_bound if timing else None}))
"""


def run(pythonpath: str, subject: str, candidate: Path | None) -> dict:
    job = {"kind": "kernelbench", "root": str(HERE), "file": "relu_big.py", "device": "cuda",
           "allow_tf32": False, "atol": None, "rtol": None}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job), subject, str(candidate or "")],
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--old", type=Path)
    parser.add_argument("--old-skip", default="", help="comma-separated cases not to run on the old harness")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    new_path = str(Path(__file__).resolve().parents[1])
    rows = []
    for subject, candidate in CASES:
        label = candidate.stem if candidate else subject
        new = run(new_path, subject, candidate)
        skip = label in args.old_skip.split(",")
        old = run(str(args.old.resolve()), subject, candidate) if args.old and not skip else {}
        rows.append({"case": label, "new": new, "old": old})
        print(json.dumps(rows[-1]), flush=True)
    eager = next((r["new"].get("median_ms") for r in rows if r["case"] == "eager"), None)
    lines = ["| subject | status (jailed judge + subject) | median ms | vs eager | wall s (load/check/time) | wall s before (load/check/time) | status before |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        n, o = r["new"], r["old"]
        ratio = f"{eager / n['median_ms']:.2f}×" if eager and n.get("median_ms") else "–"
        med = f"{n['median_ms']:.4f}" if n.get("median_ms") else "–"
        lines.append(
            f"| {r['case']} | {n['status']} | {med} | {ratio} | {_wall(n)} | {_wall(o)} | {o.get('status', '–')} |"
        )
    table = "\n".join(lines)
    print(table)
    (args.out / "trust_gpu.md").write_text(table + "\n")
    (args.out / "trust_gpu.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    start = time.time()
    main()
    print(f"total {time.time() - start:.0f} s")
