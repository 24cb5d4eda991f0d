"""Device benchmark: the harness's own path over examples/ and benchmarks/problems/, plus an A/A noise check.

On the GPU machine, from the repository root:   PYTHONPATH=. python3 benchmarks/gpu_harness.py --out DIR
On a laptop or CI box (CPU, a few operators):   PYTHONPATH=. python3 benchmarks/gpu_harness.py --device cpu --quick

Everything is checked and timed by kernelbot.harness (a fresh sandbox per subject); this script only
orders the work, keeps one global deadline, and writes DIR/results.json and DIR/results.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import fnmatch
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import benchlib  # noqa: E402
from benchmarks.benchlib import Log, environment, print_table  # noqa: E402
from kernelbot.harness.evaluate import Handle, Settings, timing_from  # noqa: E402
from kernelbot.harness.results import Evaluation, reward, speedup  # noqa: E402

SCHEMA_VERSION = 1
EXAMPLES = REPO / "examples"
PROBLEMS = REPO / "benchmarks" / "problems"
RESERVE_S = 15.0  # kept back at the end for writing results and closing sandboxes
# A/A operators, in priority order: short (31: ~70 us, 32: ~60 us on an H200) and long (06: ~290 us, 03, 21, 19)
AA_CUDA = [
    "31_small_matmul",
    "06_softmax",
    "32_small_softmax",
    "03_batched_matmul",
    "21_depthwise_conv2d",
    "19_conv2d_3x3",
]
AA_CPU = ["31_small_matmul", "32_small_softmax"]
QUICK_CUDA = ["03_*", "06_*", "09_*", "17_*", "27_*", "28_*", "30_*", "31_*", "32_*"]
QUICK_CPU = ["31_*", "32_*"]  # the problems are sized for an H200; these two stay cheap on a CPU


# -- what to run ------------------------------------------------------------------------------------
@dataclass
class Operator:
    name: str  # "examples/ops/conv_bn_relu" or "problems/06_softmax"
    group: str  # "example" | "problem"
    job: dict[str, Any]
    subjects: list[tuple[str, str, str | None]]  # (label, harness subject, candidate path)
    results: dict[str, Evaluation] = field(default_factory=dict)


@dataclass
class Task:
    op: Operator
    label: str  # "eager", "compile", "candidate", "candidate_cuda", "operator"
    subject: str
    candidate: str | None


def _base_job(root: Path, device: str) -> dict[str, Any]:
    return {"root": str(root), "device": device, "allow_tf32": False, "atol": None, "rtol": None}


def _subjects(
    candidates: dict[str, Path], compile_: bool, extra: tuple[str, ...] = ()
) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = [(s, s, None) for s in extra]
    out.append(("eager", "eager", None))
    if compile_:
        out.append(("compile", "compile", None))
    out += [(label, "candidate", str(path)) for label, path in candidates.items()]
    return out


def _declared_jobs(device: str) -> list[tuple[str, dict[str, Any]]]:
    """Declared operators of examples/.github/kernelbot.yml that run on `device`, as harness jobs."""
    try:  # the typed path (needs pydantic)
        from kernelbot.config import load_config
        from kernelbot.spec import declared_spec

        config = load_config(EXAMPLES)
        return [
            (d.name, declared_spec(d).job(EXAMPLES, device)) for d in config.operators if device in d.devices
        ]
    except ImportError:  # the device image may lack pydantic: read the same keys by hand
        import yaml

        data = yaml.safe_load((EXAMPLES / ".github" / "kernelbot.yml").read_text()) or {}
        jobs = []
        for d in data.get("operators", []):
            if device not in d.get("devices", ["cpu", "cuda"]):
                continue
            tol = d.get("tolerance") or {}
            jobs.append(
                (
                    d["name"],
                    {
                        "kind": "declared",
                        **_base_job(EXAMPLES, device),
                        "atol": tol.get("atol"),
                        "rtol": tol.get("rtol"),
                        "callable": d["callable"],
                        "inputs": d["inputs"],
                        "reference": d.get("reference"),
                        "shapes": d.get("shapes", []),
                        "dtypes": d.get("dtypes", ["float32"]),
                    },
                )
            )
        return jobs


def example_operators(device: str, compile_: bool) -> list[Operator]:
    ops = []
    for path in sorted((EXAMPLES / "ops").glob("*.py")):
        if "class Model" not in path.read_text():
            continue  # declared operators' modules are handled below
        cands = {"candidate": EXAMPLES / "candidates" / path.name}
        cuda_cand = EXAMPLES / "candidates" / f"{path.stem}_cuda.py"
        if device == "cuda" and cuda_cand.exists():
            cands["candidate_cuda"] = cuda_cand
        cands = {k: v for k, v in cands.items() if v.exists()}
        job = {
            "kind": "kernelbench",
            **_base_job(EXAMPLES, device),
            "file": path.relative_to(EXAMPLES).as_posix(),
        }
        ops.append(Operator(f"examples/ops/{path.stem}", "example", job, _subjects(cands, compile_)))
    for name, job in _declared_jobs(device):
        cand = EXAMPLES / "candidates" / f"{name}.py"
        cands = {"candidate": cand} if cand.exists() else {}
        ops.append(
            Operator(f"examples/{name}", "example", job, _subjects(cands, compile_, extra=("operator",)))
        )
    return ops


def problem_operators(device: str, compile_: bool, patterns: list[str] | None) -> list[Operator]:
    ops = []
    for path in sorted(PROBLEMS.glob("[0-9]*.py")):
        if path.stem.endswith("_new") or (
            patterns and not any(fnmatch.fnmatch(path.name, p) for p in patterns)
        ):
            continue
        cand = path.with_name(f"{path.stem}_new.py")
        cands = {"candidate": cand} if cand.exists() else {}
        job = {"kind": "kernelbench", **_base_job(PROBLEMS, device), "file": path.name}
        ops.append(Operator(f"problems/{path.stem}", "problem", job, _subjects(cands, compile_)))
    return ops


# -- running --------------------------------------------------------------------------------------------
class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


class GpuGate:
    """Timing is exclusive; checks (GPU work that is not timed) may overlap each other but never a timing run.

    Only process start, imports, CUDA context creation and model construction of the next subjects run
    while one is being timed (pass --no-overlap to serialize even those).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._checks = 0
        self._timing = False
        self._waiting = 0

    def check(self, handle: Handle) -> dict[str, Any] | None:
        with self._cond:
            self._cond.wait_for(lambda: not self._timing and self._waiting == 0)
            self._checks += 1
        try:
            return handle.check()
        finally:
            with self._cond:
                self._checks -= 1
                self._cond.notify_all()

    def time(self, handle: Handle, settings: Settings) -> dict[str, Any] | None:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: self._checks == 0 and not self._timing)
            self._waiting -= 1
            self._timing = True
        try:
            return handle.time_batch(settings.min_samples, settings.max_samples, settings.time_budget_s)
        finally:
            with self._cond:
                self._timing = False
                self._cond.notify_all()


