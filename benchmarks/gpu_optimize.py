"""Device benchmark of the offline agent: `kernelbot optimize` (search agent, every rule) over the examples and
the KernelBench-style problems, with and without TF32 allowed.

On the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/gpu_optimize.py warm --out DIR [--shard I/N] [--workers W]
    PYTHONPATH=. python3 benchmarks/gpu_optimize.py forget --out DIR   # what a killed warm stage left to forget
    PYTHONPATH=. python3 benchmarks/gpu_optimize.py timed --out DIR [--shard I/N] [--deadline-s S] [--done F..]
Anywhere, to merge the timed rows of every shard into the table:
    python3 benchmarks/gpu_optimize.py summarize --out DIR --rows ROWS.jsonl [ROWS.jsonl ...]

`timed` runs `kernelbot.pipeline.optimize.optimize_operator` with `SearchAgent(load_rules())` on each operator in turn,
one at a time on its GPU: eager and torch.compile baselines, the fx analysis, then every candidate the matching
rules build, each verified and timed in a fresh sandbox. The precision policy allows TF32 (not bf16), so the
TF32 rule's candidate is among them; an operator's result under a stricter policy (default float32 with
tf32x3, or IEEE float32 only) is the best of the candidates that policy allows, which are the very candidates
a run under it makes (each rule's own candidate is built independently, and stacks are built on the fastest
candidate of each stricter policy as well as on the fastest overall). One row per operator is appended to DIR/optimize_rows.jsonl as soon as it is done.

`warm` runs the same pipeline on many operators at once with a throw-away timing budget, to build the
torch.compile / Triton / CuPy / extension artefacts in kernelbot's per-fingerprint cache (each sandbox compiles
single-threaded, so max-autotune alone can take minutes); it then deletes the cached baselines it timed, so
`timed` measures every baseline again. Nothing from `warm` is reported.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.benchlib import Log, environment, print_table  # noqa: E402
from kernelbot.agents.base import allowed_precisions  # noqa: E402
from kernelbot.agents.rules import load_rules, rewrites_for  # noqa: E402
from kernelbot.agents.search import SearchAgent  # noqa: E402
from kernelbot.config import Config, HarnessSettings, PrecisionPolicy, load_config  # noqa: E402
from kernelbot.fingerprint import collect  # noqa: E402
from kernelbot.pipeline import baselines  # noqa: E402
from kernelbot.pipeline.optimize import optimize_operator  # noqa: E402
from kernelbot.spec import OperatorSpec, is_kernelbench_source, resolve_operator  # noqa: E402

EXAMPLES = REPO / "examples"
PROBLEMS = REPO / "benchmarks" / "problems"
REALSIZE = REPO / "benchmarks" / "realsize"  # KernelBench v0.1 scale: 1-15 ms each on an H200
ROWS_FILE = "optimize_rows.jsonl"
POLICY = PrecisionPolicy(allow_tf32=True, allow_bf16=False)
TIMED = HarnessSettings(time_budget_s=1.0, timeout_s=150.0)  # rewards turn on 5%: a second per subject does
WARM = HarnessSettings(time_budget_s=0.05, max_samples=10, timeout_s=150.0)
RESERVE_S = 20.0  # left at the deadline for writing results


@dataclass(frozen=True)
class Target:
    label: str  # "examples/ops/conv_bn_relu", "examples/scale_shift", "problems/06_softmax"
    group: str  # "example" | "problem" | "realsize"
    root: Path
    target: str  # what `kernelbot optimize` would be given: a file under root, or a declared name
    level: int = (
        0  # a problem's KernelBench level (1 single op, 2 fused chain, 3 small network); 0 for examples
    )


def level_of(path: Path) -> int:
    """The level a problem's docstring opens with ("Level 2: ..."); single operators say none: level 1."""
    match = re.match(r'"""Level (\d)', path.read_text())
    return int(match.group(1)) if match else 1


