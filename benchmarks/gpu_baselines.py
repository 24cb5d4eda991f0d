"""Device diagnostic: how stable is the torch.compile baseline that reward 3 is judged against?

The H200 optimize runs of 2026-11-30 measured the same compile baseline up to 2.7x apart between sessions
(examples/ops/bias_gelu_clamp: 0.081, 0.085, 0.221 ms) while eager agreed within a few percent, and the slow
ones were operators with parameters. (Found since: the calls were timed with autograd recording, which runs a
torch.compile graph built for training; timing protocol 2 times them without, as they are checked.) This script separates the explanations, one operator at a time, every
measurement in its own fresh sandbox, in turn (nothing else timed on the GPU meanwhile):
  warm    the cache the optimize run left (its Triton autotuning was done under the warm stage's load);
  retune  the same artefacts with Triton's autotuning choices (*.best_config) deleted: re-tuned quietly;
  fresh   an empty cache: compiled alone.
Under each: eager, `compile` (torch.compile(model), the baseline) and `compile-forward` (torch.compile of the
bound forward in mode "default", as a compile-mode candidate does), REPS times each.

    PYTHONPATH=. python3 benchmarks/gpu_baselines.py --out DIR --only bias_gelu_clamp,08_layernorm [--reps 3]
Writes DIR/baselines.json and DIR/baselines.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.benchlib import Log, environment, print_table  # noqa: E402
from benchmarks.gpu_optimize import (  # noqa: E402
    TIMED,
    Target,
    config_for,
    md_table,
    resolve,
    targets,
)
from kernelbot.agents.rules import load_rules  # noqa: E402
from kernelbot.fingerprint import collect  # noqa: E402
from kernelbot.harness.evaluate import evaluate  # noqa: E402
from kernelbot.pipeline import baselines  # noqa: E402
from kernelbot.pipeline.check import settings_for  # noqa: E402
from kernelbot.render import render  # noqa: E402

CONDITIONS = ("warm", "retune", "fresh")
SUBJECTS = ("eager", "compile", "compile-forward")


def _forward_candidate(t: Target, out: Path) -> Path:
    """torch.compile(super().forward, mode="default"): the compile-mode template with the baseline's mode."""
    rule = next(r for r in load_rules() if r.id == "compile-max-autotune")
    source = render(
        "kernels/compile_mode.py.j2",
        rule=rule,
        params={"mode": "default"},
        operator_source=(t.root / t.target).read_text().rstrip(),
    )
    path = out / f"{Path(t.target).stem}_compile_forward.py"
    path.write_text(source)
    return path


def measure(t: Target, cache: Path, reps: int, device: str, out: Path) -> dict[str, list[float | str]]:
    config = config_for(t, TIMED, 60.0)
    spec, root = resolve(t, config)
    job, settings = spec.job(root, device), settings_for(config, cache)
    candidate = str(_forward_candidate(t, out))
    found: dict[str, list[float | str]] = {s: [] for s in SUBJECTS}
    for _ in range(reps):
        for subject in SUBJECTS:
            if subject == "compile-forward":
                ev = evaluate(job, "candidate", settings, candidate=candidate)
            else:
                ev = evaluate(job, subject, settings)
            found[subject].append(round(ev.timing.median_ms, 4) if ev.ok and ev.timing else ev.status)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", required=True, help="comma-separated substrings of operator labels")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--deadline-s", type=float, default=500.0)
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    log, end = Log(), time.monotonic() + a.deadline_s
    chosen = [
        t for t in targets() if t.target.endswith(".py") and any(s in t.label for s in a.only.split(","))
    ]
    shared = baselines.cache_root(collect(a.device).key)
    rows: list[dict[str, Any]] = []
    for condition in CONDITIONS:
        if condition == "retune":
            for f in shared.rglob("*.best_config"):
                f.unlink()
        for t in chosen:
            if time.monotonic() > end:
                log.line(f"deadline: {condition} {t.label} and later not measured")
                break
            cache = Path(tempfile.mkdtemp(prefix="kernelbot-fresh-")) if condition == "fresh" else shared
            found = measure(t, cache, a.reps, a.device, a.out)
            if condition == "fresh":
                shutil.rmtree(cache, ignore_errors=True)
            rows.append({"label": t.label, "condition": condition, **found})
            log.line(f"{condition} {t.label}: {found}")
    table = [
        [r["label"], r["condition"]]
        + [
            " ".join(str(v) for v in r[s])
            + (
                f" (median {statistics.median(v for v in r[s] if isinstance(v, float)):.4f})"
                if any(isinstance(v, float) for v in r[s])
                else ""
            )
            for s in SUBJECTS
        ]
        for r in rows
    ]
    header = ["operator", "cache", *(f"{s} ms (each run)" for s in SUBJECTS)]
    (a.out / "baselines.json").write_text(json.dumps({"env": environment(a.device), "rows": rows}, indent=1))
    (a.out / "baselines.md").write_text(
        "\n".join(["# compile-baseline stability", "", *md_table(header, table), ""])
    )
    print_table("compile baseline, each run in a fresh sandbox", header, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