def _bounded(settings: Settings, deadline: Deadline) -> Settings:
    """Per-request timeout no later than the global deadline (a hung subject cannot overrun it)."""
    return replace(settings, timeout_s=max(10.0, min(settings.timeout_s, deadline.left() - RESERVE_S / 2)))


def _crashed(task: Task, exc: BaseException) -> Evaluation:
    return Evaluation(
        task.subject, "crashed", f"the benchmark could not start this subject: {type(exc).__name__}: {exc}"
    )


def _open_and_check(task: Task, settings: Settings, gate: GpuGate) -> tuple[Handle | None, Evaluation]:
    try:
        handle = Handle(task.op.job, task.subject, settings, candidate=task.candidate)
    except Exception as exc:  # a failure to spawn, not the subject's fault; recorded, not fatal
        return None, _crashed(task, exc)
    checked = gate.check(handle)
    if checked is None:
        assert handle.failure is not None
        return handle, handle.failure
    return handle, Evaluation(
        task.subject,
        "ok",
        max_abs_err=checked["max_abs_err"],
        max_rel_err=checked["max_rel_err"],
        degenerate=checked["degenerate"],
        cases=checked["cases"],
    )


def run_tasks(
    tasks: list[Task], settings: Settings, deadline: Deadline, depth: int, log: SubjectLog
) -> list[Task]:
    """Check and time every task in order; up to `depth` later tasks load and check while one is timed."""
    gate = GpuGate()
    skipped: list[Task] = []
    pool = cf.ThreadPoolExecutor(max_workers=max(depth, 1))
    futures: dict[int, cf.Future] = {}
    submitted = 0
    try:
        for i, task in enumerate(tasks):
            while submitted < len(tasks) and submitted <= i + depth and deadline.left() > RESERVE_S + 5:
                futures[submitted] = pool.submit(
                    _open_and_check, tasks[submitted], _bounded(settings, deadline), gate
                )
                submitted += 1
            future = futures.pop(i, None)
            if future is None:
                skipped.append(task)
                continue
            handle, ev = future.result()
            try:
                if ev.ok and handle is not None:
                    if deadline.left() < RESERVE_S + 2:
                        skipped.append(task)
                        continue
                    answer = gate.time(handle, settings)
                    if answer is None:
                        assert handle.failure is not None
                        failure = handle.failure
                        failure.max_abs_err, failure.max_rel_err = ev.max_abs_err, ev.max_rel_err
                        ev = failure
                    else:
                        ev.timing = timing_from([answer])
            finally:
                if handle is not None:
                    handle.close()
            task.op.results[task.label] = ev
            log.subject(task, ev)
    finally:
        for future in futures.values():  # prefetched past the deadline: close what started
            if not future.cancel():
                handle, _ = future.result()
                if handle is not None:
                    handle.close()
        pool.shutdown(wait=True)
    return skipped