def targets() -> list[Target]:
    out = [
        Target(f"examples/ops/{p.stem}", "example", EXAMPLES, f"ops/{p.name}")
        for p in sorted((EXAMPLES / "ops").glob("*.py"))
        if is_kernelbench_source(p.read_text())  # ops/scale_shift.py is the declared operator's module
    ]
    out += [
        Target(f"examples/{d.name}", "example", EXAMPLES, d.name) for d in load_config(EXAMPLES).operators
    ]
    out += [
        Target(f"problems/{p.stem}", "problem", PROBLEMS, p.name, level_of(p))
        for p in sorted(PROBLEMS.glob("[0-9][0-9]_*.py"))
        if not p.stem.endswith("_new")  # hand-written candidates of the harness benchmark, not operators
    ]
    out += [
        Target(f"realsize/{p.stem}", "realsize", REALSIZE, p.name, level_of(p))
        for p in sorted(REALSIZE.glob("[0-9][0-9]_*.py"))
    ]
    return out


def named(t: Target, subs: str | None) -> bool:
    """Whether one of the comma-separated substrings (of --only, --first, --last) is in the operator's label."""
    return bool(subs) and any(s in t.label for s in (subs or "").split(","))


def shard(items: list[Target], spec: str | None) -> list[Target]:
    if not spec:
        return items
    i, n = (int(x) for x in spec.split("/"))
    return items[i::n]


def config_for(t: Target, harness: HarnessSettings, time_s: float) -> Config:
    base = load_config(t.root)
    agent = base.agent.model_copy(update={"budget": 16, "time_s": time_s})
    return base.model_copy(update={"precision": POLICY, "harness": harness, "agent": agent})


def resolve(t: Target, config: Config) -> tuple[OperatorSpec, Path]:
    """The operator as `kernelbot optimize TARGET` resolves it: a file path, or a name declared in the config."""
    return resolve_operator(str(t.root / t.target) if t.target.endswith(".py") else t.target, t.root, config)


def optimize_row(
    t: Target, harness: HarnessSettings, time_s: float, out: Path, device: str
) -> dict[str, Any]:
    """`kernelbot optimize TARGET --agent search` for one operator, as a row of plain data."""
    started = time.monotonic()
    row: dict[str, Any] = {"label": t.label, "group": t.group}
    try:
        config = config_for(t, harness, time_s)
        spec, root = resolve(t, config)
        fingerprint = collect(device)
        rules = load_rules()
        phases: list[tuple[float, str]] = []  # (seconds since the start, what began): where the time went
        row["phases"] = phases
        result = optimize_operator(
            spec,
            root,
            config,
            fingerprint,
            SearchAgent(rules),
            out_dir=out,
            rules_for_analysis=rewrites_for(rules),
            progress=lambda msg: phases.append((round(time.monotonic() - started, 1), msg)),
        )
        check = result.check
        row.update(
            # samples, calls per sample, clocks: to tell a noisy baseline from a slow one afterwards
            baseline_timing={
                name: _timing_details(ev)
                for name, ev in (("eager", check.eager), ("compile", check.compiled))
                if ev is not None and ev.timing is not None
            },
            eager_ms=check.eager.timing.median_ms if check.eager.timing else None,
            compile_status=check.compiled.status if check.compiled else None,
            compile_ms=check.compiled.timing.median_ms if check.compiled and check.compiled.timing else None,
            candidates=[
                {
                    k: c.to_json()[k]
                    for k in (
                        "origin",
                        "precision",
                        "status",
                        "reward",
                        "speedup_vs_eager",
                        "speedup_vs_compile",
                        "median_ms",
                        "max_abs_err",
                    )
                }
                | {"reason": c.evaluation.reason[:300], "timing": _timing_details(c.evaluation)}
                for c in result.candidates
            ],
            skipped_rules=result.skipped,
            stopped_by=result.stopped_by,
        )
    except Exception as exc:  # the operator itself failed: recorded, the run goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        row["trace"] = traceback.format_exc()[-2000:]
    row["wall_s"] = round(time.monotonic() - started, 1)
    return row


def _timing_details(ev: Any) -> dict[str, Any] | None:
    """Samples, calls per sample, clocks, wall-bound counts: to tell a noisy or host-bound time from a slow one."""
    if ev.timing is None:
        return None
    return {k: v for k, v in asdict(ev.timing).items() if k not in ("mean_ms", "std_ms")}


