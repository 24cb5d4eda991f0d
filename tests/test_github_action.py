"""`kernelbot action` and `kernelbot publish` end to end: real PyGithub against the GitHub imitation."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main
from kernelbot.commands import action as action_cmd
from kernelbot.commands import publish as publish_cmd
from kernelbot.github import gate, workflow
from kernelbot.github import payload as payload_mod
from kernelbot.github.client import COMMENT_LIMIT, GitHub
from kernelbot.github.gate import CommandError, parse_command
from kernelbot.github.payload import Payload, build_payload, suggestion_for, truncate
from kernelbot.github.types import CheckRun, GitHubError, Suggestion, hunk_lines
from kernelbot.pipeline.results import OperatorResult, ReviewResult, Suggested
from kernelbot.render import STICKY_MARKER
from tests.gitrepo_builder import GitRepoBuilder
from tests.ops import matmul_op
from tests.servers.github import GitHubImitation, Pull

CONFIG = """\
harness:
  time_budget_s: 0.3
  max_samples: 20
  timeout_s: 120
thresholds:
  regression: 0.25   # CPU timings on a shared box are noisy; the planted changes are 3x or more
agent:
  budget: 2
"""


def diag_op(forward: str) -> str:
    return f"""
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        {forward}

N = 512

def get_inputs():
    return [torch.randn(N), torch.randn(N, N)]

def get_init_inputs():
    return []
"""


def patches(repo: GitRepoBuilder, base: str, head: str) -> dict[str, str]:
    """The PR files' `patch` fields, as GitHub computes them (the diff from the first @@ on)."""
    out = {}
    for path in repo.git("diff", "--name-only", base, head).splitlines():
        diff = repo.git("diff", base, head, "--", path)
        out[path] = diff[diff.index("@@") :]
    return out


def slash_command(
    github_api: GitHubImitation,
    webhook: Any,
    repo: GitRepoBuilder,
    base: str,
    head: str,
    number: int,
    user: str,
    role: str,
    body: str,
) -> tuple[int, Any]:
    """PR `number` from base to head, `user` with `role`, and their comment `body`: its id and the event payload."""
    github_api.pulls[number] = Pull(number, head, base, patches(repo, base, head))
    github_api.roles[user] = role
    cid = github_api.add_comment(number, body, user)
    payload = webhook(
        "issue_comment",
        repository=github_api.repository,
        number=number,
        body=body,
        commenter=user,
        comment_id=cid,
    )
    return cid, payload


@pytest.fixture(scope="module")
def regression_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepoBuilder, str, str]:
    repo = GitRepoBuilder(tmp_path_factory.mktemp("action") / "repo")
    base = repo.commit(
        {
            ".github/kernelbot.yml": CONFIG,
            "ops/slowed.py": matmul_op(1, size=128),
            "ops/steady.py": matmul_op(1, size=128),
        },
        message="base",
    )
    head = repo.commit({"ops/slowed.py": matmul_op(6, size=128)}, message="head: slower")
    return repo, base, head


