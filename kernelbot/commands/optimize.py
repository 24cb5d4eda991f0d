"""`kernelbot optimize OPERATOR`: run an optimization agent on one operator and keep the best verified candidate."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelbot import console
from kernelbot.agents.base import Agent, ReplayAgent
from kernelbot.agents.rules import load_rules, rewrites_for
from kernelbot.agents.search import SearchAgent
from kernelbot.config import load_config
from kernelbot.errors import UsageError
from kernelbot.fingerprint import choose_device, collect
from kernelbot.optimize import OptimizeResult, optimize_operator
from kernelbot.spec import resolve_operator


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("optimize", help="search for a faster verified version of one operator")
    parser.add_argument(
        "operator", help="a KernelBench-form .py file, or an operator name from .github/kernelbot.yml"
    )
    parser.add_argument("--agent", choices=["search", "replay"], default="search")
    parser.add_argument("--candidates", type=Path, nargs="*", default=[], help="files for --agent replay")
    parser.add_argument(
        "--budget", type=int, help="candidates to evaluate at most (default: config agent.budget)"
    )
    parser.add_argument(
        "--time", type=float, dest="time_s", help="wall-time limit in seconds (default: config agent.time_s)"
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    parser.add_argument(
        "--repo", type=Path, default=Path("."), help="repository root (for its config); default: ."
    )
    parser.add_argument(
        "--out", type=Path, default=Path("kernelbot-out"), help="where candidates and the winner are written"
    )
    parser.add_argument("--json", metavar="FILE|-", help="write the JSON result to FILE, or stdout with -")
    parser.set_defaults(run=run)


def make_agent(name: str, candidates: list[Path]) -> tuple[Agent, list[str]]:
    """The agent and the fx rewrites its analysis should try."""
    if name == "replay":
        if not candidates:
            raise UsageError("--agent replay needs --candidates FILE [FILE ...]")
        return ReplayAgent(candidates), []
    rules = load_rules()
    return SearchAgent(rules), rewrites_for(rules)


def render(result: OptimizeResult) -> None:
    rows = []
    for c in result.candidates:
        t = c.evaluation.timing
        rows.append(
            [
                c.origin,
                c.evaluation.status,
                console.fmt_ms(t.median_ms if t else None),
                console.fmt_ratio(c.speedup_vs_eager),
                console.fmt_ratio(c.speedup_vs_compile),
                str(c.reward),
                c.evaluation.reason[:80],
            ]
        )
    check = result.check
    title = (
        f"{check.spec.name}: eager {console.fmt_ms(check.eager.timing.median_ms if check.eager.timing else None)}, "
        f"torch.compile {console.fmt_ms(check.compiled.timing.median_ms if check.compiled and check.compiled.timing else None)}"
    )
    console.err.print(
        console.table(
            title, ["candidate", "status", "median", "vs eager", "vs compile", "reward", "reason"], rows
        )
    )
    best = result.best
    if best is None:
        console.err.print("no candidate earned reward 2 or 3: nothing to suggest")
    else:
        console.err.print(
            f"best: [bold]{best.origin}[/bold] reward {best.reward}, {console.fmt_ratio(best.speedup_vs_eager)} vs eager -> {result.best_path}"
        )


def run(args: argparse.Namespace) -> int:
    repo = args.repo.resolve()
    config = load_config(repo)
    spec, root = resolve_operator(args.operator, repo, config)
    agent, rewrites = make_agent(args.agent, args.candidates)
    fingerprint = collect(choose_device(args.device, config.device))
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
        )
    render(result)
    console.write_json(result.to_json(), args.json)
    return 0