def warm(items: list[Target], out: Path, workers: int, cap_s: float, device: str, log: Log) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="kernelbot-warm-"))
    log.line(f"warm: {len(items)} operators, {workers} at a time")
    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(optimize_row, t, WARM, cap_s, scratch, device): t for t in items}
        for future in cf.as_completed(futures):
            row = future.result()
            statuses = Counter(c["status"] for c in row.get("candidates", []))
            log.line(f"warm {row['label']}: {row['wall_s']} s, {dict(statuses)} {row.get('error', '')}")
    forget_shared_tuning(device)
    shutil.rmtree(scratch, ignore_errors=True)
    (out / "warm_done").write_text(str(time.time()))


def forget_shared_tuning(device: str) -> None:
    """After a warm stage (also one a timeout killed: `forget`), what it measured while sandboxes shared the GPU.

    Its baselines were timed with a throw-away budget, and Inductor's autotuner timed its launch configurations
    (<kernel>.best_config) with up to 21 sandboxes on the GPU: the timed stage measures and picks both again, on
    an idle GPU. Compiled code stays cached; max-autotune's GEMM choices live inside the cached graphs.
    """
    cache = baselines.cache_root(collect(device).key)
    shutil.rmtree(cache / "baselines", ignore_errors=True)
    for choice in cache.rglob("*.best_config"):
        choice.unlink(missing_ok=True)


def timed(
    items: list[Target], out: Path, deadline_s: float, time_s: float, done: set[str], device: str, log: Log
) -> None:
    end = time.monotonic() + deadline_s
    rows_path = out / ROWS_FILE
    env = environment(device)
    todo = [t for t in items if t.label not in done]
    log.line(
        f"timed: {len(todo)} operators ({len(items) - len(todo)} done earlier), deadline {deadline_s:.0f} s"
    )
    for t in todo:
        if end - time.monotonic() < RESERVE_S + 30:
            log.line(f"deadline: {t.label} and later not started")
            break
        row = optimize_row(t, TIMED, min(time_s, end - time.monotonic() - RESERVE_S), out / "runs", device)
        row["env"] = {
            k: env.get(k) for k in ("gpu", "driver", "torch", "torch_cuda", "cudnn", "cupy", "triton")
        }
        with rows_path.open("a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")
        best = best_of(row, POLICIES["TF32 allowed"])
        log.line(
            f"{t.label}: {row['wall_s']} s, {len(row.get('candidates', []))} candidates, best "
            + (f"{best['origin']} r{best['reward']} {best['speedup_vs_eager']:.2f}x" if best else "none")
            + (f" ERROR {row['error']}" if "error" in row else "")
        )


# -- the table ------------------------------------------------------------------------------------
# The policies the table reports, by the candidate precisions each allows: the default float32 policy allows the
# 3xTF32 emulation (held to the float32 tolerance, like an exact candidate); allow_tf32x3: false leaves IEEE only.
POLICIES: dict[str, tuple[str, ...]] = {
    "default float32 (no TF32; 3xTF32 on)": allowed_precisions(PrecisionPolicy()),
    "float32, IEEE products only (3xTF32 off)": allowed_precisions(PrecisionPolicy(allow_tf32x3=False)),
    "TF32 allowed": allowed_precisions(POLICY),
}
SHORT = {
    "default float32 (no TF32; 3xTF32 on)": "no TF32",
    "float32, IEEE products only (3xTF32 off)": "IEEE only",
}


