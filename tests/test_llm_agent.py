"""The model agent, through litellm for real, against a local OpenAI-compatible server answering scripted turns."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kernelbot.agents.base import Feedback, Task
from kernelbot.agents.llm import Endpoint, Limits, LLMAgent
from kernelbot.cli import main
from kernelbot.config import PrecisionPolicy, load_config
from kernelbot.fingerprint import collect
from kernelbot.history import History
from kernelbot.pipeline.check import settings_for
from kernelbot.spec import resolve_operator
from tests.ops import diag_op, write_repo
from tests.servers.openai_fake import LITELLM_NAME, FakeOpenAI, register_price, reply, tool_call

FAKE = LITELLM_NAME
KEY = "sk-test-7f3a9c1e5b"  # must never appear in any output, transcript or export

CONFIG = """\
harness:
  time_budget_s: 0.3
  max_samples: 20
  timeout_s: 60
agent:
  max_turns: 12
  max_cost_usd: 1.0
"""

DIAG = diag_op(512)

HEAD = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
BROKEN = (
    HEAD + "    def forward(self, A, B)\n        return A.unsqueeze(-1) * B\n"
)  # a syntax error: does not build
WRONG = HEAD + "    def forward(self, A, B):\n        return A.unsqueeze(0) * B\n"  # scales columns, not rows
RIGHT = HEAD + "    def forward(self, A, B):\n        return A.unsqueeze(-1) * B\n"  # O(n²) instead of O(n³)
SNOOP = HEAD + (
    "    def forward(self, A, B):\n"
    "        import urllib.request\n"
    "        urllib.request.urlopen('http://example.com')\n"
    "        return A.unsqueeze(-1) * B\n"
)
SNOOP_FILE = HEAD + (
    "    def forward(self, A, B):\n        open('/proc/self/environ').read()\n        return A.unsqueeze(-1) * B\n"
)


@pytest.fixture(scope="module", autouse=True)
def fake_price() -> None:
    register_price()


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELBOT_LLM_API_KEY", KEY)
    return write_repo(tmp_path, {"ops/diag.py": DIAG}, config=CONFIG)


def optimize(repo: Path, server: FakeOpenAI, *args: str) -> tuple[int, dict[str, Any]]:
    out = repo / "result.json"
    out.unlink(missing_ok=True)
    code = main(
        ["optimize", "ops/diag.py", "--agent", "llm", "--model", FAKE, "--api-base", server.api_base,
         "--device", "cpu", "--out", str(repo / "out"), "--json", str(out),
         "--db", f"sqlite:///{repo / 'history.db'}", *args]
    )  # fmt: skip
    return code, (json.loads(out.read_text()) if out.exists() else {})


def tool_texts(server: FakeOpenAI) -> list[str]:
    """What the model was told after each of its tool calls (the last request holds the whole conversation)."""
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def test_tool_calls_recover_from_build_error_wrong_fix_429_and_500(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    steps = [
        reply(None, tool_call("read_file", {"path": "ops/diag.py"}, "c0")),
        reply("First try.", tool_call("write_candidate", {"source": BROKEN}, "c1"), tool_call("compile", {}, "c2")),
        {"status": 429, "headers": {"Retry-After": "1"}},
        reply(None, tool_call("write_candidate", {"source": WRONG}, "c3"), tool_call("verify", {}, "c4")),
        {"status": 500},
        reply(None, tool_call("write_candidate", {"source": RIGHT, "description": "broadcast"}, "c5"),
              tool_call("profile", {}, "c7")),
        reply("Broadcasting instead of a dense diag matmul.", tool_call("finish", {"summary": "done"}, "c8")),
        reply(None, tool_call("finish", {}, "c9")),
    ]  # fmt: skip
    with FakeOpenAI(steps, api_key=KEY) as server:
        code, data = optimize(repo, server)
    assert code == 0
    texts = tool_texts(server)
    assert "class Model" in texts[0]  # read_file
    assert "compile FAILED (build_error)" in texts[2] and "SyntaxError" in texts[2]
    assert "verify FAILED (incorrect)" in texts[4] and "first at" in texts[4]  # the first mismatching element
    assert "profile OK" in texts[6] and "reward" in texts[6] and "speedup" in texts[6]
    assert "Pipeline result" in texts[-1] and "reward" in texts[-1]
    # The 429 was waited out as Retry-After asked (1 s) before the retry.
    retry_gap = server.times[3] - server.times[2]
    assert retry_gap >= 0.95, retry_gap
    # Only the verified candidate was proposed; it is correct and much faster than eager (O(n²) for O(n³) at
    # N = 512; the measured speedup itself is a benchmark's business, here only "far past reward 2's 5%").
    assert len(data["candidates"]) == 1
    best = data["best"]
    assert best is not None and best["origin"] == f"llm:{FAKE}" and best["status"] == "ok"
    assert best["reward"] >= 2 and best["speedup_vs_eager"] >= 2
    summary = data["agent_summary"]
    assert summary["cost_usd"] > 0 and summary["replies"] == 6
    assert summary["stop_reason"] == "the model finished"
    assert any("429" in n and "1.0 s" in n for n in summary["notes"])
    assert any("HTTP 500" in n for n in summary["notes"])
    # The transcript is in the database, linked to the candidate, and exported.
    history = History.open(f"sqlite:///{repo / 'history.db'}")
    run = history.get_run(1)
    history.close()
    assert run.trigger == "local"
    (op,) = run.operators
    assert len(op.candidates) == 1 and op.candidates[0].reward >= 2
    linked = [t for t in op.transcript if t.candidate == 0]
    assert {t.tool_name for t in linked} >= {"write_candidate", "finish"}
    assert [t.role for t in op.transcript[:2]] == ["system", "user"]
    out = repo / "traj.jsonl"
    assert (
        main(["export", "trajectories", "--db", f"sqlite:///{repo / 'history.db'}", "--out", str(out)]) == 0
    )
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert (
        line["final"]["source"] == RIGHT
        and line["reward"] >= 2
        and "torch.diag(A) @ B" in line["operator"]["source"]
    )
    assert line["model"] == FAKE and line["messages"][2]["tool_calls"][0]["function"]["name"] == "read_file"
    captured = capfd.readouterr()
    everything = captured.out + captured.err + out.read_text() + (repo / "result.json").read_text()
    assert KEY not in everything


@pytest.mark.slow  # ~95 s on the 2-core runner; the recovery test keeps the agent's loop, tools and pipeline in CI
def test_plain_text_replies_with_a_malformed_body_and_a_reply_that_is_not_code(repo: Path) -> None:
    steps = [
        reply("Let me think about the memory traffic first."),  # no code, no tool call
        {"raw": "this is not JSON"},  # a malformed body: retried
        reply(f"Here is a version:\n```python\n{WRONG}```\n"),
        reply(f"Fixed the broadcast axis:\n```python\n{RIGHT}```"),
        reply("FINISH"),
        reply("FINISH"),
    ]
    with FakeOpenAI(steps) as server:
        code, data = optimize(repo, server)
    assert code == 0
    user = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert "no tool call and no ```python block" in user[1]
    assert "FAILED (incorrect)" in user[2] and "reward" in user[3]
    assert data["best"]["reward"] >= 2 and len(data["candidates"]) == 1
    notes = data["agent_summary"]["notes"]
    assert any("malformed reply" in n for n in notes) and any("no code" in n for n in notes)


def test_an_unverified_wrong_candidate_is_checked_by_the_pipeline_and_never_suggested(repo: Path) -> None:
    steps = [
        reply(None, tool_call("write_candidate", {"source": WRONG}, "a"), tool_call("finish", {}, "b")),
        reply(None, tool_call("finish", {}, "c")),
    ]
    with FakeOpenAI(steps) as server:
        code, data = optimize(repo, server)
    assert code == 0
    (candidate,) = data["candidates"]
    assert candidate["status"] == "incorrect" and candidate["reward"] == -1
    assert data["best"] is None
    assert "Pipeline result" in tool_texts(server)[-1] and "incorrect" in tool_texts(server)[-1]


def test_wrong_key_is_explained_and_never_printed(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI([], api_key="sk-the-right-one") as server:
        code, data = optimize(repo, server)
    captured = capfd.readouterr()
    assert code == 2 and data["candidates"] == [] and data["best"] is None
    assert "refused the API key" in captured.err and "KERNELBOT_LLM_API_KEY" in captured.err
    assert KEY not in captured.out + captured.err
    history = History.open(f"sqlite:///{repo / 'history.db'}")
    turns = history.get_run(1).operators[0].transcript  # stored even though the agent could not work
    history.close()
    assert turns and all(KEY not in t.content for t in turns)


# -- the agent on its own (no pipeline): endpoint failures, budgets, repeats --------------------


@pytest.fixture()
def task(repo: Path) -> Task:
    config = load_config(repo)
    spec, root = resolve_operator("ops/diag.py", repo, config)
    settings = settings_for(config, None)
    return Task(
        spec, root, "cpu", (root / spec.path).read_text(), PrecisionPolicy(), {"eager_ms": 50.0}, 8, settings
    )


def agent_for(repo: Path, endpoint: Endpoint, **limits: Any) -> LLMAgent:
    config = load_config(repo)
    return LLMAgent(
        endpoint, Limits(**limits), config=config, fingerprint=collect("cpu"), work_dir=repo / "work"
    )


def drive(agent: LLMAgent, task: Task) -> list[Any]:
    """Propose until the agent stops, without evaluating anything (none of these tests produce a candidate)."""
    proposals: list[Any] = []
    feedback: list[Feedback] = []
    while (p := agent.propose(task, feedback)) is not None and len(proposals) < 5:
        proposals.append(p)
    return proposals


@pytest.mark.parametrize(
    ("model", "api_base", "expected"),
    [
        ("openai/no-such-model", None, "unknown model 'openai/no-such-model'"),
        ("no-provider-model", None, "name it as provider/model"),
        (FAKE, "http://127.0.0.1:9/v1", "cannot reach http://127.0.0.1:9/v1"),
    ],
)
def test_unknown_model_and_unreachable_endpoint_stop_with_a_reason(
    repo: Path, task: Task, model: str, api_base: str | None, expected: str
) -> None:
    with FakeOpenAI([]) as server:
        endpoint = Endpoint(model, api_base or server.api_base, api_key=KEY, retries=1, retry_delay_s=0.01)
        agent = agent_for(repo, endpoint)
        assert drive(agent, task) == []
    assert agent.problem is not None and expected in agent.problem
    assert agent.stop_reason is not None and agent.stop_reason.startswith("model endpoint error")


def test_timeout_is_retried_then_the_reply_is_used(repo: Path, task: Task) -> None:
    steps = [{"sleep": 2.5}, reply("nothing yet"), reply("FINISH")]
    with FakeOpenAI(steps) as server:
        agent = agent_for(
            repo, Endpoint(FAKE, server.api_base, api_key=KEY, timeout_s=1.0, retry_delay_s=0.01)
        )
        assert drive(agent, task) == []
    assert any("timeout" in n for n in agent.notes)
    assert agent.replies == 2 and agent.stop_reason == "the model finished without writing a candidate"


def test_static_check_rejections_and_repeats_stop_the_loop(repo: Path, task: Task) -> None:
    steps = [
        reply(None, tool_call("write_candidate", {"source": SNOOP}, "a")),
        reply(None, tool_call("write_candidate", {"source": SNOOP_FILE}, "b")),
        reply(None, tool_call("write_candidate", {"source": SNOOP}, "c")),
        reply(None, tool_call("write_candidate", {"source": SNOOP}, "d")),
        reply(None, tool_call("write_candidate", {"source": SNOOP}, "e")),
        reply(None, tool_call("read_file", {"path": "../../etc/passwd"}, "f")),
    ]
    with FakeOpenAI(steps) as server:
        agent = agent_for(repo, Endpoint(FAKE, server.api_base, api_key=KEY), max_repeats=3)
        assert drive(agent, task) == []
        texts = tool_texts(server)
    assert texts[0].startswith("rejected by the static check") and "urllib" in texts[0]
    assert texts[1].startswith("rejected by the static check")
    assert "identical to attempt 0" in texts[2]
    assert agent.stop_reason == "the model repeated failing candidates 3 times"
    assert agent.replies == 5  # stopped before the sixth reply


def test_read_file_stays_inside_the_repository(repo: Path, task: Task) -> None:
    steps = [
        reply(None, tool_call("read_file", {"path": "../../../etc/passwd"}, "a"),
              tool_call("read_file", {"path": "/etc/hostname"}, "b"), tool_call("read_file", {"path": "{bad"}, "c"),
              tool_call("list_files", {}, "d")),
        reply(None, tool_call("read_file", '{"path": "ops/di', "e")),  # malformed arguments
        reply("FINISH"),
    ]  # fmt: skip
    with FakeOpenAI(steps) as server:
        agent = agent_for(repo, Endpoint(FAKE, server.api_base, api_key=KEY))
        drive(agent, task)
        texts = tool_texts(server)
    assert "outside the repository" in texts[0] and "outside the repository" in texts[1]
    assert "no file" in texts[2] and "ops/diag.py" in texts[3]
    assert "not valid JSON" in texts[4]


@pytest.mark.parametrize(
    ("limits", "expected", "replies"),
    [
        ({"max_turns": 2}, "turn limit 2 reached", 2),
        ({"max_tokens": 60}, "token limit 60 reached", None),
        ({"max_cost_usd": 0.0005}, "cost limit $0.00", None),
        ({"time_s": 1.5}, "time limit", None),
    ],
)
def test_every_budget_stops_the_agent_cleanly(
    repo: Path, task: Task, limits: dict[str, Any], expected: str, replies: int | None
) -> None:
    chatter = [reply("Listing. " * 20, tool_call("list_files", {}, f"l{i}")) for i in range(8)]
    slow = [step for c in chatter for step in ({"sleep": 0.6}, c)]
    with FakeOpenAI(slow if "time_s" in limits else chatter) as server:
        agent = agent_for(repo, Endpoint(FAKE, server.api_base, api_key=KEY), **limits)
        started = time.monotonic()
        assert drive(agent, task) == []
    assert agent.stop_reason is not None and expected in agent.stop_reason, agent.stop_reason
    if replies is not None:
        assert agent.replies == replies
    if "max_cost_usd" in limits:
        assert agent.cost_usd <= limits["max_cost_usd"]  # checked before each reply, with its worst case
    if "time_s" in limits:
        assert time.monotonic() - started < limits["time_s"] + 1.5


@pytest.mark.slow  # ~65 s; the recovery test stores and exports a transcript in CI
def test_review_with_the_model_agent_stores_candidates_and_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.gitrepo_builder import GitRepoBuilder

    monkeypatch.setenv("KERNELBOT_LLM_API_KEY", KEY)
    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit({".github/kernelbot.yml": CONFIG, "ops/keep.py": DIAG.replace("N = 512", "N = 64")})
    head = repo.commit({"ops/diag.py": DIAG})
    steps = [
        reply(None, tool_call("write_candidate", {"source": RIGHT}, "a"), tool_call("finish", {}, "b")),
        reply(None, tool_call("finish", {}, "c")),
    ]
    out, url = tmp_path / "r.json", f"sqlite:///{tmp_path / 'h.db'}"
    with FakeOpenAI(steps, api_key=KEY) as server:
        code = main(
            ["review", "--repo", str(repo.root), "--base", base, "--head", head, "--device", "cpu",
             "--agent", "llm", "--model", FAKE, "--api-base", server.api_base, "--max-turns", "4",
             "--db", url, "--json", str(out), "--candidates-dir", str(tmp_path / "cands")]
        )  # fmt: skip
    assert code == 0
    (op,) = json.loads(out.read_text())["operators"]
    assert op["best_candidate"]["origin"] == f"llm:{FAKE}" and op["best_candidate"]["reward"] >= 2
    history = History.open(url)
    (stored,) = history.get_run(1).operators
    history.close()
    assert [c.reward >= 2 for c in stored.candidates] == [True]
    assert any(t.candidate == 0 and t.tool_name == "write_candidate" for t in stored.transcript)
    assert stored.transcript[1].tool_result["source"].strip() == DIAG.strip()


def test_an_endpoint_without_tools_gets_the_plain_text_protocol(repo: Path, task: Task) -> None:
    steps = [{"status": 400, "body": "tools are not supported by this server"}, reply("FINISH")]
    with FakeOpenAI(steps) as server:
        agent = agent_for(repo, Endpoint(FAKE, server.api_base, api_key=KEY))
        assert drive(agent, task) == []
    assert "tools" in server.requests[0] and "tools" not in server.requests[1]
    assert "Function calls are not available" in server.requests[1]["messages"][-1]["content"]
    assert agent.problem is None and any("plain-text protocol" in n for n in agent.notes)


def test_the_run_budget_is_shared_by_the_operators_of_a_run(repo: Path, task: Task) -> None:
    from kernelbot.agents.llm import RunBudget

    budget = RunBudget(max_cost_usd=0.004)
    chatter = [reply(None, tool_call("list_files", {}, f"l{i}")) for i in range(6)]
    with FakeOpenAI(chatter) as server:
        config = load_config(repo)
        agents = [
            LLMAgent(Endpoint(FAKE, server.api_base, api_key=KEY), Limits(max_turns=2, reply_tokens=100), config=config,
                     fingerprint=collect("cpu"), work_dir=repo / f"work{i}", run_budget=budget)
            for i in range(3)
        ]  # fmt: skip
        for agent in agents:
            drive(agent, task)
    assert agents[0].stop_reason == "turn limit 2 reached" and agents[0].cost_usd > 0
    assert agents[1].replies == 1 and budget.cost_usd <= 0.004  # each reply's worst case is checked first
    assert agents[-1].replies == 0 and (agents[-1].stop_reason or "").startswith("run cost limit $0.00")


def test_no_model_named_is_a_usage_problem_before_any_work(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["optimize", "ops/diag.py", "--agent", "llm", "--device", "cpu", "--out", str(repo / "out")])
    assert code == 2 and "--agent llm needs a model" in " ".join(capsys.readouterr().err.split())
    assert not (repo / "out").exists()


def test_the_config_agent_kind_is_the_default_agent(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`agent: {kind: llm}` in .github/kernelbot.yml makes optimize and review use the model agent unasked."""
    cfg = repo / ".github" / "kernelbot.yml"
    cfg.write_text(CONFIG.replace("agent:\n", "agent:\n  kind: llm\n"))
    assert main(["optimize", "ops/diag.py", "--device", "cpu", "--out", str(repo / "out")]) == 2
    assert "--agent llm needs a model" in " ".join(capsys.readouterr().err.split())
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "ops"], check=True)
    assert main(["review", "--repo", str(repo), "--base", "HEAD", "--device", "cpu"]) == 2
    assert "--agent llm needs a model" in " ".join(capsys.readouterr().err.split())
    assert not (repo / "out").exists()
