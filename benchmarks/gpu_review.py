"""Device benchmark of the base-vs-head verdict: A/A false alarms, planted 3%/5% slowdowns, one real review.

On the GPU machine, from the repository root:   PYTHONPATH=. python3 benchmarks/gpu_review.py --out DIR
On a laptop or CI box (CPU, tiny sizes):        PYTHONPATH=. python3 benchmarks/gpu_review.py --device cpu --quick

Part 1 (trials): for each operator size, four live sandboxes load a matmul: `base` (M,K,N), `aa` (the same
operator in a second process), and `+3%` / `+5%` (the same matmul with the inner dimension K larger by 3%
and 5%: time grows with K at fixed M,N, and K stays a multiple of 64 so no partial tile is added). Each
trial runs fresh interleaved ABBA rounds on (base, head) exactly as kernelbot.pipeline.measure.measure_pair does
(same SAMPLES_PER_BATCH, rounds, extra rounds while "ambiguous", calls per sample fixed by the first batch
and shared, verdict by kernelbot.stats.compare). The realised slowdown is measured separately in a long
interleaved run over the four sandboxes, and also pooled over all trials, and printed next to the nominal.

Part 2 (end to end): a small git repository (slowed 2x, sped up, edited but unchanged, removed, added) goes
through `kernelbot review` once; each operator's verdict is compared with the expected one.

Writes DIR/review_results.json and DIR/review_results.md; prints the compact table last.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import benchlib  # noqa: E402
from benchmarks.benchlib import Log, environment, print_table, wilson  # noqa: E402
from benchmarks.verdict_power import MODULE, job, planted  # noqa: E402
from kernelbot.harness.evaluate import Handle, Settings  # noqa: E402
from kernelbot.pipeline.measure import (  # noqa: E402
    EXTRA_ROUNDS,
    PROCESSES_PER_SIDE,
    ROUNDS,
    SAMPLES_PER_BATCH,
    open_checked,
    raw_samples,
    run_rounds,
)
from kernelbot.stats import compare  # noqa: E402

SCHEMA_VERSION = 1
RESERVE_S = 15.0  # kept back for writing results and closing sandboxes
E2E_RESERVE_S = {"cuda": 100.0, "cpu": 45.0}  # time kept for the end-to-end review after the trials
VERDICTS = ("regression", "no_change", "improvement", "ambiguous")
# The review pipeline's own defaults (config.Thresholds; extra rounds per device from measure.EXTRA_ROUNDS).
THRESHOLD, ALPHA, MAX_EXTRA_ROUNDS = 0.03, 0.01, EXTRA_ROUNDS["cuda"]
# On a shared CPU box two processes running the same code differ by up to ~5%, so the CPU smoke test judges
# with tests/test_review.py's 25% (the planted 3%/5% are then not meant to be detected on the CPU).
DEFAULT_THRESHOLD = {"cuda": THRESHOLD, "cpu": 0.25}

# (M, K, N) of `a @ b`. K = 6400 = 100 x 64, so +3% (6592 = 103 x 64) and +5% (6720 = 105 x 64) add whole
# K tiles only. On an H200 in bf16: small ~20-50 us (13 GFLOP), large ~300 us (215 GFLOP). Per sandbox
# the input sets (one per call in a sample, each cloned once) stay under ~2 GB.
SIZES = {
    "cuda": {"small": (1024, 6400, 1024), "large": (4096, 6400, 4096)},
    "cpu": {"small": (16, 1600, 16), "large": (48, 3200, 48)},  # tiny: a CPU smoke test of the script
}
DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
PLANTED = {"aa": 0.0, "+3%": 0.03, "+5%": 0.05}


# -- small helpers -------------------------------------------------------------------------------
class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


# -- part 1: trials on live sandboxes ------------------------------------------------------------
@dataclass
class Scenario:
    size: str  # "small" | "large"
    kind: str  # "aa" | "+3%" | "+5%"
    base_shape: tuple[int, int, int]
    head_shape: tuple[int, int, int]
    nominal: float  # planted slowdown by construction (K ratio - 1)
    trials: list[dict[str, Any]] = field(default_factory=list)
    base_samples: list[float] = field(default_factory=list)  # pooled over trials
    head_samples: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def name(self) -> str:
        return f"{self.size} {'A/A' if self.kind == 'aa' else self.kind}"


def open_handles(
    jobs: dict[str, dict[str, Any]], settings: Settings, pool: cf.ThreadPoolExecutor
) -> dict[str, Handle | BaseException | None]:
    """Start and check every sandbox at once (nothing is being timed yet), as measure_pair's open_checked does.
    A sandbox dies with the thread that started it (PR_SET_PDEATHSIG): `pool` must outlive the handles."""
    futures = {key: pool.submit(open_checked, job, settings) for key, job in jobs.items()}
    out: dict[str, Handle | BaseException | None] = {}
    for key, future in futures.items():
        try:
            out[key] = future.result()
        except Exception as exc:  # a failure to spawn, recorded per sandbox
            out[key] = exc
    return out


def realised(
    handles: dict[str, Handle], settings: Settings, rounds: int, samples: int, log: Log
) -> dict[str, Any]:
    """Long interleaved run over all sandboxes of one size (rotating order, one calls-per-sample for all)."""
    keys = list(handles)
    times: dict[str, list[list[float]]] = {k: [] for k in keys}
    for h in handles.values():
        h.calls = None
    budget = max(settings.time_budget_s / ROUNDS, 0.05)
    for r in range(rounds):
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        if r % 2:
            order.reverse()
        for key in order:
            answer = handles[key].time_batch(samples, samples, budget)
            if answer is None:
                failure = handles[key].failure
                return {"error": f"{key}: {failure.status}: {failure.reason}" if failure else key}
            times[key].append(answer["times_ms"])
            for other in handles.values():
                if other.calls is None:
                    other.calls = answer["calls_per_sample"]
    base = times["base"]
    out: dict[str, Any] = {
        "rounds": rounds,
        "samples_per_side": sum(len(b) for b in base),
        "calls_per_sample": handles["base"].calls,
        "base_median_ms": statistics.median(t for b in base for t in b),
        "ratios": {},
    }
    for key in keys:
        if key == "base":
            continue
        c = compare(base, times[key], threshold=THRESHOLD, alpha=ALPHA)
        out["ratios"][key] = {
            "ratio": c.ratio,
            "ci99": list(c.ratio_ci99),
            "median_ms": statistics.median(t for b in times[key] for t in b),
        }
    log.line(
        "realised: "
        + ", ".join(
            f"{k} {v['ratio']:.4f} [{v['ci99'][0]:.4f}, {v['ci99'][1]:.4f}]" for k, v in out["ratios"].items()
        )
        + f" (base {out['base_median_ms'] * 1e3:.1f} us, {out['calls_per_sample']} calls/sample)"
    )
    return out


def _median(values: list[Any]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def summarize(s: Scenario, cal: dict[str, Any] | None, asked: int) -> dict[str, Any]:
    counts = {v: sum(t["verdict"] == v for t in s.trials) for v in (*VERDICTS, "error")}
    n = len(s.trials)
    alarms = counts["regression"] + counts["improvement"]
    row: dict[str, Any] = {
        "name": s.name,
        "size": s.size,
        "kind": s.kind,
        "base_shape": list(s.base_shape),
        "head_shape": list(s.head_shape),
        "nominal": s.nominal,
        "trials_asked": asked,
        "trials": n,
        "counts": counts,
        "error": s.error,
        "median_ratio": _median([t["ratio"] for t in s.trials]),
        "median_p": _median([t["p_value"] for t in s.trials]),
        "median_rounds": _median([t["rounds"] for t in s.trials]),
        "trial_results": s.trials,
    }
    ratio_info = (cal or {}).get("ratios", {}).get(s.kind)
    row["realised"] = ratio_info["ratio"] - 1 if ratio_info else None
    row["realised_ci99"] = [x - 1 for x in ratio_info["ci99"]] if ratio_info else None
    row["realised_pooled"] = (
        statistics.median(s.head_samples) / statistics.median(s.base_samples) - 1
        if s.base_samples and s.head_samples
        else None
    )
    row["base_median_us"] = statistics.median(s.base_samples) * 1e3 if s.base_samples else None
    if s.kind == "aa":
        row["false_alarm_rate"] = alarms / n if n else None
        row["rate_ci95"] = wilson(alarms, n) if n else None
        row["detection_rate"] = None
    else:
        row["detection_rate"] = counts["regression"] / n if n else None
        row["rate_ci95"] = wilson(counts["regression"], n) if n else None
        row["false_alarm_rate"] = None
    return row


def run_size(
    size: str,
    handles: dict[str, list[Handle]],
    scenarios: list[Scenario],
    settings: Settings,
    trials: int,
    cal_rounds: int,
    threshold: float,
    stop_at: float,
    log: Log,
) -> dict[str, Any]:
    """Calibrate (realised slowdowns), then trials interleaved across the scenarios of this size."""
    cal = realised({k: hs[0] for k, hs in handles.items()}, settings, cal_rounds, 2 * SAMPLES_PER_BATCH, log)
    started = time.monotonic()
    done = 0
    for t in range(trials):
        if time.monotonic() > stop_at:
            log.line(f"{size}: time share used up after {done} trial(s) per scenario")
            break
        for s in scenarios if t % 2 == 0 else scenarios[::-1]:
            if s.error is not None:
                continue
            pair = {"base": handles["base"], "head": handles[s.kind]}
            for h in (h for hs in pair.values() for h in hs):
                h.calls = None  # as in a fresh measure_pair: base's first batch fixes calls for both
            t0 = time.monotonic()
            measured = run_rounds(
                pair,
                settings,
                threshold=threshold,
                alpha=ALPHA,
                max_extra_rounds=MAX_EXTRA_ROUNDS,
            )
            comparison, answers, rounds = measured.comparison, measured.answers, measured.total
            if comparison is None:
                failed = next((h.failure for hs in pair.values() for h in hs if h.failure is not None), None)
                s.error = f"{failed.status}: {failed.reason}" if failed else "no comparison"
                s.trials.append({"verdict": "error", "ratio": None, "p_value": None, "rounds": rounds})
                continue
            s.base_samples += raw_samples(answers["base"])
            s.head_samples += raw_samples(answers["head"])
            s.trials.append(
                {
                    "verdict": comparison.verdict,
                    "ratio": comparison.ratio,
                    "p_value": comparison.p_value,
                    "ci99": list(comparison.ratio_ci99),
                    "rounds": rounds,
                    "calls_per_sample": pair["base"][0].calls,
                    "wall_s": round(time.monotonic() - t0, 2),
                }
            )
        done += 1
        last = {s.kind: s.trials[-1]["verdict"] for s in scenarios if s.trials}
        log.line(f"{size} trial {done}/{trials}: " + ", ".join(f"{k} {v}" for k, v in last.items()))
    return {"calibration": cal, "trials_done": done, "wall_s": round(time.monotonic() - started, 1)}


# -- part 2: one real `kernelbot review` ----------------------------------------------------------
def matmul_op(repeats: int, n: int, device: str, extra: str = "") -> str:
    body = "y = x @ self.w" + "".join("\n        y = y + x @ self.w" for _ in range(repeats - 1))
    return f"""
