"""`kernelbot review --base REF --head REF`: the whole pipeline on a local git repository."""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

from kernelbot import console
from kernelbot.commands.agent_args import add_llm_arguments, add_time_argument, agent_choice
from kernelbot.config import load_config
from kernelbot.errors import UsageError
from kernelbot.fingerprint import choose_device, collect
from kernelbot.gitrepo import toplevel, work_dir
from kernelbot.pipeline.detect import detect
from kernelbot.pipeline.optimizers import check_endpoint, make_optimizer
from kernelbot.pipeline.pool import GpuPool
from kernelbot.pipeline.results import OperatorResult, ReviewResult
from kernelbot.pipeline.review import run_review
from kernelbot.pipeline.shards import Plan, ShardResult, parse_shard
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
        help="also measure operators whose change is comments, docstrings or whitespace only",
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
    fleet = parser.add_argument_group("a shard of a fleet run (docs/scale.md)")
    fleet.add_argument("--shard", metavar="K/N", help="review shard K of N: the plan's share, else every Nth")
    fleet.add_argument("--plan", type=Path, help="the plan file `kernelbot plan` wrote (with --shard)")
    fleet.add_argument("--operators", metavar="NAME,...", help="review only these operators")
    fleet.add_argument(
        "--artifact", type=Path, help="write this shard's typed results into DIR for `kernelbot merge`"
    )
    fleet.add_argument("--pr", type=int, help="the pull request this run is for (stored with the run)")
    parser.set_defaults(run=run)


def _share(args: argparse.Namespace, repo: Path) -> tuple[tuple[str, ...], tuple[int, int] | None]:
    """(the operators this run reviews, empty for all; (K, N) when it is a shard)."""
    named = tuple(n.strip() for n in (args.operators or "").split(",") if n.strip())
    if not args.shard:
        if args.plan or args.artifact:
            raise UsageError("--plan and --artifact go with --shard K/N")
        return named, None
    k, n = parse_shard(args.shard)
    if args.plan is not None:
        try:
            plan = Plan.from_json(json.loads(args.plan.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read the plan {args.plan}: {type(exc).__name__}") from None
        if plan.count != n:
            raise UsageError(f"--shard {k}/{n}, but the plan has {plan.count} shards")
        share = tuple(op.name for op in plan.shard(k))
    else:  # no plan: every Nth changed operator by name, the same split in every job
        names = [c.name for c in detect(repo, args.base, args.head)]
        share = tuple(names[k - 1 :: n])
    if named:
        share = tuple(name for name in share if name in named)
    return share or ("",), (k, n)  # ("",) matches nothing: an empty shard reviews nothing


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
    only, shard = _share(args, repo)
    plan_repository = os.environ.get("GITHUB_REPOSITORY")
    fingerprint = collect(choose_device(args.device, config.device))
    pool, pool_note = GpuPool.for_runner(os.environ) if fingerprint.device == "cuda" else (None, None)
    if pool_note:
        console.err.print(f"[yellow]warning:[/yellow] {console.escape(pool_note)}")
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
            only=only,
            pool=pool,
            progress=step,
        )
        if shard is not None and plan_repository:
            review.repository = plan_repository
        step("storing the run in the history database")
        _, problem = store_review(
            review,
            args.db or config.database,
            trigger="pull_request" if args.pr else "local",
            pr_number=args.pr,
            fallback_dir=work_dir(repo),
        )
    for warning in review.warnings + ([problem] if problem else []):
        console.err.print(f"[yellow]warning:[/yellow] {console.escape(warning)}")
    render(review)
    if args.out:
        args.out.write_text(review.markdown())
    console.write_json(review.to_json(), args.json)
    if shard is not None and args.artifact is not None:
        result = ShardResult(shard[0], shard[1], [n for n in only if n], review)
        args.artifact.mkdir(parents=True, exist_ok=True)
        (args.artifact / result.filename()).write_text(json.dumps(result.to_json(), indent=2, default=str))
    if review.interrupted is not None:  # stored and written: now end as the signal asked
        return 128 + signal.Signals[review.interrupted]
    if args.fail_on_regression and (review.regressions or review.broken_at_head):
        return 1
    return 0
