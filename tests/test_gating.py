"""The gating races: an approval covers one head commit, publish posts only what was pinned, and a PR's
own config cannot loosen the gates it is judged by. Real PyGithub against the GitHub imitation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main
from kernelbot.commands import action as action_cmd
from kernelbot.commands import publish as publish_cmd
from kernelbot.config import Config, gated, parse_config
from kernelbot.github import workflow
from kernelbot.github.client import GitHub
from kernelbot.github.payload import Payload
from kernelbot.render import STICKY_MARKER
from tests.gitrepo_builder import GitRepoBuilder
from tests.ops import matmul_op
from tests.servers.github import GitHubImitation, Pull
from tests.test_github_action import CONFIG, Run, actions_env, patches, run_action, stickies

FORK = "stranger/kernels"
LABEL = "kernelbot:run"
APPROVAL = "<!-- kernelbot:approval -->"
T_COMMENT = "2024-05-01T12:00:00Z"


@pytest.fixture
def act(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    github_api: GitHubImitation,
) -> Any:
    """`act(event, payload, repo_root, *args)`: one `kernelbot action` run against the imitation."""
    real = workflow.client

    def client(env: Any, **kw: Any) -> GitHub:
        return real(env, seconds_between_writes=0, seconds_between_requests=0, backoff=0.01, **kw)

    monkeypatch.setattr(action_cmd, "client", client)
    monkeypatch.setattr(publish_cmd, "client", client)

    def run(event: str, payload: dict, repo: Path, *args: str, tmp: Path = tmp_path) -> Run:
        return run_action(monkeypatch, capsys, tmp, github_api, event, payload, repo, *args)

    return run


@pytest.fixture(scope="module")
def pushes(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepoBuilder, str, str, str]:
    """base, a reviewed head, and a later push on top of it (both heads slow ops/slowed down)."""
    repo = GitRepoBuilder(tmp_path_factory.mktemp("gating") / "repo")
    base = repo.commit(
        {".github/kernelbot.yml": CONFIG, "ops/slowed.py": matmul_op(1, size=128)}, message="base"
    )
    reviewed = repo.commit({"ops/slowed.py": matmul_op(6, size=128)}, message="reviewed head")
    later = repo.commit({"ops/slowed.py": matmul_op(7, size=128)}, message="pushed after the approval")
    return repo, base, reviewed, later


def pr_event(webhook: Any, server: GitHubImitation, number: int, base: str, head: str, **kw: Any) -> dict:
    return webhook(
        "pull_request", repository=server.repository, number=number, base_sha=base, head_sha=head, **kw
    )


def approval_notes(server: GitHubImitation, number: int) -> list[str]:
    return [c["body"] for c in server.comments_on(number) if APPROVAL in c["body"]]


# -- a label approves one head -------------------------------------------------------------------------


def test_label_then_push_is_not_approved_and_the_label_comes_off(
    pushes: tuple[GitRepoBuilder, str, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    tmp_path: Path,
    act: Any,
) -> None:
    repo, base, reviewed, later = pushes
    github_api.pulls[21] = Pull(21, reviewed, base, {}, head_repo=FORK, labels=[LABEL])
    labelled = pr_event(
        webhook, github_api, 21, base, reviewed, action="labeled", label=LABEL, labels=(LABEL,),
        head_repo=FORK, sender="maintainer",
    )  # fmt: skip
    run = act("pull_request", labelled, repo.root, "--gate-only", tmp=tmp_path / "1")
    assert run.outputs["accepted"] == "true" and run.outputs["head-sha"] == reviewed
    assert "@maintainer's `kernelbot:run` label approves head" in run.stdout
    [note] = approval_notes(github_api, 21)
    assert f"approves head `{reviewed[:12]}` only" in note and LABEL in github_api.pulls[21].labels

    # The fork pushes again: the label is still on the PR, but it approved `reviewed`, not `later`.
    github_api.pulls[21].head_sha = later
    pushed = pr_event(
        webhook, github_api, 21, base, later, action="synchronize", labels=(LABEL,), head_repo=FORK
    )
    run = act("pull_request", pushed, repo.root, "--gate-only", tmp=tmp_path / "2")
    assert run.outputs["accepted"] == "false" and "head-sha" not in run.outputs
    assert "a maintainer must look at the new commits and add the label again" in run.stdout
    assert LABEL not in github_api.pulls[21].labels  # taken off: re-adding it is the new approval
    assert github_api.requests("DELETE", r"/issues/21/labels/kernelbot%3Arun$")
    [note] = approval_notes(github_api, 21)  # the same note, edited
    assert f"head `{later[:12]}` is not approved" in note and "add it again" in note

    # The GPU job of that push measures nothing either (the workflow skips it; kernelbot refuses too).
    run = act("pull_request", pushed, repo.root, "--no-publish", tmp=tmp_path / "3")
    assert run.code == 0 and run.outputs["accepted"] == "false"
    assert not (tmp_path / "3" / "out" / "payload.json").exists()
    assert not github_api.check_runs and not stickies(github_api, 21)


def test_a_read_only_token_leaves_the_label_but_the_push_is_still_not_approved(
    pushes: tuple[GitRepoBuilder, str, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    act: Any,
) -> None:
    repo, base, _, later = pushes
    github_api.pulls[22] = Pull(22, later, base, {}, head_repo=FORK, labels=[LABEL])
    github_api.fail("DELETE", r"/labels/", 403, times=9)  # a fork PR's pull_request token is read-only
    pushed = pr_event(
        webhook, github_api, 22, base, later, action="synchronize", labels=(LABEL,), head_repo=FORK
    )
    run = act("pull_request", pushed, repo.root, "--gate-only")
    assert run.code == 0 and run.outputs["accepted"] == "false"
    assert "::warning::could not update the approval on the pull request" in run.stdout
    assert "pushed after the `kernelbot:run` label approved an earlier head" in run.summary


def test_a_pr_cannot_rename_the_run_label_in_its_own_config(
    github_api: GitHubImitation, webhook: Any, tmp_path: Path, act: Any
) -> None:
    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit({".github/kernelbot.yml": CONFIG, "ops/a.py": matmul_op(1, size=64)})
    head = repo.commit(
        {
            ".github/kernelbot.yml": CONFIG + "triggers:\n  fork_label: bug\n",
            "ops/a.py": matmul_op(2, size=64),
        }
    )
    github_api.pulls[23] = Pull(23, head, base, {}, head_repo=FORK, labels=["bug"])
    event = pr_event(
        webhook, github_api, 23, base, head, action="labeled", label="bug", labels=("bug",), head_repo=FORK
    )
    repo.git("checkout", "--quiet", head)  # the GPU job's checkout is the head: its config is not used
    run = act("pull_request", event, repo.root, "--no-publish")
    assert run.code == 0 and run.outputs["accepted"] == "false"
    assert "a label other than the run label" in run.outputs["verdict-summary"]


# -- a command approves the head it was written on ------------------------------------------------------


def command(
    server: GitHubImitation, webhook: Any, number: int, base: str, head: str, *, fork: bool = False
) -> tuple[int, dict]:
    server.pulls[number] = Pull(number, head, base, {}, head_repo=FORK if fork else "")
    server.roles["maintainer"] = "write"
    cid = server.add_comment(number, "/kernelbot optimize", "maintainer")
    event = webhook(
        "issue_comment", repository=server.repository, number=number, body="/kernelbot optimize",
        commenter="maintainer", comment_id=cid, created_at=T_COMMENT,
    )  # fmt: skip
    return cid, event


def reply(server: GitHubImitation, number: int, cid: int) -> str:
    [body] = [c["body"] for c in server.comments_on(number) if f"kernelbot:reply:{cid}" in c["body"]]
    return body


def test_comment_then_push_before_accept_is_refused(
    pushes: tuple[GitRepoBuilder, str, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    act: Any,
) -> None:
    repo, base, reviewed, later = pushes
    cid, event = command(github_api, webhook, 31, base, reviewed, fork=True)
    github_api.activity[FORK] = [
        {"before": base, "after": reviewed, "ref": "refs/heads/feature", "timestamp": "2024-05-01T11:00:00Z",
         "actor": "stranger"},
    ]  # fmt: skip
    # The accept job pinned `reviewed` in its first step; the fork pushed while the job was setting up.
    github_api.push(31, later, "2024-05-01T12:00:40Z", actor="stranger")
    run = act("issue_comment", event, repo.root, "--gate-only", "--head-sha", reviewed)
    assert run.code == 0 and run.outputs["accepted"] == "false" and "head-sha" not in run.outputs
    assert [r[1] for r in github_api.reactions if r[0] == cid] == ["confused"]
    text = reply(github_api, 31, cid)
    assert "new commits were pushed after the command" in text
    assert f"from {reviewed[:12]} to {later[:12]}" in text


def test_a_head_pushed_after_the_comment_is_refused_even_if_it_was_read_first(
    pushes: tuple[GitRepoBuilder, str, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    act: Any,
) -> None:
    repo, base, reviewed, later = pushes
    cid, event = command(github_api, webhook, 32, base, reviewed, fork=True)
    github_api.push(32, later, "2024-05-01T12:00:03Z", actor="stranger")  # before the pin step ran
    run = act("issue_comment", event, repo.root, "--gate-only", "--head-sha", later)
    assert run.outputs["accepted"] == "false"
    assert [r[1] for r in github_api.reactions if r[0] == cid] == ["confused"]
    text = reply(github_api, 32, cid)
    assert (
        f"head {later[:12]} was pushed at 2024-05-01 12:00:03 UTC, after the command (12:00:00 UTC)" in text
    )


def test_a_fork_head_of_unknown_push_time_is_refused(
    pushes: tuple[GitRepoBuilder, str, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    act: Any,
) -> None:
    repo, base, reviewed, _ = pushes
    cid, event = command(github_api, webhook, 33, base, reviewed, fork=True)
    github_api.fail("GET", rf"^/repos/{FORK}/activity$", 404, times=9)  # a private fork: not readable
    run = act("issue_comment", event, repo.root, "--gate-only", "--head-sha", reviewed)
    assert run.outputs["accepted"] == "false"
    assert "cannot tell when the fork's head" in reply(github_api, 33, cid)


def test_a_head_pushed_before_the_comment_is_accepted_and_pinned(
    pushes: tuple[GitRepoBuilder, str, str, str],
    github_api: GitHubImitation,
    webhook: Any,
    act: Any,
) -> None:
    repo, base, reviewed, _ = pushes
    cid, event = command(github_api, webhook, 34, base, base, fork=True)
    github_api.push(34, reviewed, "2024-05-01T11:59:00Z", actor="stranger")
    run = act("issue_comment", event, repo.root, "--gate-only", "--head-sha", reviewed)
    assert run.outputs["accepted"] == "true" and run.outputs["head-sha"] == reviewed
    assert run.outputs["said-at"] == T_COMMENT
    assert [r[1] for r in github_api.reactions if r[0] == cid] == ["eyes"]
    assert github_api.requests("GET", rf"^/repos/{FORK}/activity$")


# -- publish posts only what the trusted job pinned -----------------------------------------------------


def payload_file(
    tmp: Path, *, repository: str = "octo-org/kernels", pr: int = 41, head: str = "a" * 40
) -> Path:
    payload = Payload(repository, pr, head, 1, "1 regression", f"{STICKY_MARKER}\nx", "success", "green")
    path = tmp / f"payload-{repository.replace('/', '-')}-{pr}-{head[:4]}.json"
    path.write_text(json.dumps(payload.to_json()))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"head": "c" * 40}, "the payload is for commit cccccccccccc, but aaaaaaaaaaaa was pinned"),
        ({"pr": 42}, "the payload is for pull request #42, but #41 was pinned"),
        ({"repository": "evil/kernels"}, "the payload is for 'evil/kernels', but this is octo-org/kernels"),
    ],
)
def test_publish_on_issue_comment_refuses_a_payload_for_another_head_pr_or_repo(
    github_api: GitHubImitation,
    webhook: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    changes: dict[str, Any],
    message: str,
) -> None:
    github_api.pulls[41] = Pull(41, "a" * 40, "b" * 40, {})
    event = webhook("issue_comment", repository=github_api.repository, number=41, body="/kernelbot optimize")
    actions_env(monkeypatch, tmp_path, github_api, "issue_comment", event, tmp_path)
    path = payload_file(tmp_path, **changes)
    capsys.readouterr()
    assert main(["publish", "--payload", str(path), "--pr", "41", "--head-sha", "a" * 40]) == 2
    err = capsys.readouterr().err
    assert (
        f"kernelbot: error: refused: {message}" in err and len(err.strip().splitlines()) == 2
    )  # ::error:: too
    assert github_api.log == [] and not github_api.check_runs


@pytest.mark.parametrize("event_name", ["issue_comment", "workflow_dispatch"])
def test_publish_without_a_pinned_head_posts_nothing(
    github_api: GitHubImitation,
    webhook: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    event_name: str,
) -> None:
    event = webhook("issue_comment", repository=github_api.repository, number=41, body="hi")
    actions_env(
        monkeypatch,
        tmp_path,
        github_api,
        event_name,
        event if event_name == "issue_comment" else {},
        tmp_path,
    )
    assert main(["publish", "--payload", str(payload_file(tmp_path))]) == 2
    assert "nothing pins the pull request and head" in capsys.readouterr().err
    assert github_api.log == []


def test_publish_posts_the_pinned_payload_and_refuses_a_pin_that_contradicts_the_event(
    github_api: GitHubImitation,
    webhook: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    real = workflow.client
    monkeypatch.setattr(publish_cmd, "client", lambda env: real(env, seconds_between_writes=0))
    github_api.pulls[41] = Pull(41, "a" * 40, "b" * 40, {})
    event = pr_event(webhook, github_api, 41, "b" * 40, "a" * 40)
    actions_env(monkeypatch, tmp_path, github_api, "pull_request", event, tmp_path)
    assert main(["publish", "--payload", str(payload_file(tmp_path)), "--head-sha", "d" * 40]) == 2
    assert "--head-sha dddddddddddd is not this event's head" in capsys.readouterr().err
    assert github_api.log == []
    assert main(["publish", "--payload", str(payload_file(tmp_path)), "--head-sha", "a" * 40]) == 0
    [check] = github_api.check_runs.values()
    assert check["head_sha"] == "a" * 40 and len(stickies(github_api, 41)) == 1


# -- the gates come from the base revision --------------------------------------------------------------


def test_head_config_cannot_loosen_a_gate() -> None:
    base = parse_config(
        {
            "thresholds": {"regression": 0.03},
            "operators": [
                {"name": "add", "callable": "k.py:add", "inputs": "k.py:inp", "threshold": 0.05,
                 "tolerance": {"atol": 1e-6, "rtol": 1e-5}},
            ],
        }
    )  # fmt: skip
    head = parse_config(
        {
            "thresholds": {"regression": 0.99},
            "harness": {"seeds": 5, "timeout_s": 9999},
            "precision": {"allow_bf16": True},
            "operators": [
                {"name": "add", "callable": "k.py:add", "inputs": "k.py:inp", "threshold": 0.9,
                 "tolerance": {"atol": 1.0, "rtol": 1.0}, "shapes": [[8]]},
                {"name": "new", "callable": "k.py:new", "inputs": "k.py:inp"},
            ],
        }
    )  # fmt: skip
    effective, note = gated(base, head)
    assert effective.thresholds == base.thresholds and effective.harness == base.harness
    assert effective.precision == base.precision and effective.precision.allow_bf16 is False
    add = effective.operator("add")
    assert add is not None and add.threshold == 0.05 and add.tolerance == base.operators[0].tolerance
    assert add.shapes == [[8]]  # not a gate: the head may change what it measures
    assert effective.operator("new") is not None  # the head may add operators
    assert note is not None and "\n" not in note
    assert "thresholds.regression 0.03 → 0.99" in note and "the base's values are used" in note
    assert gated(base, base) == (base, None) and gated(Config(), Config()) == (Config(), None)


def test_a_pr_that_slows_an_operator_and_loosens_the_threshold_still_fails(
    github_api: GitHubImitation, webhook: Any, tmp_path: Path, act: Any
) -> None:
    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit({".github/kernelbot.yml": CONFIG, "ops/slowed.py": matmul_op(3, size=128)})
    loosened = CONFIG.replace("regression: 0.25", "regression: 0.99")
    head = repo.commit({".github/kernelbot.yml": loosened, "ops/slowed.py": matmul_op(5, size=128)})
    github_api.pulls[51] = Pull(51, head, base, patches(repo, base, head))
    event = pr_event(webhook, github_api, 51, base, head)
    run = act("pull_request", event, repo.root, "--no-publish", "--fail-on-regression")
    review = json.loads((tmp_path / "out" / "review.json").read_text())
    [op] = review["operators"]
    assert op["threshold"] == 0.25 and op["verdict"] == "regression", op
    assert 1.3 < op["ratio"] < 2.2  # under the PR's 0.99 this would have passed as "no change"
    assert run.code == 1
    assert (
        "::warning::the head's .github/kernelbot.yml changes gates (thresholds.regression 0.25 → 0.99)"
        in (run.stdout)
    )
    assert (
        "gates come from the base revision"
        in json.loads((tmp_path / "out" / "payload.json").read_text())["comment"]
    )


def test_a_pr_cannot_point_the_model_agent_elsewhere_or_lift_its_caps() -> None:
    """The key goes where the base's config says, within the base's limits, whatever the head's says."""
    base = parse_config({"agent": {"kind": "llm", "model": "openai/gpt-4o", "max_cost_usd": 2.0}})
    head = parse_config(
        {"agent": {"kind": "llm", "model": "openai/gpt-4o", "api_base": "https://attacker.example",
                   "max_cost_usd": 1000}}
    )  # fmt: skip
    effective, note = gated(base, head)
    assert effective.agent == base.agent and effective.agent.api_base is None
    assert note is not None and "agent.api_base None → https://attacker.example" in note


