"""Device benchmark of the verdict's power: A/A false alarms and planted +2/+3/+5% slowdowns at four sizes.

On the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/verdict_power.py --out DIR [--sizes 10us 25us] [--trials 20] [--deadline 540]
On a laptop or CI box (a CPU smoke test of the script, tiny sizes):
    PYTHONPATH=. python3 benchmarks/verdict_power.py --device cpu --trials 2 --out DIR

The operator (--op) is `x * 2.0` on float32 (default), planted slowdowns lengthening x by 2%, 3% or 5%; or a
bf16 matmul (M, K, N) with K 2/3/5% longer (on the H200 that switched cuBLAS kernels, so it is not a clean
slowdown). Sizes are chosen for ~10, ~25, ~100 and ~300 µs a call on an H200; the base time and the
realised slowdown (median over every trial's samples) are measured, not assumed. Trials reuse their
sandboxes, so they are not independent of each other: a sandbox's offset repeats in every trial, and the
Wilson intervals printed are narrower than the truth.

Per size, live sandboxes (PROCESSES_PER_SIDE each, used in turn as kernelbot review does) hold the base, two
more copies of the base (A/A 1, A/A 2: 2 x trials A/A verdicts) and the three planted heads. A trial times
them all in the same rounds (base and each head one batch a round, the order reversed every other round),
and judges every head against the base exactly as kernelbot.pipeline.measure.run_rounds does for one pair:
the same batches, the same sample mode (the first batch fixes calls per sample and CUDA graph replay), the
same look schedule and alpha per look, the same rule (kernelbot.stats.compare), rounds with a clock change or
a new process on the GPU taken again. A head leaves the trial once its verdict is settled or its last look is
reached; sharing the base's batches is what makes 100 verdicts a size fit a device call, and is said in the
results. Then one full `measure_pair` (fresh sandboxes, their check, the rounds) per size gives the wall time
of an operator's verdict in a review.

`--rule pairs` measures the rule with the process as the unit (thresholds.process_pairs, measure.run_pairs)
instead. A verdict over pairs needs fresh processes for every pair, so 20 sequential full verdicts per head
and size would not fit a device call; the run builds a pool instead. Per size it opens SLOTS slots, each a
fresh sandbox per subject (base, A/A, +2%, +3%, +5%) opened together (the next slots' started ahead while
this one is timed, as run_pairs does), and times them in ROUNDS_PER_PAIR rounds (base and every head one
batch a round, the order reversed the second round, rounds with a clock change or a new GPU process taken
again). A trial of a head draws slots in a random order and applies the rule exactly as run_pairs does
(stats.compare_processes over the pairs (base, head) of the slots drawn, looked at on measure.pair_looks'
schedule at alpha per look) until settled or the last look. Trials resample one pool, so they are not
independent: the pool's own draw of process offsets is shared by every trial, and the Wilson intervals are
narrower than the truth. Each trial's wall time is the sum of its slots' opening and batch times. Then one
full `measure_pair(process_pairs=MAX_PAIRS)` per size, at the review's default settings, gives the wall time
of a real verdict.

Writes DIR/verdict_power.json and DIR/verdict_power.md; prints the table last.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from benchmarks.benchlib import Log, environment, print_table, wilson  # noqa: E402
from kernelbot.harness.evaluate import Handle, Settings  # noqa: E402
from kernelbot.harness.gpustate import Monitor, disturbed  # noqa: E402
from kernelbot.pipeline.measure import (  # noqa: E402
    AHEAD_PAIRS,
    EXTRA_ROUNDS,
    PAIR_BATCH_SHARE,
    PROCESSES_PER_SIDE,
    RECHECK_SEEDS,
    REPEAT_SHARE,
    ROUNDS,
    ROUNDS_PER_PAIR,
    SAMPLES_PER_BATCH,
    Ahead,
    looks,
    measure_pair,
    open_checked,
    pair_looks,
)
from kernelbot.stats import compare, compare_processes  # noqa: E402

THRESHOLD, ALPHA = 0.03, 0.01  # kernelbot's defaults (config.Thresholds)
SIZES = {  # matmul (M, K, N): the planted slowdown lengthens K
    "cuda": {
        "10us": (512, 6400, 512),
        "25us": (1024, 6400, 1024),
        "100us": (2048, 6400, 3072),
        "300us": (4096, 6400, 4096),
    },
    "cpu": {"tiny": (16, 1600, 16)},
}
# scale (elementwise, float32, 8 bytes a element moved): the planted slowdown lengthens the vector. The first
# H200 run showed the matmul's K steps changing cuBLAS's kernel (+5% at 10 µs ran 9% faster), so the
# elementwise operator is the default: its time grows smoothly with its length.
ELEMENTS = {
    "cuda": {"10us": 4 << 20, "25us": 12 << 20, "100us": 50 << 20, "300us": 150 << 20},
    "cpu": {"tiny": 1 << 16},
}
DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
HEADS = {"A/A 1": 0.0, "A/A 2": 0.0, "+2%": 0.02, "+3%": 0.03, "+5%": 0.05}
PAIR_HEADS = {"A/A": 0.0, "+2%": 0.02, "+3%": 0.03, "+5%": 0.05}  # --rule pairs: one A/A head, 2x trials
MAX_PAIRS = 24  # --rule pairs: thresholds.process_pairs of the verdicts measured
MODULE = """
import torch


