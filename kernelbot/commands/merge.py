"""`kernelbot merge DIR...`: a fleet's shard artifacts gathered into one review, written and published once."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from kernelbot import console, gitrepo
from kernelbot.errors import UsageError
from kernelbot.github.payload import build_payload, publish
from kernelbot.github.pinning import check_payload, pinned
from kernelbot.github.workflow import client, run_url, workflow_command, write_output, write_summary
from kernelbot.pipeline.shards import Plan, merge, read_artifacts, record_missing
from kernelbot.pipeline.store import store_review


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("merge", help="gather shard artifacts into one review and one comment")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="where the shard artifacts lie")
    parser.add_argument(
        "--plan", type=Path, help="the plan the shards ran (names a missing shard's operators)"
    )
    parser.add_argument("--out", type=Path, default=Path("kernelbot-out"), help="report, review and payload")
    parser.add_argument(
        "--db",
        metavar="URL|FILE",
        help="store the merged review, and a failed run for each missing shard, here",
    )
    parser.add_argument("--publish", action="store_true", help="post the comment and check run to GitHub")
    parser.add_argument("--pr", type=int, help="the pull request (default: the event's)")
    parser.add_argument("--head-sha", help="the head commit the trusted job pinned (the shards must match)")
    parser.add_argument(
        "--repo", type=Path, help="a checkout at head: suggestions on the diff need its files"
    )
    parser.add_argument("--fail-on-regression", action="store_true", help="a regression fails the check run")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if args.publish and args.plan is None:  # the artifacts come from runners that ran PR code: the plan,
        # made by the trusted job, says which shards and operators there are and which commits were reviewed
        raise UsageError("merge --publish needs --plan PLAN.json (the plan the trusted job made)")
    plan = None
    if args.plan is not None:
        try:
            plan = Plan.from_json(json.loads(args.plan.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read the plan {args.plan}: {type(exc).__name__}") from None
    merged = merge(read_artifacts(args.dirs), plan)
    review = merged.review
    review.repository = env.get("GITHUB_REPOSITORY") or review.repository
    pr = args.pr if args.pr is not None else pinned(args.pr, args.head_sha, env)[1]
    problems = []
    if args.db:  # stored before anything is posted: the merged review as one run (publish --run-id re-posts
        # it), and each missing shard as a failed run naming its operators
        _, problem = store_review(
            review,
            args.db,
            trigger="pull_request" if pr else "local",
            pr_number=pr,
            fallback_dir=Path(args.out),
        )
        problems += [problem] if problem else []
        problems += record_missing(merged, args.db, pr) if merged.missing else []
    for warning in review.warnings + problems:
        print(workflow_command("warning", warning) if env.get("GITHUB_ACTIONS") else f"warning: {warning}")
    repo = args.repo

    def read_head(path: str) -> str | None:
        if repo is None:
            return None
        return (gitrepo.read_file(repo, review.head, path) or b"").decode(errors="replace") or None

    payload, full = build_payload(
        review,
        pr=pr,
        fail_on_regression=args.fail_on_regression,
        pointer=f"The full report is in the `kernelbot-report` artifact of {run_url(env) or 'this workflow run'}.",
        read_head=read_head,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(full)
    (out / "review.json").write_text(json.dumps(review.to_json(), indent=2, default=str))
    (out / "payload.json").write_text(json.dumps(payload.to_json(), indent=2))
    write_summary(env, full)
    outputs = {"verdict-summary": review.summary(), "comment-url": "", "missing-shards": ""}
    outputs["missing-shards"] = " ".join(str(k) for k in sorted(merged.missing))
    if args.publish:
        check_payload(
            payload, args.pr, args.head_sha, env
        )  # the shards ran PR code: their results are data for this PR only
        if payload.pr is None:
            raise UsageError("publishing needs the pull request: pass --pr NUMBER")
        outputs["comment-url"] = publish(client(env), payload).get("comment", "")
    write_output(env, outputs)
    console.err.print(f"kernelbot merge: {console.escape(review.summary())}", highlight=False)
    if merged.missing:
        return 1  # published with the missing shards named; the job still fails so that it is re-run
    return 1 if payload.check_conclusion == "failure" else 0