def best_of(row: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any] | None:
    """The candidate kernelbot would suggest under the policy: reward 2 or 3, best reward then speedup."""
    ok = [c for c in row.get("candidates", []) if c["precision"] in allowed and c["reward"] >= 2]
    return max(ok, key=lambda c: (c["reward"], c["speedup_vs_eager"] or 0.0), default=None)


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def policy_summary(rows: list[dict[str, Any]], allowed: tuple[str, ...]) -> dict[str, Any]:
    measured = [r for r in rows if "error" not in r and r.get("eager_ms")]
    wins = {r["label"]: best_of(r, allowed) for r in measured}
    delivered_eager, delivered_compile = [], []
    for r in measured:
        b = wins[r["label"]]
        delivered_eager.append(b["speedup_vs_eager"] if b else 1.0)  # no suggestion: the user keeps eager
        if r.get("compile_ms"):
            delivered_compile.append(b["speedup_vs_compile"] if b else r["compile_ms"] / r["eager_ms"])
    winners = [b for b in wins.values() if b]
    return {
        "operators": len(measured),
        "reward_ge2": sum(1 for b in winners if b["reward"] >= 2),
        "reward_3": sum(1 for b in winners if b["reward"] == 3),
        "geomean_vs_eager": geomean(delivered_eager),
        "geomean_vs_compile": geomean(delivered_compile),
        "geomean_vs_eager_winners": geomean([b["speedup_vs_eager"] for b in winners]),
        "winning_rules": dict(Counter(b["origin"] for b in winners).most_common()),
    }


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def operator_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    table = []
    for r in rows:
        if "error" in r:
            table.append([r["label"], "-", "-", "-", "-", f"error: {r['error'][:80]}", "-", "-"])
            continue
        default, tf32 = (
            best_of(r, POLICIES[name]) for name in ("default float32 (no TF32; 3xTF32 on)", "TF32 allowed")
        )
        tried = ", ".join(
            f"{c['origin']}:{c['status'] if c['status'] != 'ok' else c['reward']}"
            for c in r.get("candidates", [])
        )

        def cell(b: dict[str, Any] | None) -> str:
            return (
                "-"
                if b is None
                else f"{b['origin']} r{b['reward']} {_x(b['speedup_vs_eager'])} / {_x(b['speedup_vs_compile'])}"
            )

        table.append(
            [
                r["label"] + (f" ({r['carried_from']})" if "carried_from" in r else ""),
                _ms(r.get("eager_ms")),
                _ms(r.get("compile_ms")),
                cell(default),
                cell(tf32),
                tried or "no rule matched",
                str(r["wall_s"]),
                r.get("stopped_by", ""),
            ]
        )
    return table


HEADER = [
    "operator",
    "eager ms",
    "compile ms",
    "best, no TF32 (3xTF32 on; vs eager / vs compile)",
    "best, TF32 allowed",
    "candidates (rule:reward or status)",
    "wall s",
    "stopped",
]
SUMMARY_HEADER = [
    "policy",
    "operators",
    "reward >= 2",
    "reward 3",
    "geomean vs eager",
    "geomean vs compile",
    "geomean vs eager (winners)",
    "winning rules",
]


def summary_rows(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    out = []
    for name, s in summaries.items():
        n = s["operators"] or 1
        out.append(
            [
                name,
                str(s["operators"]),
                f"{s['reward_ge2']} ({s['reward_ge2'] / n:.0%})",
                f"{s['reward_3']} ({s['reward_3'] / n:.0%})",
                _x(s["geomean_vs_eager"]),
                _x(s["geomean_vs_compile"]),
                _x(s["geomean_vs_eager_winners"]),
                ", ".join(f"{k} {v}" for k, v in s["winning_rules"].items()) or "-",
            ]
        )
    return out


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(r) + " |" for r in esc],
    ]