def matmul(a, b):
    return a @ b


def make_inputs(shape, dtype, device):
    m, k, n = shape
    return [torch.randn(m, k, dtype=dtype, device=device), torch.randn(k, n, dtype=dtype, device=device)]


def scale(x):
    return x * 2.0


def make_vector(shape, dtype, device):
    return [torch.randn(*shape, dtype=dtype, device=device)]
"""


def job(root: Path, device: str, shape: tuple[int, ...]) -> dict[str, Any]:
    vector = len(shape) == 1
    return {
        "kind": "declared",
        "root": str(root),
        "device": device,
        "allow_tf32": False,
        "atol": None,
        "rtol": None,
        "callable": "planted.py:" + ("scale" if vector else "matmul"),
        "inputs": "planted.py:" + ("make_vector" if vector else "make_inputs"),
        "reference": None,
        "shapes": [list(shape)],
        "dtypes": ["float32" if vector else DTYPE[device]],
    }


def planted(shape: tuple[int, ...], fraction: float) -> tuple[int, ...]:
    if len(shape) == 1:
        return (round(shape[0] * (1 + fraction) / 1024) * 1024,)
    m, k, n = shape
    step = 64 if k % 6400 == 0 else 1
    return m, round(k * (1 + fraction) / step) * step, n


def trial(
    handles: dict[str, list[Handle]],
    settings: Settings,
    extra: int,
    monitor: Monitor | None,
    t: int,
) -> dict[str, Any]:
    """One trial: every head judged against the shared base on run_rounds' schedule and rule."""
    every = [h for hs in handles.values() for h in hs]
    for h in every:
        h.calls, h.graph = None, "auto"
    schedule = looks(ROUNDS, extra)
    alpha_look = ALPHA / len(schedule)
    pending = {name: list(schedule) for name in handles if name != "base"}
    batches: dict[str, list[list[float]]] = {name: [] for name in handles}
    verdicts: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    budget = max(settings.time_budget_s / ROUNDS, 0.05)
    reference = monitor.read() if monitor is not None else None
    at_start = reference.foreign if reference is not None else ()
    if monitor is not None:
        notes.append(
            f"GPU at the start: {reference.public()}" if reference is not None else str(monitor.note)
        )
    repeated, allowed = 0, int(REPEAT_SHARE * (ROUNDS + extra))
    modes: set[str] = set()
    per_process: dict[str, list[float]] = {}  # batch medians by sandbox: how far processes of one code differ
    claimed: dict[str, list[float]] = {}  # the same, of the subject's claims before the judge's bound
    r, t0 = 0, time.monotonic()
    while pending:
        order = ["base", *pending]
        if r % 2:
            order.reverse()
        got: dict[str, dict[str, Any]] = {}
        why = None
        for name in order:
            handle = handles[name][(t + r) % len(handles[name])]
            answer = handle.time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, budget)
            if answer is None:
                failure = handle.failure
                raise RuntimeError(f"{name}: {failure.status}: {failure.reason}" if failure else name)
            got[name] = answer
            for other in every:
                if other.calls is None:
                    other.calls = answer["calls_per_sample"]
                if other.graph == "auto":
                    other.graph = "on" if answer.get("sample_mode") == "graph" else "off"
            if reference is not None and monitor is not None and why is None:
                state = monitor.read()
                why = disturbed(state, reference, at_start) if state is not None else None
        if any(a.get("sample_mode") == "calls" for a in got.values()) and any(h.graph == "on" for h in every):
            notes.append(
                f"plain calls: {next((a.get('sample_note') for a in got.values() if a.get('sample_note')), '')}"
            )
            for h in every:
                h.graph = "off"
            batches = {name: [] for name in handles}
            pending = {name: list(schedule) for name in handles if name != "base"}
            verdicts, modes, per_process, claimed = {}, set(), {}, {}
            r = 0
            continue
        if why is not None and repeated < allowed:
            repeated += 1
            notes.append(f"round {r + 1} taken again: {why}")
            continue
        for name, answer in got.items():
            batches[name].append(list(answer["times_ms"]))
            modes.add(str(answer.get("sample_mode")))
            key = f"{name}#{(t + r) % len(handles[name])}"
            per_process.setdefault(key, []).append(statistics.median(answer["times_ms"]))
            # What the subject's own events claimed, before the judge's clock bounded it (judge.bound): if
            # sandboxes differ in what is counted but not in what is claimed, the bound makes the difference.
            clocks = (answer.get("debug") or [[]])[0]
            if clocks:
                per_call = statistics.median(c[0] for c in clocks) / answer["calls_per_sample"]
                claimed.setdefault(key, []).append(per_call)
        r += 1
        for name in list(pending):
            if r < pending[name][0]:
                continue
            c = compare(batches["base"], batches[name], threshold=THRESHOLD, alpha=alpha_look)
            pending[name].pop(0)
            if c.settled or not pending[name]:
                verdicts[name] = {
                    "verdict": c.verdict,
                    "ratio": c.ratio,
                    "p_value": c.p_value,
                    "ci99": list(c.ratio_ci99),
                    "rounds": r,
                    "wall_s": round(time.monotonic() - t0, 2),
                }
                del pending[name]
    return {
        "verdicts": verdicts,
        "rounds": r,
        "repeated": repeated,
        "modes": sorted(modes),
        "calls_per_sample": handles["base"][0].calls,
        "notes": notes,
        "per_process": per_process,
        "claimed": claimed,
        "base_ms": [x for b in batches["base"] for x in b],
        "head_ms": {name: [x for b in bs for x in b] for name, bs in batches.items() if name != "base"},
        "wall_s": round(time.monotonic() - t0, 2),
    }


