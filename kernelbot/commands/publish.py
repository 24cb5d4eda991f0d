"""`kernelbot publish`: post (or re-post) results to GitHub, from a stored run or a GPU job's payload file."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from kernelbot.errors import UsageError
from kernelbot.github.payload import Payload, build_payload, publish
from kernelbot.github.pinning import check_payload
from kernelbot.github.workflow import client, run_url, write_output
from kernelbot.history import History
from kernelbot.pipeline.results import ReviewResult


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("publish", help="post a stored run (or a payload file) to its pull request")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-id", type=int, help="a run in the history database")
    source.add_argument(
        "--payload", type=Path, help="payload.json written by `kernelbot action --no-publish`"
    )
    parser.add_argument("--db", metavar="URL|FILE", help="history database URL (with --run-id)")
    parser.add_argument(
        "--pr",
        type=int,
        help="pull request number (with --run-id: default the stored one; with --payload: the pinned one)",
    )
    parser.add_argument(
        "--head-sha", help="with --payload: the head commit the trusted job pinned (the payload must match)"
    )
    parser.add_argument("--fail-on-regression", action="store_true", help="a regression fails the check run")
    parser.set_defaults(run=run)


def _from_run(args: argparse.Namespace, env: Mapping[str, str]) -> Payload:
    from kernelbot.github.payload import review_from_record

    history = History.open(args.db, read_only=True)
    try:
        record = history.get_run(args.run_id)
    finally:
        history.close()
    if record.report is not None:  # the result as the run wrote it: the same comment as the original
        review = ReviewResult.from_json(record.report)
        review.run_id = args.run_id
    else:  # a run stored before reports were kept (schema 0002): rebuilt from its rows
        review = review_from_record(args.run_id, record)
    payload, _ = build_payload(
        review,
        pr=args.pr or record.pr_number,
        fail_on_regression=args.fail_on_regression,
        pointer=f"The full report is in the artifacts of {run_url(env) or 'the original workflow run'}.",
        read_head=lambda _path: None,  # re-posts carry no suggestions: the checkout is not at hand
    )
    return payload


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if args.payload is not None:
        try:
            payload = Payload.from_json(json.loads(args.payload.read_text()))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {args.payload}: {type(exc).__name__}") from None
        check_payload(payload, args.pr, args.head_sha, env)
    else:
        payload = _from_run(args, env)
    if payload.pr is None:
        raise UsageError("the run has no pull request; pass --pr NUMBER")
    urls = publish(client(env), payload)
    write_output(
        env,
        {
            "run-id": str(payload.run_id or ""),
            "verdict-summary": payload.summary,
            "comment-url": urls.get("comment", ""),
        },
    )
    print(urls.get("comment", ""))
    return 0
