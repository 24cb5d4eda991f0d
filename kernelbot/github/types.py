"""What the GitHub client takes and gives: plain data (suggestions, annotations, check runs, a pull
request's state) and the diff arithmetic of where a suggestion may go."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from kernelbot.errors import KernelbotError
from kernelbot.render import fence

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


class GitHubError(KernelbotError):
    """GitHub refused or failed a request (names the request and GitHub's one-line reason, never the token)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # HTTP status, None for a network failure


@dataclass(frozen=True)
class Suggestion:
    """A ```suggestion block replacing lines of one file at the PR's head."""

    path: str  # file, relative to the repository root
    start_line: int  # first replaced line (1-based, head side)
    end_line: int  # last replaced line (inclusive)
    replacement: str  # the new text of those lines (no trailing newline needed)
    note: str  # Markdown shown above the block


@dataclass(frozen=True)
class Annotation:
    """A check-run annotation on an operator file."""

    path: str
    start_line: int
    end_line: int
    level: str  # "failure" / "warning" / "notice"
    message: str
    title: str = ""


@dataclass
class CheckRun:
    """What a finished check run reports."""

    name: str  # the check's name on the PR
    head_sha: str  # the commit it belongs to
    conclusion: str  # "success" / "failure" / "neutral"
    title: str
    summary: str  # Markdown, cut to CHECK_TEXT_LIMIT
    text: str = ""  # Markdown details, cut to CHECK_TEXT_LIMIT
    external_id: str = ""  # kernelbot's run id, so a retried POST can find the run it already made
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(frozen=True)
class PullInfo:
    """The parts of a pull request the gate and the pipeline need."""

    number: int
    head_sha: str
    base_sha: str
    head_repo: str  # "owner/name" the head branch lives in ("" when the fork was deleted)
    base_repo: str
    labels: tuple[str, ...]
    author: str
    head_ref: str = ""  # the head branch's name (in head_repo)

    @property
    def is_fork(self) -> bool:
        return self.head_repo != self.base_repo


def parse_time(value: object) -> datetime | None:
    """GitHub's ISO 8601 timestamps ("2024-05-01T12:00:00Z"), aware; None when missing or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def hunk_lines(patch: str | None) -> list[tuple[int, int]]:
    """Head-side line ranges (inclusive) covered by each hunk of a unified diff patch."""
    ranges = []
    for line in (patch or "").splitlines():
        match = _HUNK.match(line)
        if match:
            start, count = int(match.group(1)), int(match.group(2) or 1)
            if count:
                ranges.append((start, start + count - 1))
    return ranges


def suggestion_body(s: Suggestion) -> str:
    f = fence(s.replacement)  # longer than any backtick run inside the replacement: the block stays intact
    return f"{s.note}\n\n{f}suggestion\n{s.replacement.rstrip(chr(10))}\n{f}\n"
