"""The benchmark table as one command.

    python -m benchmarks.suite table --set realsize --device cuda --out DIR [--time 120] [--gpus N] [--only NAME ...]

Runs `kernelbot optimize --agent search` on every problem of a named set, one process per problem (N at
a time, each on its own GPU through CUDA_VISIBLE_DEVICES), and stores each run in DIR/history.db. A second
call with the same DIR resumes: problems the database already holds are not run again. The table
(DIR/table.md) is rendered from the database alone: per problem the baselines, the candidates tried, the
best verified one with its reward and speedups, and the wall time; below it the reward shares and the
geometric mean of the speedup kept (the best candidate with reward >= 2, else eager: 1.0).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kernelbot.history import History, OperatorRecord, RunRecord
from kernelbot.pipeline.results import suggested_best

REPO = Path(__file__).resolve().parents[1]
SETS = {  # name -> the problems' folder (NN_name.py files; *_new.py are candidates, not problems)
    "realsize": REPO / "benchmarks" / "realsize",
    "problems": REPO / "benchmarks" / "problems",
    "heldout": REPO / "benchmarks" / "heldout",  # written after the policy's training runs: never in them
}
Runner = Callable[[Path, Path, argparse.Namespace, int | None], float]
clock = time.monotonic  # --stop-after's clock (a test's fake one)


def problems(name: str, only: Sequence[str] = ()) -> list[Path]:
    folder = SETS[name] if name in SETS else Path(name)
    if not folder.is_dir():
        raise SystemExit(f"benchmarks.suite: no problem set {name!r}; one of {', '.join(SETS)} or a folder")
    found = sorted(p for p in folder.glob("[0-9][0-9]_*.py") if not p.stem.endswith("_new"))
    return [p for p in found if not only or p.stem in only]


def db_url(out: Path) -> str:
    return f"sqlite:///{out / 'history.db'}"


def stored_runs(out: Path) -> list[RunRecord]:
    if not (out / "history.db").exists():
        return []
    history = History.open(db_url(out))
    try:
        return [history.get_run(r.run_id) for r in history.runs()]
    finally:
        history.close()


def operator_name(problem: Path) -> str:
    """The name kernelbot gives a KernelBench file: its path from the repository root, without .py."""
    return problem.resolve().relative_to(REPO).with_suffix("").as_posix()


def run_optimize(problem: Path, out: Path, args: argparse.Namespace, gpu: int | None) -> float:
    """One `kernelbot optimize` process (its own, so a crash or a kill costs one problem); its wall seconds."""
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    cmd = [
        sys.executable, "-m", "kernelbot.cli", "optimize", str(problem), "--agent", "search",
        "--time", str(args.time), "--device", args.device, "--repo", str(REPO),
        "--out", str(out / "candidates" / problem.stem), "--json", str(out / "json" / f"{problem.stem}.json"),
        "--db", db_url(out),
    ]  # fmt: skip
    (out / "json").mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with open(out / "json" / f"{problem.stem}.log", "w") as log:
        try:  # --time bounds the command itself; the margin is for a process that does not end
            subprocess.run(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.time + 60, check=False
            )
        except subprocess.TimeoutExpired:
            log.write(f"\nbenchmarks.suite: killed after {args.time + 60} s\n")
    return time.monotonic() - began


def run_set(args: argparse.Namespace, runner: Runner = run_optimize) -> list[str]:
    """Run what the database does not hold yet; the names run now, in order."""
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    # made (and upgraded: the suite owns its database) once, before processes write to it at once
    History.open(db_url(out), auto_upgrade=True).close()
    # Done: a completed run. A failed one (the operator broke, or a SIGTERM/SIGINT cut it) runs again.
    done = {op.name for run in stored_runs(out) if run.status == "completed" for op in run.operators}
    todo = [p for p in problems(args.set, args.only) if operator_name(p) not in done]
    began = clock()
    gpus = list(range(args.gpus)) if args.device == "cuda" and args.gpus > 1 else [None]
    free = list(gpus)

    def one(problem: Path) -> str | None:
        # A problem that could not end before --stop-after (a device call's limit) waits for the next call.
        if args.stop_after and clock() - began + args.time + 60 > args.stop_after:
            print(f"{operator_name(problem)}: not started (--stop-after {args.stop_after} s)", flush=True)
            return None
        gpu = free.pop()
        try:
            wall = runner(problem, out, args, gpu)
        finally:
            free.append(gpu)
        print(f"{operator_name(problem)}: {wall:.1f} s", flush=True)
        return operator_name(problem)

    with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        return [name for name in pool.map(one, todo) if name is not None]


@dataclass
class Row:
    name: str
    eager_ms: float | None
    compile_ms: float | None
    tried: int
    best: str  # the best candidate's rule, or why there is none
    reward: int | None
    vs_eager: float | None
    vs_compile: float | None
    wall_s: float | None


def rows_from(runs: list[RunRecord]) -> list[Row]:
    latest: dict[str, tuple[RunRecord, OperatorRecord]] = {}
    for run in sorted(runs, key=lambda r: r.started_at):
        for op in run.operators:
            latest[op.name] = (run, op)
    rows = []
    for name, (run, op) in sorted(latest.items()):
        medians = {m.side: m.median_ms for m in op.measurements}
        best = suggested_best(op.candidates)
        wall = (run.finished_at - run.started_at).total_seconds() if run.finished_at else None
        why = run.error or ("no candidate with reward >= 2" if op.candidates else "no candidate ran")
        rows.append(
            Row(
                name.rsplit("/", 1)[-1], medians.get("eager"), medians.get("compile"), len(op.candidates),
                best.origin if best else why, best.reward if best else None,
                best.speedup_vs_eager if best else None, best.speedup_vs_compile if best else None,
                wall if wall and wall > 0 else None,
            )
        )  # fmt: skip
    return rows


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def table(rows: list[Row], title: str) -> str:
    lines = [
        f"# {title}",
        "",
        "| problem | eager ms | compile ms | candidates | best | reward | × eager | × compile | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {_num(r.eager_ms, '.3f')} | {_num(r.compile_ms, '.3f')} | {r.tried} | {r.best} | "
            f"{r.reward if r.reward is not None else '–'} | {_num(r.vs_eager, '.2f')} | {_num(r.vs_compile, '.2f')} "
            f"| {_num(r.wall_s, '.1f')} |"
        )
    n = len(rows)
    if n:
        two = sum(1 for r in rows if (r.reward or 0) >= 2)
        three = sum(1 for r in rows if r.reward == 3)
        kept = [max(1.0, r.vs_eager or 1.0) for r in rows]
        geo = math.exp(sum(math.log(k) for k in kept) / n)
        lines += [
            "",
            f"{n} problems: reward >= 2 on {two} ({two / n:.0%}), reward 3 on {three} ({three / n:.0%}); "
            f"geometric mean of the speedup kept over eager: {geo:.2f}x.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table", help="run a problem set (resuming) and render its table from the database")
    t.add_argument(
        "--set", default="realsize", help=f"{' | '.join(SETS)}, or a folder of NN_name.py problems"
    )
    t.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    t.add_argument("--out", type=Path, required=True, help="results folder: history.db, json/, table.md")
    t.add_argument("--time", type=int, default=120, help="seconds per problem (kernelbot optimize --time)")
    t.add_argument("--gpus", type=int, default=1, help="problems run at once, one GPU each")
    t.add_argument("--only", nargs="*", default=[], help="problem file stems, e.g. 05_matmul_sum_cancel")
    t.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="start no problem that could not end within this many seconds (the rest run next time)",
    )
    t.add_argument(
        "--render-only", action="store_true", help="render the table from the database, run nothing"
    )
    args = parser.parse_args(argv)
    if not args.render_only:
        run_set(args)
    elif not (args.out / "history.db").exists():
        raise SystemExit(
            f"benchmarks.suite: no {args.out / 'history.db'}; run `table` without --render-only first"
        )
    text = table(
        rows_from(stored_runs(args.out)), f"kernelbot optimize --agent search --time {args.time}: {args.set}"
    )
    (args.out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
