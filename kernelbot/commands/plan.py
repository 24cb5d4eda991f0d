"""`kernelbot plan`: a pull request's changed operators split into N shards for a job matrix."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from kernelbot import console, gitrepo
from kernelbot.config import load_config
from kernelbot.errors import UsageError
from kernelbot.github.workflow import write_output
from kernelbot.pipeline.detect import detect
from kernelbot.pipeline.shards import make_plan, recorded_costs


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "plan", help="split the changed operators into shards for a job matrix (balanced by recorded cost)"
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: .)")
    parser.add_argument("--base", required=True, help="base revision (branch, tag or SHA)")
    parser.add_argument("--head", default="HEAD", help="head revision (default: HEAD)")
    parser.add_argument("--shards", type=int, required=True, help="at most this many shards (runners)")
    parser.add_argument("--db", metavar="URL|FILE", help="history database with past wall times")
    parser.add_argument(
        "--out", type=Path, default=Path("kernelbot-plan.json"), help="the plan file (default: %(default)s)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if args.shards < 1:
        raise UsageError("--shards must be at least 1")
    root = gitrepo.toplevel(args.repo)
    base, head = gitrepo.resolve(root, args.base), gitrepo.resolve(root, args.head)
    repository = env.get("GITHUB_REPOSITORY") or gitrepo.repository_name(root)
    changes = detect(root, base, head)
    url = args.db or load_config(root).database
    costs, problem = recorded_costs(url, repository, [c.name for c in changes]) if changes else ({}, None)
    if problem:
        console.err.print(f"[yellow]warning:[/yellow] {console.escape(problem)}")
    plan = make_plan(repository, base, head, changes, costs, args.shards)
    args.out.write_text(json.dumps(plan.to_json(), indent=2))
    matrix = json.dumps(plan.matrix(), separators=(",", ":"))
    write_output(env, {"matrix": matrix, "count": str(plan.count), "plan": str(args.out)})
    for k, ops in enumerate(plan.shards, 1):
        names = ", ".join(op.name for op in ops)
        console.err.print(
            f"shard {k}/{plan.count}: {sum(op.cost_s for op in ops):.0f} s, {console.escape(names)}",
            highlight=False,
        )
    print(matrix)
    return 0
