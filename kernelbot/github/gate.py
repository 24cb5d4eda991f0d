"""A GitHub event and its gate: which events run, for which head, on whose say-so; the slash command."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelbot.config import Config
from kernelbot.errors import KernelbotError, UsageError
from kernelbot.github.client import PERMISSION_RANK, GitHub
from kernelbot.github.types import PullInfo, parse_time
from kernelbot.render import code

# NOTE: nothing a commenter writes reaches a shell or git's option parser: the comment is split with
# shlex in Python, operator names are only compared with detected names, and SHAs come from GitHub.

COMMAND = "/kernelbot"
REACTIONS = {"accepted": "eyes", "done": "rocket", "refused": "confused"}


class CommandError(KernelbotError):
    """A `/kernelbot` comment that cannot be run as written (answered with 😕 and a reply)."""


@dataclass(frozen=True)
class Command:
    """A parsed `/kernelbot optimize [OPERATOR…] [--budget N] [--agent search|llm]`."""

    operators: tuple[str, ...]  # empty: every changed operator
    budget: int | None
    agent: str  # "search" or "llm"


def parse_command(body: str) -> Command | None:
    """None when the comment is not addressed to kernelbot; CommandError when it is, but malformed."""
    first = (body or "").strip().splitlines()[0] if (body or "").strip() else ""
    if not (first == COMMAND or first.startswith(COMMAND + " ")):
        return None
    try:
        words = shlex.split(first)[1:]
    except ValueError as exc:
        raise CommandError(f"cannot read the command: {exc}") from None
    if not words or words[0] != "optimize":
        raise CommandError(
            "unknown command; use `/kernelbot optimize [OPERATOR…] [--budget N] [--agent search|llm]`"
        )
    operators: list[str] = []
    budget, agent = None, "search"
    it = iter(words[1:])
    for word in it:
        if word in ("--budget", "--agent"):
            value = next(it, None)
            if value is None:
                raise CommandError(f"{word} needs a value")
            if word == "--budget":
                if not value.isdigit() or not 1 <= int(value) <= 64:
                    raise CommandError("--budget takes a whole number from 1 to 64")
                budget = int(value)
            elif value not in ("search", "llm"):
                raise CommandError("--agent takes `search` or `llm`")
            else:
                agent = value
        elif word.startswith("-"):
            raise CommandError(
                f"unknown option {code(word[:40])}; options are --budget N and --agent search|llm"
            )
        elif len(word) > 200 or not all(c.isalnum() or c in "/_.-:" for c in word):
            raise CommandError(f"{code(word[:40])} is not an operator name")  # escaped: it is echoed
        else:
            operators.append(word)
    return Command(tuple(operators), budget, agent)


@dataclass(frozen=True)
class Event:
    name: str  # GITHUB_EVENT_NAME
    payload: dict[str, Any]  # the JSON at GITHUB_EVENT_PATH

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Event:
        name, path = env.get("GITHUB_EVENT_NAME"), env.get("GITHUB_EVENT_PATH")
        if not name or not path:
            raise UsageError(
                "GITHUB_EVENT_NAME and GITHUB_EVENT_PATH must be set (run inside GitHub Actions)"
            )
        try:
            payload = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the event payload {path}: {type(exc).__name__}") from None
        return cls(name, payload)


@dataclass
class Decision:
    """What the gate decided for one event."""

    run: bool  # measure or not
    reason: str  # one line: why (shown in the log and the step summary)
    kind: str = "review"  # "review" / "optimize" / "weekly"
    pr: int | None = None
    base_sha: str | None = None
    head_sha: str | None = None  # the one head this approval covers, pinned when the trigger was accepted
    command: Command | None = None
    comment_id: int | None = None  # the slash command's comment
    refused: bool = False  # a slash command that was refused (😕 and a reply)
    stale_label: str | None = None  # a fork PR's run label that approved an earlier head (taken off)
    approved_by: str = ""  # "label" / "command" / "same repository"
    said_at: str = ""  # the slash command's comment time (GitHub's, from the event)


def _is_fork(pr: Mapping[str, Any]) -> bool:
    head_repo = (pr.get("head") or {}).get("repo") or {}
    base_repo = (pr.get("base") or {}).get("repo") or {}
    return head_repo.get("full_name") != base_repo.get("full_name")


def _pull_request_gate(p: Mapping[str, Any], config: Config) -> Decision:
    """Same-repository PRs run on every push; a fork PR runs once per approval, for the head it was given on.

    A maintainer's `kernelbot:run` label approves the head of the `labeled` event (the payload's
    pull_request.head.sha, GitHub's snapshot when the label was added) and nothing after it: on a later
    `synchronize` (or `reopened`) the label still sits on the PR, but it no longer approves anything.
    """
    pr = p.get("pull_request") or {}
    action = p.get("action")
    label = config.triggers.fork_label
    if action not in ("opened", "synchronize", "reopened", "labeled"):
        return Decision(False, f"pull_request {action}: nothing to do")
    if action == "labeled" and (p.get("label") or {}).get("name") != label:
        return Decision(False, "a label other than the run label was added")
    number, base, head = pr.get("number"), pr["base"]["sha"], pr["head"]["sha"]
    if not _is_fork(pr):
        return Decision(True, "pull request", "review", number, base, head, approved_by="same repository")
    if action == "labeled":
        who = (p.get("sender") or {}).get("login", "a maintainer")
        return Decision(
            True,
            f"pull request from a fork: @{who}'s `{label}` label approves head {head[:12]} (only that commit)",
            "review", number, base, head, approved_by="label",
        )  # fmt: skip
    labels = {lab.get("name") for lab in pr.get("labels") or []}
    if label in labels:
        return Decision(
            False,
            f"pull request from a fork: head {head[:12]} was pushed after the `{label}` label approved an "
            f"earlier head; a maintainer must look at the new commits and add the label again",
            "review", number, base, head, stale_label=label,
        )  # fmt: skip
    return Decision(
        False, f"pull request from a fork: waiting for a maintainer's `{label}` label or command", pr=number
    )


def gate(
    event: Event, config: Config, gh: GitHub | None, *, pin: str | None = None, accepted: bool = False
) -> Decision:
    """Who may run what (github.md): same-repository PRs, labelled forks, and writers' commands.

    `pin`: for a slash command, the head read at the very start of the accept job; `accepted`: an earlier
    accept job already took the command and pinned `pin` (the measure job), so it is used as it is.
    """
    p = event.payload
    if event.name == "pull_request":
        decision = _pull_request_gate(p, config)
        if decision.run and pin and pin != decision.head_sha:
            raise UsageError(f"--head-sha {pin[:12]} is not the head of this event ({decision.head_sha})")
        return decision
    if event.name == "issue_comment":
        issue, comment = p.get("issue") or {}, p.get("comment") or {}
        if p.get("action") != "created" or not issue.get("pull_request"):
            return Decision(False, "not a new comment on a pull request")
        try:
            command = parse_command(comment.get("body") or "")
        except CommandError as exc:
            return Decision(
                False, str(exc), "optimize", issue.get("number"), comment_id=comment.get("id"), refused=True
            )
        if command is None:
            return Decision(False, "the comment is not a /kernelbot command")
        if gh is None:
            raise UsageError("a slash command needs a GitHub token to check the commenter's permission")
        login = (comment.get("user") or {}).get("login", "")
        role = gh.permission(login)
        needed = config.triggers.min_permission
        decision = Decision(
            False, "", "optimize", issue["number"], command=command, comment_id=comment.get("id")
        )
        decision.said_at = str(comment.get("created_at") or "")
        if PERMISSION_RANK.get(role, 0) < PERMISSION_RANK[needed]:
            decision.reason = f"@{login} has {role} permission; `/kernelbot` needs {needed} or above"
            decision.refused = True
            return decision
        pull = gh.pull(issue["number"])
        decision.base_sha, decision.head_sha = pull.base_sha, pin or pull.head_sha
        if not accepted:
            problem = _pushed_after_the_command(gh, pull, pin, decision.said_at)
            if problem:
                decision.reason, decision.refused = problem, True
                return decision
        decision.run, decision.approved_by = True, "command"
        decision.reason = f"/kernelbot optimize from @{login} ({role}) approves head {decision.head_sha[:12]}"
        return decision
    if event.name in ("schedule", "workflow_dispatch"):
        return Decision(False, "the weekly report is not part of this version", "weekly")
    return Decision(False, f"event {event.name} is not handled")


def _pushed_after_the_command(gh: GitHub, pull: PullInfo, pin: str | None, said_at: str) -> str | None:
    """Why the head cannot be the one the commenter saw, or None. A command approves the head as it was
    when the comment was written: a push after the comment (before or during the accept job) is refused."""
    if pin and pin != pull.head_sha:
        return (
            f"new commits were pushed after the command (the head moved from {pin[:12]} to "
            f"{pull.head_sha[:12]} while it was being accepted); look at them and comment again"
        )
    said = parse_time(said_at)
    pushed = gh.head_pushed_at(pull)
    if pushed is not None and said is not None and pushed >= said:
        return (
            f"head {pull.head_sha[:12]} was pushed at {pushed:%Y-%m-%d %H:%M:%S} UTC, after the command "
            f"({said:%H:%M:%S} UTC); look at the new commits and comment again"
        )
    if pull.is_fork and (pushed is None or said is None):
        return (
            f"cannot tell when the fork's head {pull.head_sha[:12]} was pushed (GitHub shows no push of it "
            f"in {pull.head_repo}'s activity); a fork's head runs only when it predates the command"
        )
    return None
