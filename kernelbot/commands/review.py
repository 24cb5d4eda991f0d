"""`kernelbot review --base REF --head REF`: the whole pipeline on a local git repository."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kernelbot import console
from kernelbot.agents.endpoint import endpoint_from
from kernelbot.agents.rules import load_rules, rewrites_for
from kernelbot.agents.search import SearchAgent
from kernelbot.commands.optimize import add_llm_arguments, llm_agent
from kernelbot.config import Config, load_config
from kernelbot.fingerprint import Fingerprint, choose_device, collect
from kernelbot.gitrepo import toplevel
from kernelbot.optimize import OptimizeResult, optimize_operator
from kernelbot.review import Optimizer, ReviewResult, run_review
from kernelbot.spec import OperatorSpec
from kernelbot.store import store_review


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("review", help="measure the operators changed between two revisions")
    parser.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: .)")
    parser.add_argument("--base", required=True, help="base revision (branch, tag or SHA)")
    parser.add_argument("--head", default="HEAD", help="head revision (default: HEAD)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    parser.add_argument(
        "--agent",
        choices=["search", "llm", "none"],
        help="optimization agent for changed operators (default: the config's agent.kind, else none)",
    )
    parser.add_argument("--out", type=Path, help="write the PR comment (Markdown) here")
    parser.add_argument("--json", metavar="FILE|-", help="write the JSON result to FILE, or stdout with -")
    parser.add_argument(
        "--db", metavar="URL", help="history database URL (default: SQLite in the user data directory)"
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 on a confirmed regression or an operator broken at head",
    )
    parser.add_argument(
        "--include-cosmetic",
        action="store_true",
        help="also measure operators whose change is comments/whitespace only",
    )
    parser.add_argument(
        "--all",
        dest="all_operators",
        action="store_true",
        help="also measure operators the diff did not touch (A/A checks, nightly history)",
    )
    parser.add_argument(
        "--candidates-dir",
        type=Path,
        help="where the agent writes candidates (default: .kernelbot/candidates)",
    )
    add_llm_arguments(parser)
    parser.set_defaults(run=run)


def render(review: ReviewResult) -> None:
    rows = []
    for op in review.operators:
        base = op.base.timing.median_ms if op.base and op.base.timing else None
        head = op.head.timing.median_ms if op.head and op.head.timing else None
        rows.append(
            [
                op.name,
                op.change,
                console.fmt_ms(base),
                console.fmt_ms(head),
                console.fmt_pct(op.ratio),
                "—" if op.p_value is None else f"{op.p_value:.2g}",
                op.verdict or "—",
                op.error or "",
            ]
        )
    console.err.print(
        console.table(
            f"kernelbot review {review.base[:10]}..{review.head[:10]}: {review.summary()}",
            ["operator", "change", "base", "head", "Δ", "p", "verdict", "error"],
            rows,
        )
    )


def _search_optimizer(fingerprint: Fingerprint, out_dir: Path) -> Optimizer:
    rules = load_rules()
    rewrites = rewrites_for(rules)

    def optimizer(spec: OperatorSpec, root: Path, cfg: Config) -> OptimizeResult:
        return optimize_operator(
            spec, root, cfg, fingerprint, SearchAgent(rules), out_dir=out_dir, rules_for_analysis=rewrites
        )

    return optimizer


def _llm_optimizer(args: argparse.Namespace, fingerprint: Fingerprint, out_dir: Path) -> Optimizer:
    """A fresh model agent per operator; money and tokens shared over the run (agent.run_max_cost_usd)."""
    from kernelbot.agents.endpoint import RunBudget

    budget: RunBudget | None = None

    def optimizer(spec: OperatorSpec, root: Path, cfg: Config) -> OptimizeResult:
        nonlocal budget
        if budget is None:
            budget = RunBudget(max_cost_usd=cfg.agent.run_max_cost_usd)
        work = out_dir / "agent" / spec.name.replace("/", "_")
        agent = llm_agent(args, cfg, fingerprint, work, run_budget=budget)
        return optimize_operator(spec, root, cfg, fingerprint, agent, out_dir=out_dir)

    return optimizer


def run(args: argparse.Namespace) -> int:
    repo = toplevel(args.repo)
    # The working tree's config picks the device and database; each side's own config drives measurement.
    config = load_config(repo)
    fingerprint = collect(choose_device(args.device, config.device))
    optimizer = None
    args.agent = args.agent or config.agent.kind
    if args.agent == "search":
        optimizer = _search_optimizer(fingerprint, args.candidates_dir or repo / ".kernelbot" / "candidates")
    elif args.agent == "llm":
        endpoint_from(
            config.agent, os.environ, model=args.model, api_base=args.api_base
        )  # fail before timing
        optimizer = _llm_optimizer(
            args, fingerprint, args.candidates_dir or repo / ".kernelbot" / "candidates"
        )
    with console.progress() as step:
        review = run_review(
            repo,
            args.base,
            args.head,
            fingerprint,
            measure_cosmetic=args.include_cosmetic,
            all_operators=args.all_operators,
            optimizer=optimizer,
            progress=step,
        )
        step("storing the run in the history database")
        _, problem = store_review(
            review, args.db or config.database, trigger="local", fallback_dir=repo / ".kernelbot"
        )
    for warning in review.warnings + ([problem] if problem else []):
        console.err.print(f"[yellow]warning:[/yellow] {warning}")
    render(review)
    if args.out:
        args.out.write_text(review.markdown())
    console.write_json(review.to_json(), args.json)
    if args.fail_on_regression and (review.regressions or review.broken_at_head):
        return 1
    return 0