def open_all(
    jobs: dict[str, dict[str, Any]], settings: Settings
) -> tuple[dict[str, list[Handle]], cf.ThreadPoolExecutor]:
    """Every sandbox at once. The pool comes back alive: a sandbox dies with the thread that started it
    (PR_SET_PDEATHSIG), so the threads must outlive the handles; shut the pool down after closing them."""
    keys = [(name, i) for name in jobs for i in range(PROCESSES_PER_SIDE)]
    pool = cf.ThreadPoolExecutor(max_workers=len(keys))
    futures = {key: pool.submit(open_checked, jobs[key[0]], settings) for key in keys}
    handles: dict[str, list[Handle]] = {name: [] for name in jobs}
    failed = None
    for (name, _), future in futures.items():
        handle = future.result()
        assert handle is not None
        handles[name].append(handle)
        if handle.failure is not None and failed is None:
            failed = f"{name}: {handle.failure.status}: {handle.failure.reason}"
    if failed is not None:
        for h in (h for hs in handles.values() for h in hs):
            h.close()
        pool.shutdown()
        raise RuntimeError(failed)
    return handles, pool


def summarize(size: str, shape: tuple[int, ...], trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    base = [x for t in trials for x in t["base_ms"]]
    for name, fraction in HEADS.items():
        got = [t["verdicts"][name] for t in trials if name in t["verdicts"]]
        head = [x for t in trials for x in t["head_ms"][name]]
        counts = {
            v: sum(g["verdict"] == v for g in got)
            for v in ("regression", "no_change", "improvement", "ambiguous")
        }
        n = len(got)
        hits = counts["regression"] + (counts["improvement"] if fraction == 0 else 0)
        rows.append(
            {
                "size": size,
                "shape": list(shape),
                "head": name,
                "planted": fraction,
                "base_us": statistics.median(base) * 1e3 if base else None,
                "realised": statistics.median(head) / statistics.median(base) - 1 if base and head else None,
                "trials": n,
                "counts": counts,
                "rate": hits / n if n else None,
                "rate_ci95": wilson(hits, n) if n else None,
                "median_rounds": statistics.median(g["rounds"] for g in got) if got else None,
                "median_wall_s": statistics.median(g["wall_s"] for g in got) if got else None,
            }
        )
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    log = Log()
    process_pairs = args.process_pairs
    stop_at = time.monotonic() + args.deadline
    device = args.device
    env = environment(device)
    extra = EXTRA_ROUNDS[device]
    settings = Settings(time_budget_s=0.6, timeout_s=120.0, seeds=2)
    workdir = Path(tempfile.mkdtemp(prefix="kernelbot-verdict-power-"))
    (workdir / "planted.py").write_text(MODULE)
    table = SIZES[device] if args.op == "matmul" else {k: (n,) for k, n in ELEMENTS[device].items()}
    sizes = {k: v for k, v in table.items() if not args.sizes or k in args.sizes}
    result: dict[str, Any] = {
        "env": env,
        "args": vars(args),
        "sizes": {},
        "rows": [],
        "full": [],
        "skipped": [],
    }
    share = args.deadline / max(1, len(sizes))
    for i, (size, shape) in enumerate(sizes.items()):
        size_stop = min(stop_at, time.monotonic() + share * (1 if i < len(sizes) - 1 else 10))
        jobs = {"base": job(workdir, device, shape)} | {
            name: job(workdir, device, planted(shape, f)) for name, f in HEADS.items()
        }
        log.line(f"{size} {shape}: opening {len(jobs) * PROCESSES_PER_SIDE} sandboxes")
        try:
            handles, pool = open_all(jobs, settings)
        except Exception as exc:
            result["skipped"].append(f"{size}: {exc}")
            log.line(f"{size}: {exc}")
            continue
        monitor = Monitor(settings.gpu) if device == "cuda" else None
        trials: list[dict[str, Any]] = []
        try:
            full_reserve = 25.0 if device == "cuda" else 10.0
            while len(trials) < args.trials and time.monotonic() < size_stop - full_reserve:
                try:
                    got = trial(handles, settings, extra, monitor, len(trials))
                except RuntimeError as exc:
                    result["skipped"].append(f"{size} trial {len(trials) + 1}: {exc}")
                    break
                trials.append(got)
                log.line(
                    f"{size} trial {len(trials)}: {got['rounds']} rounds {got['wall_s']} s {got['modes']} "
                    + ", ".join(
                        f"{k} {v['verdict']} {v['ratio']:.4f}@{v['rounds']}"
                        for k, v in got["verdicts"].items()
                    )
                )
        finally:
            for h in (h for hs in handles.values() for h in hs):
                h.close()
            pool.shutdown()
        spreads = {}
        for field in ("per_process", "claimed"):
            processes: dict[str, list[float]] = {}
            for t in trials:
                for key, medians in t[field].items():
                    processes.setdefault(key, []).extend(medians)
            base_median = statistics.median(
                processes.get("base#0", []) + processes.get("base#1", []) or [1.0]
            )
            spreads[field] = {
                k: round(statistics.median(v) / base_median, 4) for k, v in sorted(processes.items())
            }
            log.line(f"{size} each sandbox's median / base's ({field}): {spreads[field]}")
        result["sizes"][size] = {
            "shape": list(shape),
            "process_ratio": spreads["per_process"],
            "claimed_ratio": spreads["claimed"],
            "trials": [
                {k: v for k, v in t.items() if not k.endswith("_ms") and k not in ("per_process", "claimed")}
                for t in trials
            ],
        }
        result["rows"] += summarize(size, shape, trials)
        for pairs in dict.fromkeys([0, process_pairs]):  # the round rule, then the pairs rule if asked
            if time.monotonic() >= stop_at - 5:
                break
            t0 = time.monotonic()
            pair = measure_pair(
                jobs["base"], jobs["+3%"], settings, threshold=THRESHOLD, alpha=ALPHA, process_pairs=pairs
            )
            full = {
                "size": size,
                "head": "+3%",
                "process_pairs": pairs,
                "verdict": pair.verdict,
                "error": pair.error,
                "ratio": pair.comparison.ratio if pair.comparison else None,
                "rounds": pair.rounds,
                "mode": pair.head.timing.sample_mode if pair.head and pair.head.timing else None,
                "notes": pair.notes,
                "wall_s": round(time.monotonic() - t0, 1),
            }
            result["full"].append(full)
            log.line(f"{size} full measure_pair +3%: {full}")
    return result


def time_slot(
    opened: dict[str, Handle], monitor: Monitor | None, batch_s: float
) -> tuple[dict[str, list[list[float]]], dict[str, float], int, set[str]]:
    """ROUNDS_PER_PAIR rounds over one slot's sandboxes: every subject one batch a round, the order reversed
    the second round; a round during which the GPU's clocks moved or a new process came onto it is taken
    again (at most once a round). Returns each subject's batches, its batch seconds, rounds taken again and
    the sample modes seen."""
    batches: dict[str, list[list[float]]] = {name: [] for name in opened}
    seconds = dict.fromkeys(opened, 0.0)
    repeated, modes = 0, set()
    reference = monitor.read() if monitor is not None else None
    at_start = reference.foreign if reference is not None else ()
    r = 0
    while r < ROUNDS_PER_PAIR:
        order = list(opened) if r % 2 == 0 else list(reversed(opened))
        got: dict[str, list[float]] = {}
        why = None
        for name in order:
            t0 = time.monotonic()
            answer = opened[name].time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, batch_s)
            seconds[name] += time.monotonic() - t0
            if answer is None:
                failure = opened[name].failure
                raise RuntimeError(f"{name}: {failure.status}: {failure.reason}" if failure else name)
            got[name] = list(answer["times_ms"])
            modes.add(str(answer.get("sample_mode")))
            if reference is not None and monitor is not None and why is None:
                state = monitor.read()
                why = disturbed(state, reference, at_start) if state is not None else None
        if why is not None and repeated < ROUNDS_PER_PAIR:
            repeated += 1
            continue
        for name, times in got.items():
            batches[name].append(times)
        r += 1
    return batches, seconds, repeated, modes