def warm_caches(
    tasks: list[Task], settings: Settings, deadline: Deadline, cap_s: float, workers: int, log: SubjectLog
) -> dict[str, Any]:
    """Build torch.compile / Triton / CuPy artefacts in parallel (nothing is timed here), so timed runs hit the cache."""
    start = time.monotonic()
    stop_at = min(cap_s, max(0.0, deadline.left() - RESERVE_S - 60))
    done, failed, not_started = 0, [], 0

    def warm(task: Task) -> Evaluation | None:
        if time.monotonic() - start > stop_at:
            return None
        left = max(30.0, stop_at - (time.monotonic() - start) + 60)
        try:
            with Handle(
                task.op.job,
                task.subject,
                replace(settings, timeout_s=min(settings.timeout_s, left)),
                candidate=task.candidate,
            ) as handle:
                return handle.failure if handle.check() is None else Evaluation(task.subject, "ok")
        except Exception as exc:  # a failure to spawn; the measured run will report it
            return _crashed(task, exc)

    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        for task, ev in zip(tasks, pool.map(warm, tasks), strict=True):
            if ev is None:
                not_started += 1
            elif ev.ok:
                done += 1
            else:
                failed.append(f"{task.op.name}:{task.label}: {ev.status}")
    info = {
        "tasks": len(tasks),
        "warmed": done,
        "failed": failed,
        "not_started": not_started,
        "wall_s": round(time.monotonic() - start, 1),
        "workers": workers,
    }
    log.line(
        f"warm-up: {done}/{len(tasks)} built in {info['wall_s']} s with {workers} workers"
        + (f"; {not_started} left to build in line (cap {cap_s:.0f} s)" if not_started else "")
        + (f"; {len(failed)} failed (reported again when measured)" if failed else "")
    )
    return info


def aa_check(
    op: Operator, rounds: int, settings: Settings, deadline: Deadline, samples: int = 10
) -> dict[str, Any]:
    """The same operator in two live sandboxes, timed in alternation (ABBA); how often do the medians differ?"""
    out: dict[str, Any] = {"operator": op.name, "rounds_asked": rounds}
    s = _bounded(settings, deadline)
    with Handle(op.job, "eager", s) as a, Handle(op.job, "eager", s) as b:
        if a.check() is None or b.check() is None:
            failure = a.failure or b.failure
            assert failure is not None
            return {**out, "status": failure.status, "reason": failure.reason}
        answers: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        ratios: list[float] = []
        for r in range(rounds):
            if deadline.left() < RESERVE_S + 2:
                out["stopped"] = "global deadline"
                break
            order = [("a", a), ("b", b)] if r % 2 == 0 else [("b", b), ("a", a)]
            medians: dict[str, float] = {}
            for key, handle in order:
                if key == "b" and b.calls is None:
                    b.calls = (
                        a.calls
                    )  # same calls per sample on both sides, or the comparison is not like for like
                answer = handle.time_batch(samples, samples, settings.time_budget_s)
                if answer is None:
                    failure = handle.failure
                    assert failure is not None
                    return {**out, "status": failure.status, "reason": failure.reason}
                answers[key].append(answer)
                medians[key] = statistics.median(answer["times_ms"])
            ratios.append(medians["a"] / medians["b"])
    ta, tb = timing_from(answers["a"]), timing_from(answers["b"])
    dev = sorted(abs(x - 1) for x in ratios)
    n = len(ratios)
    return {
        **out,
        "status": "ok",
        "rounds": n,
        "samples_per_batch": samples,
        "calls_per_sample": ta.calls_per_sample,
        "median_ms_a": ta.median_ms,
        "median_ms_b": tb.median_ms,
        "over_1pct": sum(d > 0.01 for d in dev) / n if n else None,
        "over_3pct": sum(d > 0.03 for d in dev) / n if n else None,
        "p95_abs_dev": dev[min(n - 1, int(0.95 * n))] if n else None,
        "max_abs_dev": dev[-1] if n else None,
        "mean_ratio": statistics.fmean(ratios) if n else None,
        "ratios": [round(x, 5) for x in ratios],
        "sm_clock_mhz": [ta.sm_clock_mhz, tb.sm_clock_mhz],
    }


