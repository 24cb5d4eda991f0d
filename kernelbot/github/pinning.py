"""Where a job may post: the repository, pull request and head commit a trusted job pinned (--pr,
--head-sha) or the event itself names; a payload made by a job that ran PR code is checked against them."""

from __future__ import annotations

from collections.abc import Mapping

from kernelbot.errors import UsageError
from kernelbot.github.gate import Event
from kernelbot.github.payload import Payload


def pinned(
    pr: int | None, head_sha: str | None, env: Mapping[str, str]
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
    head = head_sha
    if pr is not None and pr_event is not None and pr != pr_event:
        raise UsageError(f"--pr {pr} is not this event's pull request (#{pr_event})")
    if head is not None and head_event is not None and head != head_event:
        raise UsageError(f"--head-sha {head[:12]} is not this event's head ({head_event[:12]})")
    comment = (event.get("comment") or {}).get("id")
    return repository, pr if pr is not None else pr_event, head or head_event, comment


def check_payload(payload: Payload, pr: int | None, head_sha: str | None, env: Mapping[str, str]) -> None:
    """The payload came from a job that ran PR code: it is data, and it may only post to the repository,
    PR and commit pinned by a trusted job. On every event type; a mismatch posts nothing."""
    repository, pr, head, comment = pinned(pr, head_sha, env)
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