import torch
{extra}
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(n, n) / n**0.5)

    def forward(self, x):
        {body}
        return y

def get_inputs():
    return [torch.randn({n}, {n}, device="{device}")]

def get_init_inputs():
    return [{n}]
"""


E2E_EXPECTED = {  # operator -> (change, verdict)
    "ops/slowed": ("modified", "regression"),
    "ops/sped_up": ("modified", "improvement"),
    "ops/edited": ("modified", "no_change"),
    "ops/removed": ("removed", None),
    "ops/added": ("added", None),
}


def end_to_end(device: str, workdir: Path, log: Log) -> dict[str, Any]:
    from kernelbot.cli import main as kernelbot_main

    n = 1024 if device == "cuda" else 96
    threshold = 0.03 if device == "cuda" else 0.25  # CPU timings on a shared box are noisy; changes are 2x
    config = f"harness:\n  time_budget_s: 0.6\n  timeout_s: 120\nthresholds:\n  regression: {threshold}\n"
    root = workdir / "repo"
    base = benchlib.commit(
        root,
        {
            ".github/kernelbot.yml": config,
            "ops/slowed.py": matmul_op(1, n, device),
            "ops/sped_up.py": matmul_op(2, n, device),
            "ops/edited.py": matmul_op(2, n, device),
            "ops/removed.py": matmul_op(3, n, device),  # unlike ops/added.py: git must not see a rename
        },
        "base",
    )
    head = benchlib.commit(
        root,
        {
            "ops/slowed.py": matmul_op(2, n, device),  # twice the matmuls: 2x slower
            "ops/sped_up.py": matmul_op(1, n, device),  # half the matmuls: 2x faster
            "ops/edited.py": matmul_op(2, n, device).replace("y = y + x @ self.w", "y = (x @ self.w) + y"),
            "ops/removed.py": None,
            "ops/added.py": matmul_op(1, n, device),
        },
        "head",
    )
    out_json = workdir / "review.json"
    argv = ["review", "--repo", str(root), "--base", base, "--head", head, "--device", device]
    argv += ["--db", f"sqlite:///{workdir / 'history.db'}", "--json", str(out_json)]
    t0 = time.monotonic()
    code = kernelbot_main(argv)
    wall = round(time.monotonic() - t0, 1)
    result: dict[str, Any] = {
        "exit_code": code,
        "wall_s": wall,
        "threshold": threshold,
        "n": n,
        "operators": [],
    }
    if not out_json.exists():
        result["error"] = f"kernelbot review exited {code} without writing JSON"
        return result
    data = json.loads(out_json.read_text())
    result["summary"] = data.get("summary")
    found = {op["name"]: op for op in data["operators"]}
    for name, (change, verdict) in E2E_EXPECTED.items():
        op = found.get(name)
        if op is None:
            result["operators"].append(
                {"name": name, "expected": verdict or change, "got": "missing", "ok": False}
            )
            continue
        got = op["verdict"] or op["change"]
        ok = op["change"] == change and op["verdict"] == verdict and not op["error"]
        if change == "added":
            ok = ok and op["head"] is not None and op["head"]["status"] == "ok"
        base_ms = (op["base"] or {}).get("timing", {}) or {}
        head_ms = (op["head"] or {}).get("timing", {}) or {}
        result["operators"].append(
            {
                "name": name,
                "change": op["change"],
                "expected": verdict or change,
                "got": got,
                "ok": ok,
                "ratio": op["ratio"],
                "p_value": op["p_value"],
                "base_ms": base_ms.get("median_ms"),
                "head_ms": head_ms.get("median_ms"),
                "error": op["error"],
            }
        )
    extra = sorted(set(found) - set(E2E_EXPECTED))
    if extra:
        result["unexpected_operators"] = extra
    log.line(
        f"end to end: exit {code} in {wall} s; "
        + ", ".join(f"{o['name']} {o['got']}{'' if o['ok'] else ' (WRONG)'}" for o in result["operators"])
    )
    return result


# -- reporting -------------------------------------------------------------------------------------
HEADER = [
    "size",
    "scenario",
    "base µs",
    "nominal",
    "realised",
    "trials",
    "reg/no/imp/amb",
    "rate",
    "95% CI",
    "median ratio",
    "median p",
    "rounds",
]
E2E_HEADER = ["operator", "change", "expected", "got", "ok", "ratio", "p"]


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:+.{digits}f}%"


def table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for r in rows:
        c = r["counts"]
        if r["kind"] == "aa":
            rate = "-" if r["false_alarm_rate"] is None else f"FA {r['false_alarm_rate']:.0%}"
        else:
            rate = "-" if r["detection_rate"] is None else f"det {r['detection_rate']:.0%}"
        ci = r.get("rate_ci95")
        realised = _pct(r["realised"], 2)
        if r.get("realised_pooled") is not None:
            realised += f" ({_pct(r['realised_pooled'], 2)})"
        out.append(
            [
                r["size"],
                "A/A" if r["kind"] == "aa" else f"planted {r['kind']}",
                "-" if r["base_median_us"] is None else f"{r['base_median_us']:.1f}",
                _pct(r["nominal"], 2),
                realised,
                f"{r['trials']}/{r['trials_asked']}",
                f"{c['regression']}/{c['no_change']}/{c['improvement']}/{c['ambiguous']}"
                + (f" err {c['error']}" if c["error"] else ""),
                rate,
                "-" if not ci else f"{ci[0]:.0%}-{ci[1]:.0%}",
                "-" if r["median_ratio"] is None else f"{r['median_ratio']:.4f}",
                "-" if r["median_p"] is None else f"{r['median_p']:.2g}",
                "-" if r["median_rounds"] is None else f"{r['median_rounds']:g}",
            ]
        )
    return out


def e2e_rows(e2e: dict[str, Any] | None) -> list[list[str]]:
    if not e2e:
        return []
    return [
        [
            o["name"],
            o.get("change", "-"),
            str(o["expected"]),
            str(o["got"]),
            "yes" if o["ok"] else "NO",
            "-" if o.get("ratio") is None else f"{o['ratio']:.3f}",
            "-" if o.get("p_value") is None else f"{o['p_value']:.2g}",
        ]
        for o in e2e.get("operators", [])
    ]


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows
    ]


def markdown(result: dict[str, Any]) -> str:
    env, a = result["env"], result["args"]
    lines = [
        "# kernelbot verdict benchmark: A/A false alarms and planted slowdowns",
        "",
        f"- date: {env['date']}  host: {env['host']}",
        f"- device: {env.get('gpu') or env.get('cpu')} (driver {env.get('driver')})",
        f"- torch {env['torch']} (CUDA {env['torch_cuda']}), python {env['python']}",
        f"- verdict: threshold {a['threshold']:.0%}, alpha {ALPHA}, {ROUNDS} ABBA rounds of {SAMPLES_PER_BATCH} samples per side "
        f"(+ up to {MAX_EXTRA_ROUNDS} while ambiguous); time_budget_s {a['time_budget_s']} per pair; dtype {a['dtype']}",
        f"- wall {result['wall_s']} s of a {a['deadline_s']} s deadline",
        "",
        "## Trials",
        "",
        "realised = median ratio - 1 from a separate long interleaved run (in brackets: pooled over all trials); "
        "rate = false alarms (A/A: regression or improvement) or detections (planted: regression); 95% Wilson interval.",
        "",
        *_md_table(HEADER, table_rows(result["scenarios"])),
        "",
    ]
    if result.get("e2e"):
        e = result["e2e"]
        lines += [
            "## End to end (`kernelbot review`)",
            "",
            f"exit {e.get('exit_code')}, {e.get('wall_s')} s, threshold {e.get('threshold')}: {e.get('summary') or e.get('error')}",
            "",
            *_md_table(E2E_HEADER, e2e_rows(e)),
            "",
        ]
    if result["skipped"]:
        lines += ["## Skipped (deadline or failure)", "", *[f"- {s}" for s in result["skipped"]], ""]
    lines += [f"- {note}" for note in result["notes"]]
    return "\n".join(lines) + "\n"


def run(
    out: Path | None,
    device: str = "cuda",
    quick: bool = False,
    trials: int = 20,
    deadline_s: float = 480.0,
    threshold: float | None = None,
    time_budget_s: float = 0.6,
    cal_rounds: int | None = None,
    sizes: list[str] | None = None,
    e2e: bool = True,
) -> dict[str, Any]:
    log = Log()
    deadline = Deadline(deadline_s)
    env = environment(device)
    dtype = DTYPE[device]
    threshold = DEFAULT_THRESHOLD[device] if threshold is None else threshold
    cal_rounds = cal_rounds or (4 if quick else 12)
    chosen = {k: v for k, v in SIZES[device].items() if sizes is None or k in sizes}
    settings = Settings(time_budget_s=time_budget_s, timeout_s=120.0, seeds=2 if quick else 3)
    log.line(
        f"device {env.get('gpu') or env.get('cpu')}, driver {env.get('driver')}, torch {env['torch']} (CUDA {env['torch_cuda']}); "
        f"{trials} trials x {len(chosen) * len(PLANTED)} scenarios, deadline {deadline_s:.0f} s"
    )
    workdir = Path(tempfile.mkdtemp(prefix="kernelbot-gpu-review-"))
    (workdir / "planted.py").write_text(MODULE)
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    scenarios: dict[str, list[Scenario]] = {}
    for size, shape in chosen.items():
        jobs[(size, "base")] = job(workdir, device, shape)
        scenarios[size] = []
        for kind, frac in PLANTED.items():
            head_shape = planted(shape, frac)
            jobs[(size, kind)] = job(workdir, device, head_shape)
            scenarios[size].append(Scenario(size, kind, shape, head_shape, head_shape[1] / shape[1] - 1))
    notes = [
        f"trials reuse one set of live sandboxes per size, {PROCESSES_PER_SIDE} per side used in turn as in "
        "kernelbot review (base, a second base for A/A, +3%, +5%); each trial runs fresh interleaved rounds with "
        "measure_pair's loop (calls per sample re-fixed by base's first batch)",
        "planted slowdown: the head multiplies (M, K', N) instead of (M, K, N) with K' = K x 1.03 or K x 1.05 "
        "(whole 64-wide K tiles when K is a multiple of 6400); time grows with K at fixed M, N, and the realised "
        "slowdown is measured, not assumed",
        "sizes (M, K, N) -> head K': "
        + "; ".join(
            f"{s.size} {s.base_shape} -> {s.kind} K'={s.head_shape[1]}"
            for ss in scenarios.values()
            for s in ss
        ),
    ]
    skipped: list[str] = []
    rows: list[dict[str, Any]] = []
    per_size: dict[str, Any] = {}
    e2e_result: dict[str, Any] | None = None
    handles: dict[tuple[str, str], list[Handle]] = {}
    keys = {f"{s}/{k}/{i}": (s, k) for (s, k) in jobs for i in range(PROCESSES_PER_SIDE)}
    pool = cf.ThreadPoolExecutor(max_workers=max(1, len(keys)))
    try:
        log.line(f"starting {len(keys)} sandboxes in parallel (load + correctness check)")
        opened = open_handles(
            {key: jobs[sk] for key, sk in keys.items()},
            replace(settings, timeout_s=min(120.0, deadline.left())),
            pool,
        )
        for key, (size, kind) in keys.items():
            h = opened[key]
            if isinstance(h, BaseException) or h is None:
                reason = f"could not start: {h}"
            elif h.failure is not None:
                reason = f"{h.failure.status}: {h.failure.reason}"
                h.close()
            else:
                handles.setdefault((size, kind), []).append(h)
                continue
            log.line(f"{key}: {reason}")
            for s in scenarios[size]:
                if kind in ("base", s.kind):
                    s.error = f"{kind}: {reason}"
        log.line("sandboxes ready")
        reserve = RESERVE_S + (E2E_RESERVE_S[device] if e2e else 0.0)
        for i, (size, scens) in enumerate(scenarios.items()):
            live = [s for s in scens if s.error is None]
            share = (deadline.left() - reserve) / (len(scenarios) - i)
            if not live or share < 5:
                why = "failed to start" if not live else "deadline"
                skipped += [f"{s.name}: {why}" + (f" ({s.error})" if s.error else "") for s in scens]
                continue
            log.line(f"{size} {scens[0].base_shape} {dtype}: time share {share:.0f} s")
            size_handles = {k: handles[(size, k)] for k in ("base", *[s.kind for s in live])}
            per_size[size] = run_size(
                size,
                size_handles,
                live,
                settings,
                trials,
                cal_rounds,
                threshold,
                time.monotonic() + share,
                log,
            )
            for k, hs in size_handles.items():  # free the GPU memory before the next size
                for h in hs:
                    h.close()
                handles.pop((size, k), None)
            for s in scens:
                rows.append(summarize(s, per_size[size]["calibration"], trials))
                if len(s.trials) < trials:
                    skipped.append(f"{s.name}: {len(s.trials)} of {trials} trials ({s.error or 'deadline'})")
        if e2e:
            if deadline.left() < RESERVE_S + 20:
                skipped.append("end-to-end review: deadline")
            else:
                log.line("end to end: kernelbot review on a generated git repository")
                try:
                    e2e_result = end_to_end(device, workdir / "e2e", log)
                except Exception as exc:  # reported, the trials are still written
                    e2e_result = {
                        "error": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc(),
                    }
                    log.line(f"end to end failed: {e2e_result['error']}")
    finally:
        for hs in handles.values():
            for h in hs:
                h.close()
        pool.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "env": env,
        "wall_s": round(time.monotonic() - log.start, 1),
        "args": {
            "device": device,
            "quick": quick,
            "trials": trials,
            "deadline_s": deadline_s,
            "threshold": threshold,
            "alpha": ALPHA,
            "rounds": ROUNDS,
            "max_extra_rounds": MAX_EXTRA_ROUNDS,
            "samples_per_batch": SAMPLES_PER_BATCH,
            "time_budget_s": time_budget_s,
            "calibration_rounds": cal_rounds,
            "dtype": dtype,
            "sizes": {k: list(v) for k, v in chosen.items()},
        },
        "scenarios": rows,
        "per_size": per_size,
        "e2e": e2e_result,
        "skipped": skipped,
        "notes": notes,
    }
    if device == "cuda":
        result["env"]["after"] = benchlib.cmd(
            ["nvidia-smi", "--query-gpu=clocks.sm,temperature.gpu", "--format=csv,noheader"]
        )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "review_results.json").write_text(json.dumps(result, indent=1, default=str))
        (out / "review_results.md").write_text(markdown(result))
        log.line(f"wrote {out / 'review_results.json'} and {out / 'review_results.md'}")
    if skipped:
        log.line(f"SKIPPED ({len(skipped)}): " + "; ".join(skipped))
    print_table("End to end: kernelbot review of a generated repository", E2E_HEADER, e2e_rows(e2e_result))
    print_table(
        f"Verdict trials on {env.get('gpu') or device} (threshold {threshold:.0%}): "
        "A/A false alarms, planted-slowdown detection",
        HEADER,
        table_rows(rows),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--out", type=Path, help="folder for review_results.json and review_results.md")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--quick", action="store_true", help="fewer calibration rounds and correctness seeds")
    p.add_argument("--trials", type=int, default=20, help="trials per scenario (default 20)")
    p.add_argument(
        "--deadline-s", type=float, default=480.0, help="global deadline; what is not started is listed"
    )
    p.add_argument("--threshold", type=float, help="practical threshold (default: 3%% on cuda, 25%% on cpu)")
    p.add_argument("--time-budget-s", type=float, default=0.6, help="Settings.time_budget_s of each pair")
    p.add_argument(
        "--calibration-rounds", type=int, help="rounds of the long run that measures the realised slowdowns"
    )
    p.add_argument("--sizes", help="comma-separated subset of small,large")
    p.add_argument("--no-e2e", action="store_true", help="skip the end-to-end kernelbot review")
    a = p.parse_args(argv)
    run(
        out=a.out,
        device=a.device,
        quick=a.quick,
        trials=a.trials,
        deadline_s=a.deadline_s,
        threshold=a.threshold,
        time_budget_s=a.time_budget_s,
        cal_rounds=a.calibration_rounds,
        sizes=a.sizes.split(",") if a.sizes else None,
        e2e=not a.no_e2e,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
