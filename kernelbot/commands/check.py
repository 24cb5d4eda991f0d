"""`kernelbot check OPERATOR [--candidate FILE]`: measure one operator, and a candidate against it."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelbot import console
from kernelbot.config import load_config
from kernelbot.errors import UsageError
from kernelbot.fingerprint import choose_device, collect
from kernelbot.harness.results import speedup
from kernelbot.pipeline.check import check_operator
from kernelbot.pipeline.results import CheckReport
from kernelbot.spec import candidate_problem, resolve_operator


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="check and time one operator (and a candidate against it)")
    parser.add_argument(
        "operator", help="a KernelBench-form .py file, or an operator name from .github/kernelbot.yml"
    )
    parser.add_argument("--candidate", type=Path, help="a file defining ModelNew (or the declared callable)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    parser.add_argument(
        "--repo", type=Path, default=Path("."), help="repository root (for its config); default: ."
    )
    parser.add_argument("--json", metavar="FILE|-", help="write the JSON report to FILE, or stdout with -")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    parser.set_defaults(run=run)


def render(report: CheckReport) -> None:
    rows = []
    subjects = [("operator", report.reference)]
    if report.eager is not report.reference:
        subjects.append(("eager reference", report.eager))
    if report.compiled is not None:
        subjects.append(("torch.compile" + (" (cached)" if report.compiled.cached else ""), report.compiled))
    if report.candidate is not None:
        subjects.append(("candidate", report.candidate))
    for label, ev in subjects:
        t = ev.timing
        rows.append(
            [
                label,
                ev.status,
                console.fmt_ms(t.median_ms if t else None),
                f"{console.fmt_ms(t.ci95_ms[0])} – {console.fmt_ms(t.ci95_ms[1])}" if t else "—",
                str(t.samples) if t else "—",
                console.fmt_ratio(speedup(report.eager, ev)),
                f"{ev.max_abs_err:.2g}" if ev.max_abs_err is not None else "—",
            ]
        )
    fp = report.fingerprint
    where = fp.gpu or fp.cpu
    console.err.print(
        console.table(
            f"{report.spec.name} on {fp.device} ({where}, torch {fp.torch})",
            ["subject", "status", "median", "95% CI", "samples", "vs eager", "max abs err"],
            rows,
            optional=("95% CI", "samples", "max abs err"),
        )
    )
    # Timings whose 95% interval is wider than +-10% of the median: on a loaded machine the separate runs the
    # "vs eager" column compares moved 4x between two checks (a user's trial); say so where it shows.
    noisy = [
        label
        for label, ev in subjects
        if ev.timing
        and ev.timing.median_ms > 0
        and ev.timing.ci95_ms[1] - ev.timing.ci95_ms[0] > 0.2 * ev.timing.median_ms
    ]
    if noisy:
        console.err.print(
            f"noisy timings: {', '.join(noisy)} (95% CI wider than ±10% of the median); the vs eager column "
            "compares separate runs, so read it as rough: a quieter machine narrows it, and a reward above 1 "
            "comes from rounds timed side by side",
            highlight=False,
            markup=False,
        )
    if report.candidate is not None:
        cand = report.candidate
        if not cand.ok:
            console.err.print(f"[red]candidate {cand.status}[/red]: {console.escape(cand.reason)}")
        console.err.print(
            f"reward: [bold]{report.reward}[/bold] (-1 wrong, 1 correct, 2 >5% faster than eager, 3 also than torch.compile)"
        )
        sbs = report.side_by_side
        if sbs is not None:
            vs = [
                f"{sbs[f'speedup_vs_{b}']:.2f}× {name} (99% CI {console.fmt_interval(sbs[f'speedup_vs_{b}_ci99'])})"
                for b, name in (("eager", "eager"), ("compile", "torch.compile"))
                if f"speedup_vs_{b}" in sbs
            ]
            console.err.print(f"timed side by side in {sbs['rounds']} rounds: {', '.join(vs)}")
        elif report.claimed_reward != report.reward and report.candidate.ok:
            console.err.print(
                f"(reward {report.claimed_reward} on the separate timings; the side-by-side rounds could not finish)"
            )


def run(args: argparse.Namespace) -> int:
    repo = args.repo.resolve()
    config = load_config(repo)
    if args.candidate is not None and not args.candidate.exists():
        raise UsageError(f"{args.candidate}: no such candidate file; pass a .py file that defines ModelNew")
    spec, root = resolve_operator(args.operator, repo, config)
    if args.candidate is not None and spec.kind == "kernelbench":
        problem = candidate_problem(args.candidate)
        if problem is not None:
            raise UsageError(problem)
    device = choose_device(args.device, config.device)
    fingerprint = collect(device)
    with console.progress(enabled=args.json != "-" or True) as step:
        report = check_operator(
            spec,
            root,
            config,
            fingerprint,
            candidate=args.candidate,
            with_compile=not args.no_compile,
            progress=step,
        )
    render(report)
    console.write_json(report.to_json(), args.json)
    if report.candidate is not None and not report.candidate.ok:
        return 1
    return 0
