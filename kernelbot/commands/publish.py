"""`kernelbot publish`: post (or re-post) results to GitHub, from a stored run or a GPU job's payload file."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from kernelbot.errors import UsageError
from kernelbot.github.gate import Event
from kernelbot.github.payload import Payload, build_payload, publish
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


def _pinned(
    args: argparse.Namespace, env: Mapping[str, str]
) -> tuple[str, int | None, str | None, int | None]:
    """(repository, PR, head SHA, comment id) this job may post for: the workflow's own repository, and the
    PR and head that the trusted job pinned (--pr, --head-sha) or that the event itself names.

    A pinned value and the event's must agree; an event that names no head (issue_comment,
    workflow_dispatch, ...) needs --head-sha from the job that accepted the trigger.
    """
    repository = env.get("GITHUB_REPOSITORY") or ""
    event = Event.from_env(env).payload if env.get("GITHUB_EVENT_PATH") else {}
    named = (event.get("repository") or {}).get("full_name")
    if named and repository and named != repository:
        raise UsageError(f"the event is for {named}, but this workflow runs in {repository}")
    pr_event = (event.get("pull_request") or event.get("issue") or {}).get("number")
    head_event = ((event.get("pull_request") or {}).get("head") or {}).get("sha")
    pr, head = args.pr, args.head_sha
    if pr is not None and pr_event is not None and pr != pr_event:
        raise UsageError(f"--pr {pr} is not this event's pull request (#{pr_event})")
    if head is not None and head_event is not None and head != head_event:
        raise UsageError(f"--head-sha {head[:12]} is not this event's head ({head_event[:12]})")
    comment = (event.get("comment") or {}).get("id")
    return repository, pr if pr is not None else pr_event, head or head_event, comment


def check_payload(payload: Payload, args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """The payload came from a job that ran PR code: it is data, and it may only post to the repository,
    PR and commit pinned by a trusted job. On every event type; a mismatch posts nothing."""
    repository, pr, head, comment = _pinned(args, env)
    in_actions = bool(env.get("GITHUB_EVENT_PATH"))
    if in_actions and (pr is None or head is None):
        raise UsageError(
            "refused: nothing pins the pull request and head this payload may post to; "
            "pass --pr and --head-sha from the job that accepted the trigger"
        )
    if repository and payload.repository != repository:
        raise UsageError(
            f"refused: the payload is for {payload.repository[:100]!r}, but this is {repository}"
        )
    if pr is not None and payload.pr != pr:
        raise UsageError(f"refused: the payload is for pull request #{payload.pr}, but #{pr} was pinned")
    if head is not None and payload.head_sha != head:
        raise UsageError(
            f"refused: the payload is for commit {str(payload.head_sha)[:12]}, but {head[:12]} was pinned"
        )
    if payload.comment_id is not None and payload.comment_id != comment:
        raise UsageError("refused: the payload reacts to a comment that did not start this workflow")


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if args.payload is not None:
        try:
            payload = Payload.from_json(json.loads(args.payload.read_text()))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {args.payload}: {type(exc).__name__}") from None
        check_payload(payload, args, env)
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