@pytest.fixture
def fast_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The production client with its pauses shortened (the retry policy itself is unchanged)."""
    real = workflow.client

    def client(env: Any, **kw: Any) -> GitHub:
        return real(env, seconds_between_writes=0, seconds_between_requests=0, backoff=0.01, **kw)

    monkeypatch.setattr(action_cmd, "client", client)
    monkeypatch.setattr(publish_cmd, "client", client)


class Run:
    """One `kernelbot action` (or publish) invocation as GitHub Actions would start it."""

    def __init__(self, code: int, outputs: dict[str, str], stdout: str, summary: str) -> None:
        self.code, self.outputs, self.stdout, self.summary = code, outputs, stdout, summary


def actions_env(
    monkeypatch: pytest.MonkeyPatch, tmp: Path, server: GitHubImitation, event: str, payload: dict, repo: Path
) -> dict[str, Path]:
    tmp.mkdir(parents=True, exist_ok=True)
    files = {"event": tmp / "event.json", "output": tmp / "output", "summary": tmp / "summary.md"}
    files["event"].write_text(json.dumps(payload))
    for key, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(files["event"]),
        "GITHUB_REPOSITORY": server.repository,
        "GITHUB_API_URL": server.base_url,
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_TOKEN": server.token,
        "GITHUB_OUTPUT": str(files["output"]),
        "GITHUB_STEP_SUMMARY": str(files["summary"]),
        "GITHUB_WORKSPACE": str(repo),
    }.items():
        monkeypatch.setenv(key, value)
    return files


def run_action(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp: Path,
    server: GitHubImitation,
    event: str,
    payload: dict,
    repo: Path,
    *args: str,
) -> Run:
    files = actions_env(monkeypatch, tmp, server, event, payload, repo)
    capsys.readouterr()
    code = main(
        [
            "action",
            "--device",
            "cpu",
            "--db",
            f"sqlite:///{tmp / 'history.db'}",
            "--out",
            str(tmp / "out"),
            *args,
        ]
    )
    out = capsys.readouterr().out
    outputs = dict(
        line.split("=", 1)
        for line in (files["output"].read_text().splitlines() if files["output"].exists() else [])
    )
    summary = files["summary"].read_text() if files["summary"].exists() else ""
    return Run(code, outputs, out, summary)


Act = Callable[..., Run]


@pytest.fixture
def act(
    fast_client: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    github_api: GitHubImitation,
) -> Act:
    """`act(event, payload, repo_root, *args, tmp=tmp_path)`: one action run against the imitation, fast retries."""

    def run(event: str, payload: dict, repo: Path, *args: str, tmp: Path = tmp_path) -> Run:
        return run_action(monkeypatch, capsys, tmp, github_api, event, payload, repo, *args)

    return run


def stickies(server: GitHubImitation, number: int) -> list[dict[str, Any]]:
    return [c for c in server.comments_on(number) if STICKY_MARKER in c["body"] and c["user"] == server.bot]


# -- pull requests -----------------------------------------------------------------------------------


def test_regression_pr_comment_failing_check_annotation_then_second_push_edits_it(
    regression_repo: tuple[GitRepoBuilder, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    act: Act,
) -> None:
    repo, base, head = regression_repo
    github_api.pulls[5] = Pull(5, head, base, patches(repo, base, head))
    for i in range(120):  # other people's comments: the sticky one is found across pages
        github_api.add_comment(5, f"looks good {i}", "reviewer")
    payload = webhook(
        "pull_request", repository=github_api.repository, number=5, head_sha=head, base_sha=base
    )
    run = act("pull_request", payload, repo.root, "--fail-on-regression", tmp=tmp_path / "1")
    assert run.code == 1
    [comment] = stickies(github_api, 5)
    assert "1 regression" in comment["body"] and "| `ops/slowed` |" in comment["body"]
    [check] = github_api.check_runs.values()
    assert check["conclusion"] == "failure" and check["head_sha"] == head
    assert check["annotations"] and check["annotations"][0]["path"] == "ops/slowed.py"
    assert "::error file=ops/slowed.py,line=1,title=kernelbot::ops/slowed: regression" in run.stdout
    assert "::group::kernelbot: measure" in run.stdout and "::endgroup::" in run.stdout
    assert run.outputs["verdict-summary"] == "1 regression" and run.outputs["run-id"].isdigit()
    assert run.outputs["comment-url"].startswith(github_api.base_url)
    assert "ops/slowed" in run.summary
    assert github_api.token not in json.dumps(
        github_api.bodies
    ) and github_api.token not in run.stdout.replace(f"::add-mask::{github_api.token}", "")

    # A second push: the same comment is edited, never a second one.
    second = repo.commit({"ops/slowed.py": matmul_op(5, size=128)}, message="head 2")
    github_api.pulls[5] = Pull(5, second, base, patches(repo, base, second))
    payload = webhook(
        "pull_request",
        repository=github_api.repository,
        number=5,
        action="synchronize",
        head_sha=second,
        base_sha=base,
    )
    run2 = act("pull_request", payload, repo.root, tmp=tmp_path / "1")
    assert run2.code == 0  # not --fail-on-regression this time
    [edited] = stickies(github_api, 5)
    assert second[:10] in edited["body"] and head[:10] not in edited["body"]
    assert github_api.requests("PATCH", r"/issues/comments/\d+$")

    # The stored run can be posted again from the database (a failed publish is replayable).
    capsys.readouterr()
    assert (
        main(
            [
                "publish",
                "--run-id",
                run.outputs["run-id"],
                "--db",
                f"sqlite:///{tmp_path / '1' / 'history.db'}",
            ]
        )
        == 0
    )
    [replayed] = stickies(github_api, 5)
    assert head[:10] in replayed["body"] and "1 regression" in replayed["body"]


def test_improvement_with_verified_candidate_gets_a_suggestion(
    github_api: GitHubImitation,
    webhook: Any,
    tmp_path: Path,
    act: Act,
) -> None:
    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit(
        {
            ".github/kernelbot.yml": CONFIG,
            "ops/diag.py": diag_op("return torch.diag(A) @ (torch.diag(A) @ B)"),
        }
    )
    head = repo.commit({"ops/diag.py": diag_op("return torch.diag(A) @ B")})
    github_api.pulls[9] = Pull(9, head, base, patches(repo, base, head))
    payload = webhook(
        "pull_request", repository=github_api.repository, number=9, head_sha=head, base_sha=base
    )
    run = act("pull_request", payload, repo.root, "--agent", "search", "--budget", "1")
    assert run.code == 0
    [comment] = stickies(github_api, 9)
    assert "improvement" in comment["body"] and "diag-matmul-broadcast" in comment["body"]
    assert comment["body"].count("<details><summary>Faster verified kernel for") == 1
    assert comment["body"].count("```python") == 1  # the kernel's source, once
    [review] = github_api.reviews
    [suggestion] = review["comments"]
    assert review["commit_id"] == head and suggestion["path"] == "ops/diag.py"
    assert "```suggestion\n    def forward(self, A, B):" in suggestion["body"]
    assert "torch.diag" not in suggestion["body"].split("```suggestion")[1]
    source = (repo.root / "ops/diag.py").read_text().splitlines()
    assert source[suggestion["start_line"] - 1].strip() == "def forward(self, A, B):"
    [check] = github_api.check_runs.values()
    assert check["conclusion"] == "success"

    # Re-posted from the history database: the very same comment, candidate, p-value and precision included.
    db = f"sqlite:///{tmp_path / 'history.db'}"
    assert main(["publish", "--run-id", run.outputs["run-id"], "--db", db]) == 0
    [replayed] = stickies(github_api, 9)
    assert replayed["body"] == comment["body"]


def test_fork_pr_runs_only_after_the_label(
    regression_repo: tuple[GitRepoBuilder, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    tmp_path: Path,
    act: Act,
) -> None:
    repo, base, head = regression_repo
    github_api.pulls[6] = Pull(6, head, base, patches(repo, base, head), head_repo="stranger/kernels")
    common = {
        "repository": github_api.repository,
        "number": 6,
        "head_sha": head,
        "base_sha": base,
        "head_repo": "stranger/kernels",
    }
    run = act("pull_request", webhook("pull_request", **common), repo.root)
    assert run.code == 0 and "waiting for a maintainer" in run.outputs["verdict-summary"]
    assert github_api.log == [] and not (tmp_path / "out" / "payload.json").exists()
    other = webhook("pull_request", action="labeled", label="bug", labels=("bug",), **common)
    assert act("pull_request", other, repo.root).code == 0
    assert github_api.log == []
    labelled = webhook(
        "pull_request", action="labeled", label="kernelbot:run", labels=("kernelbot:run",), **common
    )
    # The GPU job (read-only token) measures and leaves the payload; the publish job posts it.
    run = act("pull_request", labelled, repo.root, "--no-publish")
    assert run.code == 0 and run.outputs["verdict-summary"] == "1 regression"
    assert [r for r in github_api.log if r[0] != "GET"] == [] and not stickies(github_api, 6)
    assert main(["publish", "--payload", str(tmp_path / "out" / "payload.json")]) == 0
    assert len(stickies(github_api, 6)) == 1 and len(github_api.check_runs) == 1


def test_gate_only_pins_the_head_and_says_eyes(
    regression_repo: tuple[GitRepoBuilder, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    tmp_path: Path,
    act: Act,
) -> None:
    repo, base, head = regression_repo
    cid, payload = slash_command(
        github_api, webhook, repo, base, head, 15, "owner", "admin", "/kernelbot optimize"
    )
    run = act("issue_comment", payload, repo.root, "--gate-only")
    assert run.code == 0 and run.outputs["accepted"] == "true"
    assert run.outputs["head-sha"] == head and run.outputs["base-sha"] == base
    assert [r[1] for r in github_api.reactions if r[0] == cid] == ["eyes"]
    assert not (tmp_path / "out" / "payload.json").exists()


# -- slash commands ----------------------------------------------------------------------------------


def test_writer_command_runs_with_reactions(
    regression_repo: tuple[GitRepoBuilder, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    tmp_path: Path,
    act: Act,
) -> None:
    repo, base, head = regression_repo
    github_api.pulls[7] = Pull(7, head, base, patches(repo, base, head))
    github_api.roles["maintainer"] = "write"
    cid = github_api.add_comment(7, "/kernelbot optimize ops/slowed --budget 1", "maintainer")
    payload = webhook(
        "issue_comment", repository=github_api.repository, number=7, body="/kernelbot optimize ops/slowed --budget 1",
        commenter="maintainer", comment_id=cid,
    )  # fmt: skip
    run = act("issue_comment", payload, repo.root)
    assert run.code == 0
    assert [r[1] for r in github_api.reactions if r[0] == cid] == ["eyes", "rocket"]
    assert len(stickies(github_api, 7)) == 1
    assert github_api.requests("GET", r"/collaborators/maintainer/permission$")
    stored = json.loads((tmp_path / "out" / "review.json").read_text())
    assert stored["head"] == head  # the SHA pinned when the command was accepted


@pytest.mark.parametrize(
    ("user", "permission", "body", "reason"),
    [
        ("visitor", "read", "/kernelbot optimize", "@visitor has read permission"),
        # A writer may ask for the model agent, but the base's config names no model: refused before timing.
        ("maintainer", "write", "/kernelbot optimize --agent llm", "`--agent llm` cannot run here"),
    ],
    ids=["reader", "llm-without-a-model"],
)
def test_a_refused_command_gets_one_reply_and_runs_nothing(
    regression_repo: tuple[GitRepoBuilder, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    act: Act,
    user: str,
    permission: str,
    body: str,
    reason: str,
) -> None:
    repo, base, head = regression_repo
    cid, payload = slash_command(github_api, webhook, repo, base, head, 8, user, permission, body)
    for _ in range(2):  # a re-run of the same event does not reply twice
        run = act("issue_comment", payload, repo.root)
        assert run.code == 0 and "skipped" in run.outputs["verdict-summary"]
    assert {r[1] for r in github_api.reactions if r[0] == cid} == {"confused"}
    replies = [c for c in github_api.comments_on(8) if c["user"] == github_api.bot]
    assert len(replies) == 1 and reason in replies[0]["body"]
    assert not stickies(github_api, 8) and not github_api.check_runs


def test_shell_injection_in_a_comment_is_inert(
    regression_repo: tuple[GitRepoBuilder, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    act: Act,
) -> None:
    repo, base, head = regression_repo
    github_api.pulls[10] = Pull(10, head, base, patches(repo, base, head))
    github_api.roles["maintainer"] = "admin"
    marker = tmp_path / "pwned"
    body = f'/kernelbot optimize "$(touch {marker})" `touch {marker}` ; touch {marker} --budget 1$(id)\ntouch {marker}'
    cid = github_api.add_comment(10, body, "maintainer")
    payload = webhook(
        "issue_comment",
        repository=github_api.repository,
        number=10,
        body=body,
        commenter="maintainer",
        comment_id=cid,
    )
    monkeypatch.chdir(tmp_path)
    run = act("issue_comment", payload, repo.root)
    assert run.code == 0 and not marker.exists()
    assert {r[1] for r in github_api.reactions if r[0] == cid} == {"confused"}
    assert not stickies(github_api, 10)


def test_command_parsing() -> None:
    assert parse_command("looks good") is None and parse_command("/kernelbotx optimize") is None
    assert parse_command("/kernelbot optimize") == gate.Command((), None, "search")
    assert parse_command("/kernelbot optimize ops/a gelu --budget 3 --agent llm\nmore text") == gate.Command(
        ("ops/a", "gelu"), 3, "llm"
    )
    for bad in (
        "/kernelbot deploy",
        "/kernelbot optimize --budget x",
        "/kernelbot optimize 'unclosed",
        "/kernelbot optimize a;b",
    ):
        with pytest.raises(CommandError):
            parse_command(bad)


# -- publishing: retries, limits, the diff -----------------------------------------------------------


def payload_file(tmp_path: Path, pr: int, head: str, comment: str) -> Path:
    payload = Payload("octo-org/kernels", pr, head, 1, "1 regression", comment, "failure", "summary")
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(payload.to_json()))
    return path


def test_a_500_on_the_first_post_leaves_exactly_one_comment(
    github_api: GitHubImitation, fast_client: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    github_api.pulls[11] = Pull(11, "a" * 40, "b" * 40, {})
    actions_env(monkeypatch, tmp_path, github_api, "pull_request", {}, tmp_path)
    # GitHub created the comment, then answered 500: the retry must find it rather than post again.
    github_api.fail("POST", r"/issues/11/comments$", 500, after_apply=True)
    github_api.fail("POST", r"/check-runs$", 502, times=2)
    path = payload_file(tmp_path, 11, "a" * 40, f"{STICKY_MARKER}\nhello")
    # The publish job passes what the trusted job pinned: the payload must be for that PR and head.
    assert main(["publish", "--payload", str(path), "--pr", "11", "--head-sha", "a" * 40]) == 0
    assert (
        len(stickies(github_api, 11)) == 1 and len(github_api.requests("POST", r"/issues/11/comments$")) == 1
    )
    assert len(github_api.check_runs) == 1 and len(github_api.requests("POST", r"/check-runs$")) == 3


def test_oversized_table_is_truncated_under_the_limit(
    github_api: GitHubImitation, fast_client: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    review = json.loads(json.dumps(_tiny_review()))
    review["operators"] = [
        dict(review["operators"][0], name=f"ops/op_{i:05d}", path=f"ops/op_{i:05d}.py") for i in range(3000)
    ]
    payload, full = build_payload(
        ReviewResult.from_json(review),
        pr=12,
        fail_on_regression=True,
        pointer="See the kernelbot-report artifact.",
        read_head=lambda _p: None,
    )
    assert len(full) > COMMENT_LIMIT and len(payload.comment) < COMMENT_LIMIT
    assert payload.comment.rstrip().endswith("See the kernelbot-report artifact.")
    assert len(payload.annotations) == 3000
    github_api.pulls[12] = Pull(12, "c" * 40, "d" * 40, {})
    actions_env(monkeypatch, tmp_path, github_api, "pull_request", {}, tmp_path)
    (tmp_path / "payload.json").write_text(json.dumps(payload.to_json()))
    pinned = ["--pr", "12", "--head-sha", "c" * 40]
    assert main(["publish", "--payload", str(tmp_path / "payload.json"), *pinned]) == 0
    [comment] = stickies(github_api, 12)
    assert len(comment["body"]) < COMMENT_LIMIT
    [check] = github_api.check_runs.values()
    assert len(check["annotations"]) == 3000  # 50 per request, as GitHub requires
    # The imitation holds GitHub's line: a body over the limit is a 422, which the adapter refuses early.
    gh = GitHub(github_api.repository, github_api.token, github_api.base_url, seconds_between_writes=0)
    with pytest.raises(GitHubError, match="at most 65536"):
        gh.upsert_comment(12, STICKY_MARKER + "x" * COMMENT_LIMIT, STICKY_MARKER)


def _tiny_review() -> dict[str, Any]:
    timing = {"median_ms": 2.0, "mean_ms": 2.0, "std_ms": 0.05, "samples": 10, "calls_per_sample": 1,
              "ci95_ms": [1.9, 2.1], "stopped_by": "rse"}  # fmt: skip
    op = {
        "name": "ops/a", "path": "ops/a.py", "change": "modified", "reasons": [], "threshold": 0.25,
        "base": {"status": "ok", "reason": "", "timing": timing}, "head": {"status": "ok", "reason": "", "timing": {**timing, "median_ms": 6.0}},
        "ratio": 3.0, "p_value": 0.001, "ratio_ci99": [2.9, 3.1], "verdict": "regression", "error": None, "best_candidate": None,
    }  # fmt: skip
    device = {
        "device": "cpu",
        "gpu": None,
        "cpu": "x86",
        "driver": None,
        "cuda": None,
        "torch": "2",
        "cupy": None,
        "kernelbot": "0.1",
        "triton": None,
        "python": "3.12",
        "host": "runner",
    }
    return {"schema_version": 1, "run_id": 1, "repository": "octo-org/kernels", "base": "b" * 40, "head": "c" * 40, "device": device, "summary": "", "warnings": [], "operators": [op]}  # fmt: skip


def test_rate_limits_are_waited_out_and_post_is_not_blindly_retried(github_api: GitHubImitation) -> None:
    slept: list[float] = []
    gh = GitHub(
        github_api.repository, github_api.token, github_api.base_url,
        seconds_between_writes=0, seconds_between_requests=0, backoff=0.01, sleep=slept.append,
    )  # fmt: skip
    github_api.pulls[13] = Pull(13, "e" * 40, "f" * 40, {})
    github_api.roles["dev"] = "maintain"
    github_api.fail("GET", r"/collaborators/dev/permission$", 429, retry_after=1)
    assert gh.permission("dev") == "maintain"  # urllib3 slept the Retry-After second itself
    github_api.fail("POST", r"/issues/13/comments$", 403, retry_after=7)
    gh.upsert_comment(13, f"{STICKY_MARKER}\nhi", STICKY_MARKER)
    assert 7.0 in slept and len(stickies(github_api, 13)) == 1
    github_api.fail("POST", r"/issues/13/comments$", 500, times=99)
    with pytest.raises(GitHubError, match="replay it later"):
        gh.upsert_comment(13, "<!-- other -->\nx", "<!-- other -->")


def test_suggestions_off_the_diff_are_left_out(github_api: GitHubImitation) -> None:
    patch = "@@ -10,4 +10,5 @@ class Model:\n     def forward(self, x):\n-        return a\n+        return b\n+        # c\n     x\n"
    assert hunk_lines(patch) == [(10, 14)]
    github_api.pulls[14] = Pull(14, "1" * 40, "2" * 40, {"ops/a.py": patch})
    gh = GitHub(github_api.repository, github_api.token, github_api.base_url, seconds_between_writes=0)
    inside = Suggestion("ops/a.py", 11, 12, "        return c", "note")
    outside = Suggestion("ops/a.py", 30, 31, "x", "note")
    other = Suggestion("ops/b.py", 1, 1, "x", "note")
    url, dropped = gh.create_review(14, "1" * 40, "body", [inside, outside, other])
    assert url and dropped == [outside, other]
    assert github_api.reviews[0]["comments"][0]["start_line"] == 11
    assert gh.create_review(14, "1" * 40, "body", [outside]) == (None, [outside])
    url = gh.create_check_run(CheckRun("kernelbot", "1" * 40, "neutral", "t", "s"))
    assert url.startswith(github_api.base_url)


def test_suggestion_replaces_only_forward_and_truncate_keeps_whole_lines() -> None:
    head = diag_op("return torch.diag(A) @ B")
    candidate = (
        head + "\n\nclass ModelNew(Model):\n    def forward(self, A, B):\n        return A[:, None] * B\n"
    )
    best = {
        "source": candidate,
        "origin": "r",
        "speedup_vs_eager": 12.0,
        "speedup_vs_compile": 9.0,
        "reward": 3,
    }
    op = OperatorResult("ops/diag", "ops/diag.py", "modified", [], 0.03)
    op.best_candidate = Suggested.from_json(best)
    s = suggestion_for(op, head)
    assert s is not None and s.replacement == "    def forward(self, A, B):\n        return A[:, None] * B"
    assert "`r` is verified correct and 12.0× faster than eager (reward 3)" in s.note
    needs_import = candidate.replace("A[:, None] * B", "operator.mul(A[:, None], B)")
    op.best_candidate = Suggested.from_json({**best, "source": needs_import})
    assert suggestion_for(op, head) is None
    text = "\n".join(f"line {i}" for i in range(1000))
    cut = truncate(text, 500, "see artifact")
    assert len(cut) <= 500 and cut.endswith("see artifact\n") and re.search(r"line \d+\n\n…", cut)


def test_a_tampered_payload_cannot_post_elsewhere(
    github_api: GitHubImitation,
    webhook: Any,
    fast_client: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    event = webhook(
        "pull_request", repository=github_api.repository, number=16, head_sha="a" * 40, base_sha="b" * 40
    )
    actions_env(monkeypatch, tmp_path, github_api, "pull_request", event, tmp_path)
    assert (
        main(["publish", "--payload", str(payload_file(tmp_path, 17, "a" * 40, f"{STICKY_MARKER}\nx"))]) == 2
    )
    assert (
        main(["publish", "--payload", str(payload_file(tmp_path, 16, "c" * 40, f"{STICKY_MARKER}\nx"))]) == 2
    )
    assert github_api.log == [] and "#16" in capsys.readouterr().err


def test_a_run_stored_before_reports_were_kept_still_renders_with_its_suggestion() -> None:
    """Runs written at schema 0002 have no report: the comment is rebuilt from rows, candidates included."""
    from kernelbot.history import CandidateRecord, OperatorRecord, RunRecord, VerdictRecord

    slow = CandidateRecord("x = 1\n", "tf32-matmul", "ok", 1, 1.01, 0.9)
    fast = CandidateRecord("y = 2\n", "tf32-matmul", "ok", 2, 1.5, 0.8, precision_note="uses tf32")
    op = OperatorRecord("ops/mm", "ops/mm.py", "h" * 16, "modified", None, [],
                        VerdictRecord("improvement", 0.6, 0.004, 0.03), [slow, fast])  # fmt: skip
    record = RunRecord("o/r", "pull_request", "c" * 40, "b" * 40, 3, operators=[op])
    review = payload_mod.review_from_record(7, record)
    [row] = review.operators
    assert row.p_value == 0.004 and row.best_candidate is not None
    assert (
        row.best_candidate.source == "y = 2\n" and row.best_candidate.precision == "tf32"
    )  # reward 2, not 1
    text = review.markdown()
    assert "Uses tf32 precision." in text and text.count("```python") == 1 and "run 7" in text