# -- environment and reporting ---------------------------------------------------------------------------
def _ms(ev: Evaluation | None) -> str:
    if ev is None:
        return "-"
    if not ev.ok or ev.timing is None:
        return ev.status
    return f"{ev.timing.median_ms:.4f}"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def summarize(op: Operator) -> dict[str, Any]:
    r = op.results
    eager, comp = r.get("eager"), r.get("compile")
    row: dict[str, Any] = {
        "name": op.name,
        "group": op.group,
        "job": {k: v for k, v in op.job.items() if k != "root"},
        "subjects": {k: {**v.public(), "cases": v.cases, "degenerate": v.degenerate} for k, v in r.items()},
    }
    row["compile_vs_eager"] = speedup(eager, comp) if comp else None
    row["candidates"] = {}
    for label, ev in r.items():
        if label.startswith("candidate") or label == "operator":
            row["candidates"][label] = {
                "reward": reward(ev, eager, comp),
                "vs_eager": speedup(eager, ev),
                "vs_compile": speedup(comp, ev) if comp else None,
            }
    return row


def table_rows(rows: list[dict[str, Any]], ops: list[Operator]) -> list[list[str]]:
    out = []
    for row, op in zip(rows, ops, strict=True):
        r = op.results
        labels = [k for k in r if k.startswith("candidate") or k == "operator"] or [None]
        for label in labels:
            c = row["candidates"].get(label, {}) if label else {}
            out.append(
                [
                    op.name.split("/", 1)[1],
                    _ms(r.get("eager")),
                    _ms(r.get("compile")),
                    label or "-",
                    _ms(r.get(label)) if label else "-",
                    _x(c.get("vs_eager")),
                    _x(c.get("vs_compile")),
                    str(c["reward"]) if c else "-",
                    (r[label].reason[:70] if label and not r[label].ok else ""),
                ]
            )
    return out


HEADER = [
    "operator",
    "eager ms",
    "compile ms",
    "subject",
    "subject ms",
    "vs eager",
    "vs compile",
    "reward",
    "note",
]
AA_HEADER = ["A/A operator", "median ms", "calls/sample", "rounds", ">1%", ">3%", "p95 |dev|", "max |dev|"]


