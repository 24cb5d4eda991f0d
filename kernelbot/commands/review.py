"""`kernelbot review --base REF --head REF`: the whole pipeline on a local git repository."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from kernelbot import console
from kernelbot.commands.agent_args import add_llm_arguments, add_time_argument, agent_choice
from kernelbot.config import load_config
from kernelbot.fingerprint import choose_device, collect
from kernelbot.gitrepo import toplevel, work_dir
from kernelbot.pipeline.optimizers import check_endpoint, make_optimizer
from kernelbot.pipeline.results import OperatorResult, ReviewResult
from kernelbot.pipeline.review import run_review
from kernelbot.pipeline.store import store_review


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
        "--db", metavar="URL|FILE", help="history database URL (default: SQLite in the user data directory)"
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
        help="where the agent writes candidates/ and the winners' drop-in files (default: .kernelbot)",
    )
    add_time_argument(
        parser,
        "wall-clock budget of the whole run, shared by every operator (default: harness.run_time_s, 540)",
    )
    add_llm_arguments(parser)
    parser.set_defaults(run=run)


def _verdict(op: OperatorResult) -> str:
    """The comment's words: "new" for an added operator, "no change" rather than the JSON's no_change."""
    if op.verdict:
        return op.verdict.replace("_", " ")
    return "new" if op.change == "added" else "not measured" if op.stopped_by else "—"


def render(review: ReviewResult) -> None:
    """The comment's table at the terminal's width; candidates' names and errors as lines below it."""
    rows, notes = [], []
    for op in review.operators:
        base = op.base.timing.median_ms if op.base and op.base.timing else None
        head = op.head.timing.median_ms if op.head and op.head.timing else None
        best = op.best_candidate
        rows.append(
            [
                op.name,
                op.change,
                console.fmt_ms(base),
                console.fmt_ms(head),
                console.fmt_pct(op.ratio),
                "—" if op.p_value is None else f"{op.p_value:.2g}",
                _verdict(op),
                console.fmt_ratio(best.speedup_vs_eager if best else None),
                console.fmt_ratio(best.speedup_vs_compile if best else None),
                str(best.reward) if best else "—",
            ]
        )
        name = console.escape(op.name)  # names, origins and errors are the PR's text: never rich markup
        if best:
            notes.append(
                f"{name}: best candidate [bold]{console.escape(best.origin)}[/bold], "
                f"{console.fmt_ratio(best.speedup_vs_eager)} vs eager, "
                f"{console.fmt_ratio(best.speedup_vs_compile)} vs torch.compile, reward {best.reward}"
            )
        notes += [f"{name}: {console.escape(note)}" for note in op.notes]
        if op.error:
            notes.append(f"{name}: [red]{console.escape(op.error)}[/red]")
    console.err.print(
        console.table(
            f"kernelbot review {review.base[:10]}..{review.head[:10]}: {review.summary()}",
            ["operator", "change", "base", "head", "Δ", "p", "verdict", "vs eager", "vs compile", "reward"],
            rows,
            optional=("p", "vs compile", "change", "vs eager"),
        )
    )
    for note in notes:
        console.err.print(note, highlight=False)


def run(args: argparse.Namespace) -> int:
    repo = toplevel(args.repo)
    # The working tree's config picks the device and database; the gates (thresholds, precision, harness)
    # are the base revision's, whatever the head's config says (run_review), and operators are the head's.
    config = load_config(repo)
    fingerprint = collect(choose_device(args.device, config.device))
    optimizer = None
    args.agent = args.agent or config.agent.kind
    if args.agent in ("search", "llm"):
        choice = agent_choice(args, args.agent)
        check_endpoint(choice, config)  # a model agent that cannot run fails before any timing
        optimizer = make_optimizer(choice, fingerprint, args.candidates_dir or work_dir(repo))
    with console.progress() as step:
        review = run_review(
            repo,
            args.base,
            args.head,
            fingerprint,
            measure_cosmetic=args.include_cosmetic,
            all_operators=args.all_operators,
            optimizer=optimizer,
            time_s=args.time_s,
            progress=step,
        )
        step("storing the run in the history database")
        _, problem = store_review(
            review, args.db or config.database, trigger="local", fallback_dir=work_dir(repo)
        )
    for warning in review.warnings + ([problem] if problem else []):
        console.err.print(f"[yellow]warning:[/yellow] {console.escape(warning)}")
    render(review)
    if args.out:
        args.out.write_text(review.markdown())
    console.write_json(review.to_json(), args.json)
    if review.interrupted is not None:  # stored and written: now end as the signal asked
        return 128 + signal.Signals[review.interrupted]
    if args.fail_on_regression and (review.regressions or review.broken_at_head):
        return 1
    return 0
