"""`kernelbot optimize OPERATOR`: run an optimization agent on one operator and keep the best verified candidate."""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path

from kernelbot import console
from kernelbot.commands.agent_args import add_llm_arguments, add_time_argument, agent_choice
from kernelbot.config import load_config
from kernelbot.errors import KernelbotError
from kernelbot.fingerprint import choose_device, collect
from kernelbot.harness import stop
from kernelbot.harness.evaluate import out_of_time
from kernelbot.pipeline.optimize import optimize_operator, why_nothing_suggested
from kernelbot.pipeline.optimizers import make_agent
from kernelbot.pipeline.results import CandidateResult, OptimizeResult
from kernelbot.spec import resolve_operator


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("optimize", help="search for a faster verified version of one operator")
    parser.add_argument(
        "operator", help="a KernelBench-form .py file, or an operator name from .github/kernelbot.yml"
    )
    parser.add_argument(
        "--agent",
        choices=["search", "replay", "llm"],
        help="default: the config's agent.kind when it names one, else search",
    )
    parser.add_argument("--candidates", type=Path, nargs="*", default=[], help="files for --agent replay")
    parser.add_argument(
        "--budget", type=int, help="candidates to evaluate at most (default: config agent.budget)"
    )
    add_time_argument(parser, "wall-time limit in seconds (default: config agent.time_s)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    parser.add_argument(
        "--repo", type=Path, default=Path("."), help="repository root (for its config); default: ."
    )
    parser.add_argument(
        "--out", type=Path, default=Path("kernelbot-out"), help="where candidates and the winner are written"
    )
    parser.add_argument("--json", metavar="FILE|-", help="write the JSON result to FILE, or stdout with -")
    add_llm_arguments(parser)
    parser.add_argument(
        "--db",
        metavar="URL|FILE",
        help="history database to store the run in (always for --agent llm: its transcript; default: config, else SQLite)",
    )
    parser.set_defaults(run=run)


def _ratio_cell(c: CandidateResult, base: str) -> str:
    """A speedup, and where it was timed side by side its 99% interval: on a loaded machine a point estimate
    of 2.29x can come with an interval of 0.91-2.77x (a user's trial), and the point is what gets read."""
    text = console.fmt_ratio(c.speedup_vs_eager if base == "eager" else c.speedup_vs_compile)
    if not c.side_by_side:
        return text
    interval = c.side_by_side.get(f"speedup_vs_{base}_ci99")
    return text + " †" + (f" [{console.fmt_interval(interval)}]" if interval else "")


def render(result: OptimizeResult) -> None:
    """One row per candidate at the terminal's width; why a candidate failed as a line below the table."""
    rows, notes = [], []
    for c in result.candidates:
        t = c.evaluation.timing
        # Cut by the run's own deadline, not judged: no status of the candidate's, no reward (training skips it)
        cut = out_of_time(c.evaluation.status, c.evaluation.reason)
        rows.append(
            [
                c.origin,
                "not finished" if cut else c.evaluation.status,
                console.fmt_ms(t.median_ms if t else None),
                _ratio_cell(c, "eager"),
                _ratio_cell(c, "compile"),
                "—" if cut else str(c.reward) + (" ‡" if c.provisional_reward else ""),
            ]
        )
        if c.evaluation.status != "ok" and c.evaluation.reason:
            notes.append(f"{c.origin}: {c.evaluation.reason}")
    check = result.check
    title = (
        f"{check.spec.name}: eager {console.fmt_ms(check.eager.timing.median_ms if check.eager.timing else None)}, "
        f"torch.compile {console.fmt_ms(check.compiled.timing.median_ms if check.compiled and check.compiled.timing else None)}"
        + (" (cached)" if check.compiled and check.compiled.cached else "")
    )
    console.err.print(
        console.table(title, ["candidate", "status", "median", "vs eager", "vs compile", "reward"], rows)
    )
    if any(c.side_by_side for c in result.candidates):
        console.err.print(
            "† timed side by side with eager and torch.compile, in the same rounds (the reward comes from these "
            "ratios and their 99% interval, in brackets; the medians in the title are separate runs)",
            highlight=False,
            markup=False,
        )
    if any(c.provisional_reward for c in result.candidates):
        console.err.print(
            "‡ not timed side by side (only a candidate claiming more than every one timed before it is, while "
            "time is left): by the cached baselines alone its reward would be "
            + ", ".join(
                f"{c.provisional_reward} ({c.origin})" for c in result.candidates if c.provisional_reward
            )
            + "; a reward above 1 needs the side-by-side rounds",
            highlight=False,
            markup=False,
        )
    for note in notes:
        console.err.print(note, highlight=False, markup=False)
    best = result.best
    if best is None:
        console.err.print("no candidate earned reward 2 or 3: nothing to suggest")
        why = why_nothing_suggested(result)
        if why is not None:
            console.err.print(why, highlight=False, markup=False)
    else:
        console.err.print(
            f"best: [bold]{best.origin}[/bold] reward {best.reward}, {console.fmt_ratio(best.speedup_vs_eager)} vs eager -> {result.best_path}"
        )


