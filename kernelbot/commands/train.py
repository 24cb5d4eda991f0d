"""`kernelbot train --db URL [--db URL ...] --out policy.json`: fit the search agent's rule order from the
candidates stored in history databases, report its cross-validated quality, write the policy file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kernelbot import console
from kernelbot.agents.learning import BUDGET
from kernelbot.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("train", help="learn the search agent's rule order from the history database")
    parser.add_argument(
        "--db",
        metavar="URL|FILE",
        action="append",
        required=True,
        help="a history database to learn from (repeat for several: runners' SQLite files, the fleet's PostgreSQL)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the policy file to write (JSON)")
    parser.add_argument(
        "--folds",
        type=int,
        default=0,
        help="cross-validation folds, operators held out together (default 0: leave one operator out)",
    )
    parser.add_argument(
        "--evaluate-on",
        metavar="URL|FILE",
        action="append",
        default=[],
        help="judge the policy on these databases' searches instead of cross-validation: another problem "
        "set (its operators are left out of training, so the two are disjoint)",
    )
    parser.add_argument(
        "--json", metavar="FILE|-", help="write the quality report as JSON to FILE, or stdout"
    )
    parser.set_defaults(run=run)


def train(
    urls: list[str], out: Path, folds: int = 0, evaluate_urls: list[str] | None = None
) -> dict[str, Any]:
    """Fit, cross-validate (or judge on `evaluate_urls`' disjoint operators) and write the policy; returns
    what `trained` in the file says."""
    from kernelbot.agents.learning import evaluate, evaluate_on, fit, single_rule_rows
    from kernelbot.agents.rules import load_rules
    from kernelbot.reports.training import training_rows

    rules = load_rules()
    rows = training_rows(urls)
    usable = single_rule_rows(rows, rules)
    if not usable:
        raise UsageError(
            f"no candidates of today's rules in {len(urls)} database(s) ({len(rows)} candidates in all): "
            "run `kernelbot optimize --agent search --db URL` or a review first"
        )
    held_out = single_rule_rows(training_rows(evaluate_urls), rules) if evaluate_urls else []
    if evaluate_urls and not held_out:
        raise UsageError(
            f"no candidates of today's rules in the {len(evaluate_urls)} --evaluate-on database(s)"
        )
    if held_out:  # the shipped policy never sees the operators it is judged on
        seen = {r.operator for r in held_out}
        usable = [r for r in usable if r.operator not in seen]
        if not usable:
            raise UsageError("every operator of --db is in --evaluate-on too: nothing is left to train on")
    policy = fit(usable, rules)
    policy.trained["databases"] = len(urls)  # not their URLs: a password must not end up in a shipped file
    quality = evaluate_on(usable, held_out, rules) if held_out else evaluate(usable, rules, folds=folds)
    policy.trained["quality"] = quality.summary()
    policy.trained["quality"]["held_out"] = "databases" if held_out else "folds"
    policy.save(out)
    return policy.trained


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def run(args: argparse.Namespace) -> int:
    if args.folds < 0 or args.folds == 1:
        raise UsageError("--folds must be 0 (leave one operator out) or at least 2")
    trained = train(args.db, args.out, args.folds, args.evaluate_on)
    q = trained["quality"]
    rows = [
        ["reward >= 2 first", _fmt(q["top1_learned"]), _fmt(q["top1_fixed"])],
        ["mean reciprocal rank of the best", _fmt(q["mrr_learned"]), _fmt(q["mrr_fixed"])],
        [
            f"reward >= 2 within {BUDGET} (operators)",
            _fmt(q[f"wins_within_{BUDGET}_learned"]),
            _fmt(q[f"wins_within_{BUDGET}_fixed"]),
        ],
    ]
    title = (
        f"{trained['rows']} candidates, {trained['operators']} operators, models: "
        f"{', '.join(trained['models']) or 'Beta counts only'}; {q['episodes']} searches replayed, "
        + (
            f"of {q['operators']} operators in --evaluate-on, none trained on"
            if q["held_out"] == "databases"
            else f"{q['folds']} folds by operator"
        )
    )
    console.err.print(console.table(title, ["held-out ranking", "learned", "fixed order"], rows))
    console.err.print(
        f"to the final best (median learned / fixed): evaluations {_fmt(q['median_evaluations_ratio'])}, "
        f"wall time {_fmt(q['median_wall_s_ratio'])} (the final best first would give "
        f"{_fmt(q['median_evaluations_ratio_best_possible'])} and {_fmt(q['median_wall_s_ratio_best_possible'])})"
    )
    console.err.print(
        f"wrote {args.out}; use it with `agent: {{policy: {args.out}}}` in .github/kernelbot.yml"
    )
    if args.json:
        console.write_json(trained, args.json)
    return 0