def pool_slots(
    jobs: dict[str, dict[str, Any]], settings: Settings, n_slots: int, stop_at: float, log: Log
) -> tuple[list[dict[str, Any]], list[str]]:
    """Up to n_slots slots of fresh sandboxes (one per subject, opened together, the next slot's started
    ahead while this one is timed), timed by time_slot at run_pairs' batch length. Calls per sample and the
    sample mode are fixed by the first slot's first batch, as run_pairs fixes them by its first pair's."""
    monitor = Monitor(settings.gpu) if jobs["base"]["device"] == "cuda" else None
    batch_s = settings.time_budget_s * PAIR_BATCH_SHARE
    slots: list[dict[str, Any]] = []
    notes: list[str] = []
    calls: int | None = None
    graph = "auto"
    # ahead on a GPU runner only, as run_pairs
    waiting = Ahead(jobs, settings, AHEAD_PAIRS if monitor is not None else 0, n_slots)
    with cf.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        try:
            for k in range(n_slots):
                if time.monotonic() >= stop_at:
                    notes.append(f"deadline after {k} slots")
                    break
                t0 = time.monotonic()
                started = waiting.take()
                seeds = RECHECK_SEEDS if k else None  # as run_pairs: the full check in the first slot only
                futures = {
                    n: pool.submit(open_checked, j, settings, started.get(n), seeds) for n, j in jobs.items()
                }
                opened = {n: f.result() for n, f in futures.items()}
                open_s = time.monotonic() - t0
                waiting.top_up()
                try:
                    failed = next((f"{n}: {h.failure.status}: {h.failure.reason}" for n, h in opened.items()
                                   if h.failure is not None), None)  # fmt: skip
                    if failed:
                        raise RuntimeError(failed)
                    for h in opened.values():
                        h.calls, h.graph = calls, graph
                    if calls is None:  # the first batch fixes calls and mode for every later sandbox
                        first = opened["base"].time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, batch_s)
                        if first is None:
                            raise RuntimeError("base: no first batch")
                        calls = first["calls_per_sample"]
                        graph = "on" if first.get("sample_mode") == "graph" else "off"
                        notes.append(f"{calls} calls a sample, {first.get('sample_mode')} samples")
                        for h in opened.values():
                            h.calls, h.graph = calls, graph
                    batches, seconds, repeated, modes = time_slot(opened, monitor, batch_s)
                finally:
                    for h in opened.values():
                        h.close()
                slots.append({"batches": batches, "batch_s": seconds, "open_s": open_s, "repeated": repeated,
                              "modes": sorted(modes)})  # fmt: skip
                if k % 8 == 7:
                    log.line(f"slot {k + 1}: opened in {open_s:.2f} s, modes {sorted(modes)}")
        finally:
            waiting.close()
    if monitor is not None and monitor.note:
        notes.append(monitor.note)
    return slots, notes