def aa_rows(aa: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for a in aa:
        if a.get("status") != "ok":
            rows.append([a["operator"], a.get("status", "?"), "", "", "", "", "", a.get("reason", "")[:60]])
            continue
        rows.append(
            [
                a["operator"],
                f"{a['median_ms_a']:.4f}",
                str(a["calls_per_sample"]),
                str(a["rounds"]),
                f"{a['over_1pct']:.0%}",
                f"{a['over_3pct']:.0%}",
                f"{a['p95_abs_dev']:.2%}",
                f"{a['max_abs_dev']:.2%}",
            ]
        )
    return rows


def markdown(result: dict[str, Any], tables: dict[str, list[list[str]]]) -> str:
    env = result["env"]
    lines = [
        "# kernelbot device benchmark",
        "",
        f"- date: {env['date']}  host: {env['host']}",
        f"- device: {env.get('gpu') or env['cpu']} (driver {env.get('driver')})",
        f"- torch {env['torch']} (CUDA {env['torch_cuda']}, cuDNN {env['cudnn']}), {env['cupy']}, {env['triton']}, nvcc: {env['nvcc']}",
        f"- python {env['python']}; settings: {json.dumps(result['settings'])}",
        f"- wall {result['wall_s']} s of a {result['args']['budget_s']} s budget; overlap depth {result['args']['depth']}",
        "",
    ]
    for title, key, header in (
        ("Examples", "examples", HEADER),
        ("Problems", "problems", HEADER),
        ("A/A check", "aa", AA_HEADER),
    ):
        rows = tables.get(key) or []
        if not rows:
            continue
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
        lines.append("")
    if result["skipped"]:
        lines += ["## Skipped (global deadline)", "", ", ".join(result["skipped"]), ""]
    lines += [f"- {note}" for note in result["notes"]]
    return "\n".join(lines) + "\n"


class SubjectLog(Log):
    def subject(self, task: Task, ev: Evaluation) -> None:
        what = (
            f"{ev.timing.median_ms:.4f} ms ({ev.timing.samples}x{ev.timing.calls_per_sample}, {ev.timing.stopped_by})"
            if ev.ok and ev.timing
            else f"{ev.status}: {ev.reason[:160]}"
        )
        self.line(f"{task.op.name:40s} {task.label:15s} {what}")


# -- main -----------------------------------------------------------------------------------------------
def run(
    out: Path | None = None,
    device: str = "cuda",
    quick: bool = False,
    budget_s: float = 480.0,
    problems: list[str] | None = None,
    compile_: bool = True,
    overlap: bool = True,
    aa_rounds: int | None = None,
    aa_ops: list[str] | None = None,
    examples: bool = True,
    cache_dir: Path | None = None,
    workers: int | None = None,
    time_budget_s: float = 1.0,
) -> dict[str, Any]:
    """The whole benchmark; returns what it writes to out/results.json."""
    log = SubjectLog()
    deadline = Deadline(budget_s)
    cpu = device == "cpu"
    cache_dir = cache_dir or Path("/tmp/kernelbot-bench-cache") / device
    cache_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(time_budget_s=time_budget_s, max_samples=100, timeout_s=240.0, cache_dir=cache_dir)
    depth = 0 if not overlap else (1 if cpu else 8)
    workers = workers or max(1, min(8, (os.cpu_count() or 2) // 2))
    if problems is None and quick:
        problems = QUICK_CPU if cpu else QUICK_CUDA
    aa_ops = aa_ops if aa_ops is not None else (AA_CPU if cpu else AA_CUDA[:3] if quick else AA_CUDA)
    aa_rounds = aa_rounds or (5 if cpu else 10 if quick else 16)

    env = environment(device)
    log.line(
        f"device {env.get('gpu') or env['cpu']}, driver {env.get('driver')}, torch {env['torch']} "
        f"(CUDA {env['torch_cuda']}, cuDNN {env['cudnn']}), {env['cupy']}, {env['triton']}, nvcc {env['nvcc']}, python {env['python']}"
    )
    ex_ops = example_operators(device, compile_) if examples else []
    pr_ops = problem_operators(device, compile_, problems)
    ex_tasks = [Task(op, label, subj, cand) for op in ex_ops for label, subj, cand in op.subjects]
    pr_tasks = [Task(op, label, subj, cand) for op in pr_ops for label, subj, cand in op.subjects]
    log.line(
        f"{len(ex_ops)} example operators ({len(ex_tasks)} subjects), {len(pr_ops)} problems ({len(pr_tasks)} subjects), "
        f"A/A on {len(aa_ops)} x {aa_rounds} rounds; budget {budget_s:.0f} s; cache {cache_dir}"
    )

    def buildy(task: Task) -> bool:  # subjects that compile something on first call
        if task.subject == "compile":
            return True
        return task.candidate is not None and any(
            w in Path(task.candidate).read_text() for w in ("triton", "cupy")
        )

    notes = [
        f"subjects of the same operator and device are timed one at a time; with overlap depth {depth}, up to {depth} "
        "later subjects start their process and run their correctness check while none is being timed",
        "timing: kernelbot.harness (CUDA events + device-wide sync, L2 flushed before each sample, rotated inputs, "
        f"adaptive: >=10 samples, stop at 0.5% RSE or {time_budget_s:g} s)",
        "reward: -1 wrong, 1 correct, 2 >5% faster than eager, 3 also >5% faster than torch.compile",
    ]
    warm = warm_caches(
        [t for t in ex_tasks + pr_tasks if buildy(t)], settings, deadline, 0.3 * budget_s, workers, log
    )

    skipped: list[Task] = []
    log.line("examples")
    skipped += run_tasks(ex_tasks, settings, deadline, depth, log)

    aa: list[dict[str, Any]] = []
    log.line("A/A check")
    aa_floor = 0.75 * deadline.left()  # the A/A check may use at most a quarter of the time left now
    by_stem = {op.name.split("/", 1)[1]: op for op in problem_operators(device, False, None)}
    for stem in aa_ops:
        op = by_stem.get(stem)
        if op is None:
            aa.append({"operator": stem, "status": "missing", "reason": "no such problem"})
            continue
        if deadline.left() < max(RESERVE_S + 20, aa_floor):
            aa.append({"operator": op.name, "status": "skipped", "reason": "deadline"})
            continue
        result = aa_check(op, aa_rounds, settings, deadline)
        aa.append(result)
        log.line(
            f"A/A {op.name}: "
            + (
                f"{result['median_ms_a']:.4f} ms, >1%: {result['over_1pct']:.0%}, >3%: {result['over_3pct']:.0%} "
                f"of {result['rounds']} rounds, max {result['max_abs_dev']:.2%}"
                if result.get("status") == "ok"
                else f"{result['status']}: {result.get('reason', '')[:160]}"
            )
        )

    log.line("problems")
    skipped += run_tasks(pr_tasks, settings, deadline, depth, log)

    ex_rows, pr_rows = [summarize(op) for op in ex_ops], [summarize(op) for op in pr_ops]
    tables = {
        "examples": table_rows(ex_rows, ex_ops),
        "problems": table_rows(pr_rows, pr_ops),
        "aa": aa_rows(aa),
    }
    skipped_names = [f"{t.op.name}:{t.label}" for t in skipped]
    if skipped_names:
        notes.append(f"global deadline: {len(skipped_names)} subjects were not measured")
    result = {
        "schema_version": SCHEMA_VERSION,
        "env": env,
        "wall_s": round(time.monotonic() - log.start, 1),
        "args": {
            "device": device,
            "quick": quick,
            "budget_s": budget_s,
            "problems": problems,
            "compile": compile_,
            "depth": depth,
            "aa_rounds": aa_rounds,
            "aa_ops": aa_ops,
            "workers": workers,
        },
        "settings": {
            "time_budget_s": settings.time_budget_s,
            "min_samples": settings.min_samples,
            "max_samples": settings.max_samples,
            "target_rse": settings.target_rse,
            "seeds": settings.seeds,
        },
        "warm_up": warm,
        "examples": ex_rows,
        "problems": pr_rows,
        "aa": aa,
        "skipped": skipped_names,
        "notes": notes,
    }
    if env.get("gpus"):
        after = benchlib.cmd(["nvidia-smi", "--query-gpu=clocks.sm,temperature.gpu", "--format=csv,noheader"])
        result["env"]["after"] = after
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
        (out / "results.md").write_text(markdown(result, tables))
        log.line(f"wrote {out / 'results.json'} and {out / 'results.md'}")
    if skipped_names:
        log.line(f"SKIPPED by the global deadline ({len(skipped_names)}): {', '.join(skipped_names)}")
    print_table(f"Examples on {env.get('gpu') or device}", HEADER, tables["examples"])
    print_table("Problems", HEADER, tables["problems"])
    print_table(
        "A/A: same operator twice, interleaved; share of rounds whose medians differ by more than 1% / 3%",
        AA_HEADER,
        tables["aa"],
    )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="folder for results.json and results.md")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--quick", action="store_true", help="a few problems and a short A/A check")
    p.add_argument(
        "--budget-s", type=float, default=480.0, help="global deadline; what remains is skipped and listed"
    )
    p.add_argument("--problems", help="comma-separated globs of problem files, e.g. '06_*,27_*'")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument(
        "--no-overlap", action="store_true", help="start each subject only after the last one finished"
    )
    p.add_argument("--no-examples", action="store_true")
    p.add_argument("--aa-rounds", type=int)
    p.add_argument("--aa", help="comma-separated problem stems for the A/A check ('' for none)")
    p.add_argument(
        "--cache-dir",
        type=Path,
        help="torch.compile / Triton caches (default /tmp/kernelbot-bench-cache/DEVICE)",
    )
    p.add_argument("--workers", type=int, help="parallel builds in the warm-up phase")
    p.add_argument("--time-budget-s", type=float, default=1.0, help="timing budget per subject")
    a = p.parse_args(argv)
    run(
        out=a.out,
        device=a.device,
        quick=a.quick,
        budget_s=a.budget_s,
        problems=a.problems.split(",") if a.problems else None,
        compile_=not a.no_compile,
        overlap=not a.no_overlap,
        aa_rounds=a.aa_rounds,
        aa_ops=[s for s in a.aa.split(",") if s] if a.aa is not None else None,
        examples=not a.no_examples,
        cache_dir=a.cache_dir,
        workers=a.workers,
        time_budget_s=a.time_budget_s,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
