"""`kernelbot optimize OPERATOR`: run an optimization agent on one operator and keep the best verified candidate."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kernelbot import console
from kernelbot.agents.base import Agent, ReplayAgent
from kernelbot.agents.rules import load_rules, rewrites_for
from kernelbot.agents.search import SearchAgent
from kernelbot.config import Config, load_config
from kernelbot.errors import UsageError
from kernelbot.fingerprint import Fingerprint, choose_device, collect
from kernelbot.optimize import OptimizeResult, optimize_operator
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
    add_llm_arguments(parser)
    parser.add_argument(
        "--db",
        metavar="URL",
        help="history database for the run and its transcript (--agent llm; default: config, else SQLite)",
    )
    parser.set_defaults(run=run)


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """--model and the limits of --agent llm (also used by `kernelbot review`)."""
    group = parser.add_argument_group("--agent llm (key: KERNELBOT_LLM_API_KEY or the provider's variable)")
    group.add_argument("--model", help="litellm model name, e.g. openai/gpt-4o (default: config agent.model)")
    group.add_argument(
        "--api-base", help="an OpenAI-compatible endpoint URL (default: config agent.api_base)"
    )
    group.add_argument("--max-turns", type=int, help="model replies per operator (default: agent.max_turns)")
    group.add_argument(
        "--max-cost",
        type=float,
        dest="max_cost",
        help="US dollars per operator (default: agent.max_cost_usd)",
    )
    group.add_argument("--max-tokens", type=int, help="tokens per operator (default: agent.max_tokens)")


def llm_agent(
    args: argparse.Namespace,
    config: Config,
    fingerprint: Fingerprint,
    work_dir: Path,
    run_budget: object | None = None,
) -> Agent:
    """The model agent from the CLI, the config and the environment (the key is never printed)."""
    from kernelbot.agents.endpoint import RunBudget, endpoint_from, limits_from
    from kernelbot.agents.llm import LLMAgent

    for flag in ("max_turns", "max_tokens"):
        if getattr(args, flag, None) is not None and getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.max_cost is not None and args.max_cost < 0:
        raise UsageError("--max-cost must be 0 or more")
    endpoint = endpoint_from(config.agent, os.environ, model=args.model, api_base=args.api_base)
    limits = limits_from(
        config.agent,
        max_turns=args.max_turns,
        max_cost_usd=args.max_cost,
        max_tokens=args.max_tokens,
        time_s=getattr(args, "time_s", None),
    )
    budget = run_budget if isinstance(run_budget, RunBudget) else None
    return LLMAgent(
        endpoint,
        limits,
        config=config,
        fingerprint=fingerprint,
        work_dir=work_dir,
        rules=load_rules(),
        run_budget=budget,
    )


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
    fingerprint = collect(choose_device(args.device, config.device))
    rewrites: list[str] = []
    args.agent = args.agent or (config.agent.kind if config.agent.kind != "none" else "search")
    if args.agent == "llm":
        agent = llm_agent(args, config, fingerprint, args.out / "agent")
    else:
        agent, rewrites = make_agent(args.agent, args.candidates)
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
    if args.agent == "llm":
        _report_agent(result, root, args.db or config.database, fallback_dir=args.out)
    return 0


def _report_agent(result: OptimizeResult, repo: Path, url: str | None, *, fallback_dir: Path) -> None:
    """Store the run and its transcript, then say how the agent ended; a dead endpoint is an error."""
    from kernelbot.agents.endpoint import AgentError
    from kernelbot.store import store_optimize

    summary = result.agent_summary
    run_id, problem = store_optimize(result, repo, url, fallback_dir=fallback_dir)
    if problem:
        console.err.print(f"[yellow]warning:[/yellow] {problem}")
    else:
        console.err.print(f"stored as run {run_id} ({len(result.transcript)} transcript turns)")
    for note in summary.get("notes", []):
        console.err.print(f"[dim]agent:[/dim] {note}")
    console.err.print(
        f"agent {summary.get('model')}: {summary.get('replies', 0)} replies, "
        f"{summary.get('tokens_in', 0) + summary.get('tokens_out', 0)} tokens, ${summary.get('cost_usd', 0.0):.4f}; "
        f"stopped: {summary.get('stop_reason') or result.stopped_by}"
    )
    if summary.get("problem") and not result.candidates:
        raise AgentError(f"the model agent could not work: {summary['problem']}")