def replay(slots: list[dict[str, Any]], head: str, rng: np.random.Generator) -> dict[str, Any]:
    """One verdict of `head` against the base over slots drawn in a random order, by run_pairs' rule."""
    max_pairs = min(MAX_PAIRS, len(slots))
    schedule = pair_looks(max_pairs)
    alpha_look = ALPHA / len(schedule)
    base: list[list[float]] = []
    other: list[list[float]] = []
    pair_of: list[int] = []
    wall = 0.0
    c = None
    for k, j in enumerate(rng.permutation(len(slots))[:max_pairs]):
        slot = slots[j]
        base += slot["batches"]["base"]
        other += slot["batches"][head]
        pair_of += [k] * len(slot["batches"]["base"])
        wall += slot["open_s"] + slot["batch_s"]["base"] + slot["batch_s"][head]
        if k + 1 == schedule[0]:
            schedule.pop(0)
            c = compare_processes(base, other, pair_of, threshold=THRESHOLD, alpha=alpha_look)
            if c.settled or not schedule:
                break
    assert c is not None
    return {"verdict": c.verdict, "ratio": c.ratio, "ci99": list(c.ratio_ci99), "rounds": k + 1,
            "wall_s": round(wall, 2)}  # fmt: skip


def run_pool(args: argparse.Namespace) -> dict[str, Any]:
    """--rule pairs: the pool of slots per size, the trials replayed from it, one full verdict per size."""
    log = Log()
    stop_at = time.monotonic() + args.deadline
    device = args.device
    settings = Settings(timeout_s=120.0, seeds=2)  # the review's default time budget: run_pairs' batch length
    workdir = Path(tempfile.mkdtemp(prefix="kernelbot-verdict-power-"))
    (workdir / "planted.py").write_text(MODULE)
    table = SIZES[device] if args.op == "matmul" else {k: (n,) for k, n in ELEMENTS[device].items()}
    sizes = {k: v for k, v in table.items() if not args.sizes or k in args.sizes}
    result: dict[str, Any] = {"env": environment(device), "args": vars(args), "rule": "pairs", "sizes": {},
                              "rows": [], "full": [], "skipped": []}  # fmt: skip
    rng = np.random.default_rng(args.seed)
    full_reserve = 70.0 if device == "cuda" else 20.0
    for i, (size, shape) in enumerate(sizes.items()):
        share = (stop_at - time.monotonic()) / (len(sizes) - i)
        jobs = {"base": job(workdir, device, shape)} | {
            name: job(workdir, device, planted(shape, f)) for name, f in PAIR_HEADS.items()
        }
        log.line(f"{size} {shape}: up to {args.slots} slots of {len(jobs)} fresh sandboxes")
        try:
            slots, notes = pool_slots(
                jobs, settings, args.slots, time.monotonic() + share - full_reserve, log
            )
        except Exception as exc:
            result["skipped"].append(f"{size}: {exc}")
            log.line(f"{size}: {exc}")
            continue
        medians = {n: [statistics.median(b) for s in slots for b in s["batches"][n]] for n in jobs}
        base_med = statistics.median(medians["base"])
        result["sizes"][size] = {
            "shape": list(shape), "slots": len(slots), "notes": notes,
            "slot_ratios": {n: [round(statistics.median(x for b in s["batches"][n] for x in b)
                                      / statistics.median(x for b in s["batches"]["base"] for x in b), 4)
                                for s in slots] for n in PAIR_HEADS},
            "open_s": [round(s["open_s"], 2) for s in slots],
            "repeated": sum(s["repeated"] for s in slots),
        }  # fmt: skip
        for name, fraction in PAIR_HEADS.items():
            n_trials = args.trials * (2 if fraction == 0 else 1)
            got = [replay(slots, name, rng) for _ in range(n_trials)] if len(slots) >= 3 else []
            counts = {v: sum(g["verdict"] == v for g in got)
                      for v in ("regression", "no_change", "improvement", "ambiguous")}  # fmt: skip
            hits = counts["regression"] + (counts["improvement"] if fraction == 0 else 0)
            result["rows"].append({
                "size": size, "shape": list(shape), "head": name, "planted": fraction,
                "base_us": base_med * 1e3,
                "realised": statistics.median(medians[name]) / base_med - 1,
                "trials": len(got), "counts": counts,
                "rate": hits / len(got) if got else None, "rate_ci95": wilson(hits, len(got)) if got else None,
                "median_rounds": statistics.median(g["rounds"] for g in got) if got else None,
                "median_wall_s": statistics.median(g["wall_s"] for g in got) if got else None,
            })  # fmt: skip
            log.line(f"{size} {name}: {counts} over {len(slots)} slots")
        if time.monotonic() < stop_at - 5:
            t0 = time.monotonic()
            pair = measure_pair(jobs["base"], jobs["+3%"], settings, threshold=THRESHOLD, alpha=ALPHA,
                                process_pairs=MAX_PAIRS)  # fmt: skip
            full = {"size": size, "head": "+3%", "process_pairs": MAX_PAIRS, "verdict": pair.verdict,
                    "error": pair.error, "ratio": pair.comparison.ratio if pair.comparison else None,
                    "rounds": pair.rounds, "notes": pair.notes, "wall_s": round(time.monotonic() - t0, 1),
                    "mode": pair.head.timing.sample_mode if pair.head and pair.head.timing else None}  # fmt: skip
            result["full"].append(full)
            log.line(f"{size} full measure_pair +3% over pairs: {full}")
    return result


