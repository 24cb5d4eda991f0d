"""`kernelbot publish`: post (or re-post) results to GitHub, from a stored run or a GPU job's payload file."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from kernelbot.action import Event, Payload, build_payload, client, publish, run_url, write_output
from kernelbot.errors import UsageError
from kernelbot.history import History


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("publish", help="post a stored run (or a payload file) to its pull request")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-id", type=int, help="a run in the history database")
    source.add_argument(
        "--payload", type=Path, help="payload.json written by `kernelbot action --no-publish`"
    )
    parser.add_argument("--db", metavar="URL", help="history database URL (with --run-id)")
    parser.add_argument("--pr", type=int, help="pull request number (default: the one stored with the run)")
    parser.add_argument("--fail-on-regression", action="store_true", help="a regression fails the check run")
    parser.set_defaults(run=run)


def _from_run(args: argparse.Namespace, env: Mapping[str, str]) -> Payload:
    from kernelbot.action import review_from_record

    history = History.open(args.db)
    try:
        record = history.get_run(args.run_id)
    finally:
        history.close()
    review, summary = review_from_record(args.run_id, record)
    payload, _ = build_payload(
        review,
        summary,
        pr=args.pr or record.pr_number,
        fail_on_regression=args.fail_on_regression,
        pointer=f"The full report is in the artifacts of {run_url(env) or 'the original workflow run'}.",
        read_head=lambda _path: None,  # re-posts carry no suggestions: the checkout is not at hand
    )
    return payload


def _check_against_event(payload: Payload, env: Mapping[str, str]) -> None:
    """The payload came from a job that ran PR code: it may only post to the PR and commit of this event."""
    if not env.get("GITHUB_EVENT_PATH"):
        return
    event = Event.from_env(env).payload
    pr = (event.get("pull_request") or event.get("issue") or {}).get("number")
    if pr is not None and payload.pr != pr:
        raise UsageError(f"the payload is for pull request #{payload.pr}, but this event is for #{pr}")
    head = ((event.get("pull_request") or {}).get("head") or {}).get("sha")
    if head is not None and payload.head_sha != head:
        raise UsageError(
            f"the payload is for commit {payload.head_sha[:12]}, but this event is for {head[:12]}"
        )
    comment = (event.get("comment") or {}).get("id")
    if payload.comment_id is not None and payload.comment_id != comment:
        raise UsageError("the payload reacts to a comment that did not start this workflow")


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if args.payload is not None:
        try:
            payload = Payload.from_json(json.loads(args.payload.read_text()))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {args.payload}: {type(exc).__name__}") from None
        _check_against_event(payload, env)
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