def summarize(files: list[Path], out: Path, carried: Path | None = None) -> dict[str, Any]:
    """The table of the rows in `files`; with `carried` (an earlier run's optimize_results.json), that run's
    rows fill in the operators these files lack, each marked with the earlier run's folder name."""
    rows: dict[str, dict[str, Any]] = {}
    for f in files:
        for line in f.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["label"]] = row  # a later shard's row of the same operator wins
    if carried is not None:
        for row in json.loads(carried.read_text())["rows"]:
            rows.setdefault(row["label"], {**row, "carried_from": carried.parent.name})
    ordered = [rows[t.label] for t in targets() if t.label in rows]
    missing = [t.label for t in targets() if t.label not in rows]
    earlier = [r["label"] for r in ordered if "carried_from" in r]
    summaries = {name: policy_summary(ordered, allowed) for name, allowed in POLICIES.items()}
    levels = {t.label: t.level for t in targets()}
    parts = {"examples only": [r for r in ordered if r["group"] == "example"]}
    parts["problems only"] = [r for r in ordered if r["group"] == "problem"]
    parts["real-size set"] = [r for r in ordered if r["group"] == "realsize"]
    for level in sorted({levels[r["label"]] for r in parts["problems only"]}):
        parts[f"problems, level {level}"] = [r for r in parts["problems only"] if levels[r["label"]] == level]
    for name, part in parts.items():
        for policy, allowed in POLICIES.items():
            summaries[f"{name}, {SHORT.get(policy, policy)}"] = policy_summary(part, allowed)
    envs = {json.dumps(r.get("env"), sort_keys=True) for r in ordered if r.get("env")}
    env_list: list[dict[str, Any]] = [json.loads(e) for e in envs]
    result = {"summaries": summaries, "rows": ordered, "missing": missing, "env": env_list}
    out.mkdir(parents=True, exist_ok=True)
    (out / "optimize_results.json").write_text(json.dumps(result, indent=1, default=str))
    lines = [
        f"# `kernelbot optimize` (search agent) on {', '.join(sorted({e.get('gpu') or 'CPU' for e in env_list}))}",
        "",
        f"Operators measured: {len(ordered) - len(earlier)}; not measured: {', '.join(missing) or 'none'}.",
        *(
            [
                f"Besides, {len(earlier)} rows carried from {carried.parent.name}, an earlier run (marked), not "
                f"measured with this run's rules: {', '.join(earlier)}."
            ]
            if carried is not None and earlier
            else []
        ),
        ("Environment: " + "; ".join(envs)) if envs else "",
        "",
        *md_table(SUMMARY_HEADER, summary_rows(summaries)),
        "",
        *md_table(HEADER, operator_rows(ordered)),
        "",
    ]
    (out / "optimize_results.md").write_text("\n".join(lines))
    print_table("kernelbot optimize: shares and geometric means", SUMMARY_HEADER, summary_rows(summaries))
    print_table("per operator", HEADER, operator_rows(ordered))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("mode", choices=["warm", "forget", "timed", "summarize", "list"])
    p.add_argument(
        "--rows", nargs="*", type=Path, default=[], help="summarize: optimize_rows.jsonl files to merge"
    )
    p.add_argument(
        "--carried",
        type=Path,
        help="summarize: an earlier optimize_results.json for the operators --rows lack",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shard", help="I/N: every N-th operator starting at I (one shard per GPU)")
    p.add_argument("--workers", type=int, default=16, help="warm: operators at once")
    p.add_argument("--cap-s", type=float, default=200.0, help="warm: no candidate starts after this")
    p.add_argument("--deadline-s", type=float, default=540.0, help="timed: no operator starts after this")
    p.add_argument("--time-per-op", type=float, default=150.0, help="timed: the agent's wall-time limit")
    p.add_argument("--done", type=Path, nargs="*", default=[], help="rows files whose operators to skip")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--only", help="comma-separated substrings of operator labels to keep")
    p.add_argument("--first", help="comma-separated substrings: those operators go first (before a deadline)")
    p.add_argument(
        "--last", help="comma-separated substrings: those operators go last (a later call's checkout)"
    )
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    items = shard(targets(), a.shard)
    if a.only:
        items = [t for t in items if named(t, a.only)]

    def rank(t: Target) -> int:  # a stable sort: the rest keep their order, between the first and the last
        return 0 if named(t, a.first) else 2 if named(t, a.last) else 1

    items.sort(key=rank)
    if a.mode == "list":
        print("\n".join(t.label for t in items))
        return 0
    if a.mode == "forget":
        forget_shared_tuning(a.device)
        return 0
    if a.mode == "summarize":
        summarize(a.rows, a.out, a.carried)
        return 0
    log = Log()
    done = {
        json.loads(x)["label"] for f in a.done if f.exists() for x in f.read_text().splitlines() if x.strip()
    }
    if a.mode == "warm":
        warm([t for t in items if t.label not in done], a.out, a.workers, a.cap_s, a.device, log)
    else:
        timed(items, a.out, a.deadline_s, a.time_per_op, done, a.device, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