def run(args: argparse.Namespace) -> int:
    repo = args.repo.resolve()
    config = load_config(repo)
    spec, root = resolve_operator(args.operator, repo, config)
    fingerprint = collect(choose_device(args.device, config.device))
    args.agent = args.agent or (config.agent.kind if config.agent.kind != "none" else "search")
    agent, rewrites = make_agent(
        agent_choice(args, args.agent), config, fingerprint, args.out / "agent", time_s=args.time_s, root=repo
    )
    try:
        with console.progress() as step:
            result = optimize_operator(
                spec,
                root,
                config,
                fingerprint,
                agent,
                out_dir=args.out,
                budget=args.budget,
                time_s=args.time_s,
                rules_for_analysis=rewrites,
                progress=step,
                started=getattr(args, "started", None),  # --time counts the command's start-up too
            )
    except (KernelbotError, KeyboardInterrupt) as exc:  # before any candidate: a JSON result all the same
        stopped = stop.acknowledge(exc) if isinstance(exc, KeyboardInterrupt) else "error"
        console.write_json(
            {"operator": spec.name, "stopped_by": stopped, "error": str(exc) or stopped, "candidates": []},
            args.json,
        )
        if args.db:
            from kernelbot.pipeline.store import store_failed_optimize

            _, problem = store_failed_optimize(
                spec, root, fingerprint, str(exc) or stopped, args.db, fallback_dir=args.out
            )
            if problem:
                console.err.print(f"[yellow]warning:[/yellow] {console.escape(problem)}")
        raise
    render(result)
    console.write_json(result.to_json(), args.json)
    if args.agent == "llm" or args.db:  # the model's transcript is always kept; other runs when asked
        _store(
            result,
            root,
            args.db or config.database,
            fallback_dir=args.out,
            started=getattr(args, "started", None),
        )
    if args.agent == "llm":
        _report_agent(result)
    if result.stopped_by in ("SIGINT", "SIGTERM"):
        return 128 + signal.Signals[result.stopped_by]
    return 0


def _store(
    result: OptimizeResult, repo: Path, url: str | None, *, fallback_dir: Path, started: float | None
) -> None:
    """Store the run (baselines, every candidate, the agent's turns) in the history database."""
    from kernelbot.pipeline.store import store_optimize

    wall_s = None if started is None else time.monotonic() - started
    run_id, problem = store_optimize(result, repo, url, fallback_dir=fallback_dir, wall_s=wall_s)
    if problem:
        console.err.print(f"[yellow]warning:[/yellow] {console.escape(problem)}")
    else:
        console.err.print(f"stored as run {run_id} ({len(result.transcript)} transcript turns)")


def _report_agent(result: OptimizeResult) -> None:
    """Say how the model agent ended; a dead endpoint is an error."""
    from kernelbot.agents.endpoint import AgentError

    summary = result.agent_summary
    for note in summary.get("notes", []):
        console.err.print(f"[dim]agent:[/dim] {console.escape(note)}")
    console.err.print(
        f"agent {summary.get('model')}: {summary.get('replies', 0)} replies, "
        f"{summary.get('tokens_in', 0) + summary.get('tokens_out', 0)} tokens, ${summary.get('cost_usd', 0.0):.4f}; "
        f"stopped: {summary.get('stop_reason') or result.stopped_by}"
    )
    if summary.get("problem") and not result.candidates:
        raise AgentError(f"the model agent could not work: {summary['problem']}")
