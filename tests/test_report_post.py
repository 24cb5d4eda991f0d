"""`kernelbot report weekly --post`: one issue per week on the GitHub imitation, edited on later runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelbot import cli
from kernelbot.history import History
from tests.servers.github import GitHubImitation
from tests.test_report import fill

MARKER = "<!-- kernelbot:weekly-report 2025-W14 -->"


@pytest.fixture
def post(tmp_path: Path, github_api: GitHubImitation, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CLI arguments of a posting run on a filled SQLite database, with the environment set for it."""
    url = f"sqlite:///{tmp_path / 'history.db'}"
    store = History.open(url, auto_upgrade=True)
    fill(store)
    store.close()
    monkeypatch.setenv("GITHUB_REPOSITORY", github_api.repository)
    monkeypatch.setenv("GITHUB_TOKEN", github_api.token)
    monkeypatch.setenv("GITHUB_API_URL", github_api.base_url)
    monkeypatch.setattr(time, "sleep", lambda _s: None)  # PyGithub's write spacing and kernelbot's backoff
    args = ["report", "weekly", "--db", url, "--since", "2025-03-31", "--weeks", "6"]
    return [*args, "--out", str(tmp_path / "out"), "--post"]


def weekly_issues(github_api: GitHubImitation) -> list[int]:
    return [n for n, i in github_api.issues.items() if MARKER in i["body"]]


def test_post_creates_the_weeks_issue_then_edits_it(
    post: list[str], github_api: GitHubImitation, capsys: pytest.CaptureFixture[str]
) -> None:
    github_api.add_issue("someone's issue quoting the marker", f"see {MARKER}", "contributor")
    assert cli.main(post) == 0
    [number] = [n for n in weekly_issues(github_api) if github_api.issues[n]["user"] == github_api.bot]
    issue = github_api.issues[number]
    assert issue["title"].startswith("kernelbot weekly report 2025-W14") and issue["body"].startswith(MARKER)
    assert f"posted: {github_api.base_url}/{github_api.repository}/issues/{number}" in capsys.readouterr().out

    # A week later the issue is far down the list (page 2) and closed; the next run still edits it.
    for i in range(120):
        github_api.add_issue(f"unrelated {i}", "", "contributor")
    issue.update(state="closed", title="renamed by hand", body=f"{MARKER}\nstale")
    assert cli.main([*post, "--artifact-url", "https://example.invalid/run/2"]) == 0
    assert [n for n in weekly_issues(github_api) if github_api.issues[n]["user"] == github_api.bot] == [
        number
    ]
    assert issue["title"].startswith("kernelbot weekly report 2025-W14")
    assert "https://example.invalid/run/2" in issue["body"] and "stale" not in issue["body"]
    assert github_api.requests("GET", r"/issues$") and len(github_api.requests("POST", r"/issues$")) == 1
    assert len(github_api.requests("PATCH", r"/issues/\d+$")) == 1


@pytest.mark.parametrize("after_apply", [False, True], ids=["lost-request", "lost-response"])
def test_a_retried_post_never_duplicates_the_issue(
    post: list[str], github_api: GitHubImitation, after_apply: bool
) -> None:
    github_api.fail("POST", r"/issues$", 500, after_apply=after_apply)
    assert cli.main(post) == 0
    assert len(weekly_issues(github_api)) == 1 and len(github_api.issues) == 1
    assert [s for _, _, s in github_api.requests("POST", r"/issues$")] == [500] + (
        [] if after_apply else [201]
    )
