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
CASES = [
    ("eager", None),
    ("compile", None),
    ("candidate", HERE / "relu_cupy.py"),
    ("candidate", HERE / "relu_inline.py"),
]
CHILD = r"""
import json, sys, time
from kernelbot.harness.evaluate import Settings, evaluate
job, subject, candidate = json.loads(sys.argv[1]), sys.argv[2], (sys.argv[3] or None)
kw = {"sandbox": "bwrap"} if "sandbox" in Settings.__dataclass_fields__ else {}
settings = Settings(time_budget_s=2.0, timeout_s=300, **kw)
t0 = time.perf_counter()
ev = evaluate(job, subject, settings, candidate=candidate)
wall = time.perf_counter() - t0
print(json.dumps({"status": ev.status, "reason": (ev.reason or "")[:300], "wall_s": wall,
                  "median_ms": ev.timing.median_ms if ev.timing else None,
                  "samples": ev.timing.samples if ev.timing else None,
                  "wall_bound": ev.timing.wall_bound if ev.timing else None}))
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
        old = run(str(args.old), subject, candidate) if args.old and not skip else {}
        rows.append({"case": label, "new": new, "old": old})
        print(json.dumps(rows[-1]), flush=True)
    eager = next((r["new"].get("median_ms") for r in rows if r["case"] == "eager"), None)
    lines = ["| subject | status (jailed judge + subject) | median ms | vs eager | wall s | wall s before | status before |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        n, o = r["new"], r["old"]
        ratio = f"{eager / n['median_ms']:.2f}×" if eager and n.get("median_ms") else "–"
        med = f"{n['median_ms']:.4f}" if n.get("median_ms") else "–"
        lines.append(
            f"| {r['case']} | {n['status']} | {med} | {ratio} | {n.get('wall_s') or 0:.1f} | "
            f"{o.get('wall_s') or 0:.1f} | {o.get('status', '–')} |"
        )
    table = "\n".join(lines)
    print(table)
    (args.out / "trust_gpu.md").write_text(table + "\n")
    (args.out / "trust_gpu.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    start = time.time()
    main()
    print(f"total {time.time() - start:.0f} s")