def render(result: dict[str, Any]) -> tuple[list[str], list[list[str]], str]:
    env = result["env"]
    header = [
        "size",
        "head",
        "base µs",
        "realised",
        "reg / no change / imp / ambiguous",
        "rate (95% CI)",
        "pairs" if result.get("rule") == "pairs" else "rounds",
        "wall s",
    ]
    rows = []
    for r in result["rows"]:
        c = r["counts"]
        ci = r["rate_ci95"]
        what = "false alarms" if r["planted"] == 0 else "detected"
        rate = f"{what} {c['regression'] + (c['improvement'] if r['planted'] == 0 else 0)}/{r['trials']}" + (
            f" ({ci[0]:.0%}–{ci[1]:.0%})" if ci else ""
        )
        rows.append(
            [
                r["size"],
                r["head"],
                f"{r['base_us']:.1f}" if r["base_us"] else "—",
                f"{r['realised']:+.1%}" if r["realised"] is not None else "—",
                f"{c['regression']} / {c['no_change']} / {c['improvement']} / {c['ambiguous']}",
                rate,
                f"{r['median_rounds']:.0f}" if r["median_rounds"] else "—",
                f"{r['median_wall_s']:.1f}" if r["median_wall_s"] else "—",
            ]
        )
    pairs = result.get("rule") == "pairs"
    rule = (
        f"- rule: over fresh process pairs (measure.run_pairs), threshold {THRESHOLD:.0%} (called from half of "
        f"it), alpha {ALPHA}, looks at {pair_looks(MAX_PAIRS)} pairs, alpha/{len(pair_looks(MAX_PAIRS))} each; "
        f"{ROUNDS_PER_PAIR} rounds a pair of {SAMPLES_PER_BATCH} samples a batch; trials resample a pool of "
        "slots (not independent: the intervals are narrower than the truth)"
        if pairs
        else f"- rule: threshold {THRESHOLD:.0%} (called from half of it), alpha {ALPHA}, looks at "
        f"{looks(ROUNDS, EXTRA_ROUNDS[result['args']['device']])} rounds, "
        f"alpha/{len(looks(ROUNDS, EXTRA_ROUNDS[result['args']['device']]))} each; "
        f"{SAMPLES_PER_BATCH} samples a batch; heads share the base's batches within a trial"
    )
    lines = [
        "# kernelbot verdict power: A/A false alarms and planted slowdowns",
        "",
        f"- device: {env.get('gpu') or env.get('cpu')}, driver {env.get('driver')}, torch {env.get('torch')} "
        f"(CUDA {env.get('torch_cuda')}), Python {env.get('python')}",
        rule,
        "- rate: A/A any call (regression or improvement) is a false alarm; planted: regression; 95% Wilson interval",
        "- pairs, wall s: medians per verdict (the slots' opening and batch seconds); the full verdicts below are "
        "measure_pair's own"
        if pairs
        else "- rounds, wall s: medians per verdict inside a trial (live sandboxes); the full verdicts below include "
        "opening and checking the sandboxes",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in rows],
        "",
        "Full `measure_pair` verdicts (fresh sandboxes, check, rounds): "
        + "; ".join(
            f"{f['size']} {f['head']}: {f['verdict']} in {f['rounds']} rounds, {f['wall_s']} s ({f['mode']})"
            for f in result["full"]
        ),
        "",
    ]
    if result["skipped"]:
        lines += ["Skipped: " + "; ".join(result["skipped"]), ""]
    return header, rows, "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--sizes", nargs="*")
    parser.add_argument("--op", default="scale", choices=["scale", "matmul"])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for the whole run")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--process-pairs", type=int, default=0, help="also a full verdict over up to N fresh process pairs"
    )
    parser.add_argument(
        "--rule", default="rounds", choices=["rounds", "pairs"], help="pairs: see the docstring"
    )
    parser.add_argument("--slots", type=int, default=40, help="--rule pairs: slots per size")
    parser.add_argument("--seed", type=int, default=0, help="--rule pairs: the trials' draws")
    args = parser.parse_args()
    result = run_pool(args) if args.rule == "pairs" else run(args)
    header, rows, text = render(result)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "verdict_power.json").write_text(json.dumps(result, indent=1, default=str))
        (args.out / "verdict_power.md").write_text(text)
    print_table("verdict power", header, rows)
    for f in result["full"]:
        print(
            f"full {f['size']} {f['head']} (pairs {f.get('process_pairs', 0)}): {f['verdict']} {f['rounds']} rounds {f['wall_s']} s {f['mode']} {f['notes']}"
        )


if __name__ == "__main__":
    main()