def test_what_a_commenter_or_a_file_name_says_is_never_a_marker_a_mention_or_a_log_command(
    github_api: Any,
) -> None:
    """Attacker round 56: a stranger's `/kernelbot optimize "<!-- kernelbot:sticky-comment -->"` was echoed in
    the refusal, which the next review then took for its sticky comment (a marker was matched anywhere in a
    body); a file name starting a line with `::stop-commands::` silenced the bot's own error lines."""
    from kernelbot.github.client import GitHub
    from kernelbot.github.gate import CommandError, parse_command

    for word in ('"<!-- kernelbot:sticky-comment -->"', "@org/team", "--x<!--"):
        with pytest.raises(CommandError) as said:
            parse_command(f"/kernelbot optimize {word}")
        assert "<!--" not in str(said.value) and "`" in str(said.value), said.value  # escaped, in a code span
    line = workflow.log_line("[1/2] ::stop-commands::kb\n::error::forged (added): measuring")
    assert "\n" not in line and line.startswith("kernelbot: ")

    # The bot's sticky comment carries a reply's marker inside a file name; editing the reply finds the reply.
    gh = GitHub(github_api.repository, github_api.token, github_api.base_url, seconds_between_writes=0)
    sticky = github_api.add_comment(
        1, "<!-- kernelbot:sticky-comment -->\n| `<!-- kernelbot:reply:7 -->` |", github_api.bot
    )
    reply = github_api.add_comment(1, "<!-- kernelbot:reply:7 -->\nrefused", github_api.bot)
    gh.upsert_comment(1, "<!-- kernelbot:reply:7 -->\nrefused again", "<!-- kernelbot:reply:7 -->")
    assert github_api.comments[reply]["body"].endswith("refused again")
    assert github_api.comments[sticky]["body"].startswith("<!-- kernelbot:sticky-comment -->\n| `")
