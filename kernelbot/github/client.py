"""The GitHub adapter: the only module that imports PyGithub (comments, issues, reviews, check runs, reactions, permissions)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote

import requests
from github import Auth, Github, GithubException, GithubRetry

from kernelbot.github.types import (
    Annotation,
    CheckRun,
    GitHubError,
    PullInfo,
    Suggestion,
    hunk_lines,
    parse_time,
    suggestion_body,
)

# NOTE: nothing outside this module imports `github` (PyGithub; lint-imports checks it); the pipeline
# hands it plain dataclasses and strings.

COMMENT_LIMIT = 65_536  # characters in an issue comment, review body or review comment
CHECK_TEXT_LIMIT = 65_535  # check-run output summary and text, each
ANNOTATIONS_PER_REQUEST = 50
ACTIONS_BOT = "github-actions[bot]"  # the login behind the workflow's GITHUB_TOKEN
# Ranks of the permission endpoint's role names; "maintain" and "triage" only appear in role_name.
PERMISSION_RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}
T = TypeVar("T")


def _reason(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or exc.data or "")[:200]
    return " ".join(message.split()) or "no message"


class GitHub:
    """One repository on one GitHub (or GitHub Enterprise) API, with kernelbot's retry policy."""

    def __init__(
        self,
        repository: str,
        token: str,
        api_url: str = "https://api.github.com",
        *,
        bot_login: str | None = None,
        seconds_between_writes: float = 1.0,
        seconds_between_requests: float = 0.25,
        timeout: int = 30,
        retries: int = 5,
        backoff: float = 2.0,
        max_wait_s: float = 300.0,
        per_page: int = 100,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        # Retry policy, chosen on purpose:
        # - GithubRetry retries 5xx and rate-limited 403/429 with exponential backoff and sleeps for
        #   `Retry-After` when GitHub sends it; waits longer than max_wait_s fail instead of stalling a job.
        # - POST is taken OUT of the retried methods: a POST that got a 500 or a timeout may still have
        #   created the comment, so `_post` looks for what it made before posting again.
        # - seconds_between_writes stays at GitHub's advice of one second between mutating requests
        #   (secondary rate limits); a run makes only a handful of writes, so it costs seconds.
        retry = GithubRetry(
            total=retries,
            backoff_factor=backoff,
            status_forcelist=[*range(500, 600), 429],
            allowed_methods={"GET", "HEAD", "PATCH", "PUT", "DELETE", "OPTIONS"},
            max_rate_limit_wait=max_wait_s,
            secondary_rate_wait=min(60.0, max_wait_s),
        )
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=api_url.rstrip("/"),
            timeout=timeout,
            retry=retry,
            per_page=per_page,
            seconds_between_requests=seconds_between_requests,
            seconds_between_writes=seconds_between_writes,
            lazy=True,  # objects are built from URLs without a GET each (fewer requests, fewer rate-limit hits)
        )
        self.repository = repository
        self._repo = self._gh.get_repo(repository)
        self._api_root = api_url.rstrip("/")
        self._api = f"{self._api_root}/repos/{repository}"
        self._bot_login = bot_login
        self._attempts = retries + 1
        self._backoff = backoff
        self._sleep = sleep

    # -- plumbing --------------------------------------------------------------------------------

    def _call(self, what: str, work: Callable[[], T]) -> T:
        try:
            return work()
        except GithubException as exc:
            raise GitHubError(f"GitHub {what}: {exc.status} {_reason(exc)}", exc.status) from None
        except requests.RequestException as exc:
            raise GitHubError(f"GitHub {what}: network error ({type(exc).__name__})") from None

    def _json(self, verb: str, url: str, what: str, **kw: Any) -> Any:
        return self._call(what, lambda: self._gh.requester.requestJsonAndCheck(verb, url, **kw)[1])

    def _post(self, what: str, create: Callable[[], T], lookup: Callable[[], T | None]) -> T:
        """POST once per attempt; after a 5xx or a timeout, look for the result before posting again."""
        for attempt in range(self._attempts):
            try:
                return create()
            except GithubException as exc:
                headers = exc.headers or {}
                retry_after = headers.get("Retry-After") or headers.get("retry-after")
                if exc.status in (403, 429) and retry_after is not None:
                    # Rate limited: GitHub did not act on the request, so posting again is safe.
                    self._sleep(float(retry_after))
                    continue
                if exc.status < 500:
                    raise GitHubError(f"GitHub {what}: {exc.status} {_reason(exc)}", exc.status) from None
            except requests.RequestException:
                pass
            self._sleep(self._backoff * 2**attempt)
            found = self._call(f"{what} (looking for an earlier attempt)", lookup)
            if found is not None:
                return found
        raise GitHubError(f"GitHub {what}: still failing after {self._attempts} attempts; replay it later")

    @property
    def bot_login(self) -> str:
        if self._bot_login is None:
            try:
                self._bot_login = self._gh.get_user().login
            except GithubException:
                # The workflow's GITHUB_TOKEN may not read /user; its comments are github-actions[bot]'s.
                self._bot_login = ACTIONS_BOT
        return self._bot_login

    # -- reads -----------------------------------------------------------------------------------

    def pull(self, number: int) -> PullInfo:
        pr = self._call(f"GET pull request #{number}", lambda: self._repo.get_pull(number))
        return PullInfo(
            number,
            pr.head.sha,
            pr.base.sha,
            pr.head.repo.full_name if pr.head.repo else "",
            pr.base.repo.full_name,
            tuple(label.name for label in pr.labels),
            pr.user.login,
            pr.head.ref or "",
        )

    def head_pushed_at(self, pull: PullInfo) -> datetime | None:
        """When GitHub recorded the push that made `pull.head_sha` the head branch's tip (server time).

        From the head repository's activity list (a fork's own, for a fork PR). None when GitHub has no
        such record or will not show it (a private fork, an API without /activity): the caller decides.
        """
        if not pull.head_repo or not pull.head_ref:
            return None
        url = f"{self._api_root}/repos/{pull.head_repo}/activity"
        what = f"activity of {pull.head_repo}"
        try:
            data = self._json(
                "GET", url, what, parameters={"ref": f"refs/heads/{pull.head_ref}", "per_page": 100}
            )
        except GitHubError as exc:
            if exc.status in (403, 404, 410, 422):
                return None
            raise
        entries = data if isinstance(data, list) else []
        known = [
            t
            for t in (
                parse_time(e.get("timestamp"))
                for e in entries
                if isinstance(e, dict) and e.get("after") == pull.head_sha
            )
            if t is not None
        ]
        return max(known) if known else None  # the latest: a force push back to an old SHA counts then

    def permission(self, login: str) -> str:
        """The user's role on the repository (none/read/triage/write/maintain/admin), from the REST endpoint."""
        data = self._json("GET", f"{self._api}/collaborators/{login}/permission", f"permission of {login}")
        role = str(data.get("role_name") or data.get("permission") or "none")
        return role if role in PERMISSION_RANK else str(data.get("permission") or "none")

    def diff_hunks(self, number: int) -> dict[str, list[tuple[int, int]]]:
        """Head-side line ranges of each changed file's hunks (where review comments may go)."""

        def work() -> dict[str, list[tuple[int, int]]]:
            pr = self._repo.get_pull(number)
            return {f.filename: hunk_lines(f.patch) for f in pr.get_files()}

        return self._call(f"GET files of #{number}", work)

    def _find_comment(self, number: int, marker: str) -> Any:
        login = self.bot_login
        for comment in self._repo.get_issue(number).get_comments():
            # The body's first line, not anywhere in it: a marker carried by data inside another of the bot's
            # comments (a PR's file name, attacker round 56) made the sticky comment a command's reply.
            if (comment.body or "").startswith(marker) and comment.user.login == login:
                return comment
        return None

    def _find_issue(self, marker: str) -> Any:
        login = self.bot_login
        # Open and closed; pull requests are listed too, and the marker tells them apart.
        for issue in self._repo.get_issues(state="all"):
            if (issue.body or "").startswith(marker) and issue.user.login == login:
                return issue
        return None

    # -- writes ----------------------------------------------------------------------------------

    def upsert_issue(self, title: str, body: str, marker: str) -> str:
        """Edit the bot's issue (open or closed) that carries `marker`, or create it; returns its URL."""
        if not body.startswith(marker):
            raise ValueError("the issue body must start with its marker")
        if len(body) > COMMENT_LIMIT:
            raise GitHubError(f"issue body is {len(body)} characters; GitHub takes at most {COMMENT_LIMIT}")
        existing = self._call("list issues", lambda: self._find_issue(marker))
        if existing is not None:
            self._call(f"PATCH issue #{existing.number}", lambda: existing.edit(title=title, body=body))
            return str(existing.html_url)

        def lookup() -> Any:
            found = self._find_issue(marker)
            if found is not None and (found.title, found.body) != (title, body):
                found.edit(title=title, body=body)
            return found

        issue = self._post("POST issue", lambda: self._repo.create_issue(title=title, body=body), lookup)
        return str(issue.html_url)

    def upsert_comment(self, number: int, body: str, marker: str) -> str:
        """Edit the bot's comment that carries `marker`, or create it; returns its URL. Never duplicates."""
        if not body.startswith(marker):
            raise ValueError("the comment body must start with its marker")
        if len(body) > COMMENT_LIMIT:
            raise GitHubError(f"comment body is {len(body)} characters; GitHub takes at most {COMMENT_LIMIT}")
        existing = self._call(f"list comments of #{number}", lambda: self._find_comment(number, marker))
        if existing is not None:
            self._call(f"PATCH comment {existing.id}", lambda: existing.edit(body))
            return str(existing.html_url)
        issue = self._repo.get_issue(number)

        def lookup() -> Any:
            found = self._find_comment(number, marker)
            if found is not None and found.body != body:
                found.edit(body)
            return found

        comment = self._post(f"POST comment on #{number}", lambda: issue.create_comment(body), lookup)
        return str(comment.html_url)

    def remove_label(self, number: int, name: str) -> None:
        """Take a label off an issue or pull request; a label that is not there is fine."""
        url = f"{self._api}/issues/{number}/labels/{quote(name, safe='')}"
        try:
            self._json("DELETE", url, f"DELETE label {name!r} of #{number}")
        except GitHubError as exc:
            if exc.status != 404:
                raise

    def react(self, comment_id: int, content: str) -> None:
        """Add a reaction (eyes, rocket, confused, ...) to an issue comment; GitHub keeps one per user."""
        url = f"{self._api}/issues/comments/{comment_id}/reactions"
        self._post(
            f"POST reaction {content}",
            lambda: self._gh.requester.requestJsonAndCheck("POST", url, input={"content": content}),
            lambda: None,  # adding the same reaction twice is harmless
        )

    def create_review(
        self, number: int, commit_sha: str, body: str, suggestions: Iterable[Suggestion]
    ) -> tuple[str | None, list[Suggestion]]:
        """A COMMENT review with suggestion blocks on lines inside the diff hunks.

        Returns (review URL or None when nothing fits, the suggestions left out because their lines
        are outside every hunk: GitHub would reject the whole review with 422 for any one of them).
        """
        hunks = self.diff_hunks(number)
        placed: list[Suggestion] = []
        dropped: list[Suggestion] = []
        for s in suggestions:
            fits = any(lo <= s.start_line and s.end_line <= hi for lo, hi in hunks.get(s.path, []))
            (placed if fits else dropped).append(s)
        if not placed:
            return None, dropped
        comments: list[dict[str, Any]] = []
        for s in placed:
            comment: dict[str, Any] = {"path": s.path, "line": s.end_line, "side": "RIGHT"}
            if s.start_line != s.end_line:
                comment.update(start_line=s.start_line, start_side="RIGHT")
            comments.append({**comment, "body": suggestion_body(s)})
        url = f"{self._api}/pulls/{number}/reviews"
        payload = {"commit_id": commit_sha, "body": body, "event": "COMMENT", "comments": comments}

        def lookup() -> Any:
            reviews = self._repo.get_pull(number).get_reviews()
            login = self.bot_login
            for r in reviews:
                if r.commit_id == commit_sha and r.user.login == login and (r.body or "") == body:
                    return {"html_url": r.html_url}
            return None

        data = self._post(
            f"POST review on #{number}",
            lambda: self._gh.requester.requestJsonAndCheck("POST", url, input=payload)[1],
            lookup,
        )
        return str(data["html_url"]), dropped

    def create_check_run(self, check: CheckRun) -> str:
        """A completed check run; annotations go 50 per request as GitHub requires. Returns its URL."""

        def output(batch: list[Annotation]) -> dict[str, Any]:
            return {
                "title": check.title[:255],
                "summary": check.summary[:CHECK_TEXT_LIMIT],
                "text": check.text[:CHECK_TEXT_LIMIT],
                "annotations": [
                    {
                        "path": a.path,
                        "start_line": a.start_line,
                        "end_line": a.end_line,
                        "annotation_level": a.level,
                        "message": a.message[:CHECK_TEXT_LIMIT],
                        **({"title": a.title[:255]} if a.title else {}),
                    }
                    for a in batch
                ],
            }

        batches = [
            check.annotations[i : i + ANNOTATIONS_PER_REQUEST]
            for i in range(0, len(check.annotations), ANNOTATIONS_PER_REQUEST)
        ] or [[]]
        payload = {
            "name": check.name,
            "head_sha": check.head_sha,
            "status": "completed",
            "conclusion": check.conclusion,
            "external_id": check.external_id,
            "output": output(batches[0]),
        }

        def lookup() -> Any:
            data = self._gh.requester.requestJsonAndCheck(
                "GET",
                f"{self._api}/commits/{check.head_sha}/check-runs",
                parameters={"check_name": check.name},
            )[1]
            runs = [r for r in data.get("check_runs", []) if r.get("external_id") == check.external_id]
            return runs[0] if runs else None

        created = self._post(
            f"POST check run {check.name!r}",
            lambda: self._gh.requester.requestJsonAndCheck("POST", f"{self._api}/check-runs", input=payload)[
                1
            ],
            lookup,
        )
        for batch in batches[1:]:
            self._json(
                "PATCH",
                f"{self._api}/check-runs/{created['id']}",
                "PATCH check run",
                input={"output": output(batch)},
            )
        return str(created["html_url"])
