"""`kernelbot export trajectories`: stored agent transcripts become one JSON line per optimization task."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main
from kernelbot.history import (
    CandidateRecord,
    History,
    MeasurementRecord,
    OperatorRecord,
    RunRecord,
    TurnRecord,
)
from kernelbot.reports.export import final_candidate, messages

OPERATOR = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, A, B):\n        return torch.diag(A) @ B\n"
GOOD = "class ModelNew: ...  # broadcast\n"
BAD = "class ModelNew: ...  # wrong axis\n"


def transcript(linked: int | None = 1, model: str = "openai/fake-kernel-model") -> list[TurnRecord]:
    task = {"kind": "task", "operator": "ops/diag", "path": "ops/diag.py", "model": model, "device": "cpu",
            "source": OPERATOR, "facts": {"eager_ms": 12.0}}  # fmt: skip
    call = {"id": "c1", "name": "write_candidate", "arguments": json.dumps({"source": GOOD})}
    return [
        TurnRecord(0, "system", "You are a GPU kernel engineer."),
        TurnRecord(1, "user", "Operator ops/diag ...", tool_result=task),
        TurnRecord(2, "assistant", "", tool_name="write_candidate", tool_args=[call], tokens_in=900,
                   tokens_out=40, cost_usd=0.001, elapsed_s=0.2, candidate=linked),
        TurnRecord(3, "tool", "written as attempt 0", tool_name="write_candidate",
                   tool_args={"source": GOOD}, tool_result={"call_id": "c1"}, candidate=linked),
        TurnRecord(4, "event", "rate limited (HTTP 429); waiting 1.0 s as the endpoint asked"),
        TurnRecord(5, "user", "Reply with an improved block, or FINISH."),
    ]  # fmt: skip


def candidate(source: str, reward: Any, speedup: float | None) -> CandidateRecord:
    status = "ok" if reward > 0 else "incorrect"
    return CandidateRecord(
        source, "llm:openai/fake-kernel-model", status, reward, speedup, None,
        measurement=MeasurementRecord("candidate", status, median_ms=1.0 if reward > 0 else None),
    )  # fmt: skip


def run(started: datetime, candidates: list[CandidateRecord], turns: list[TurnRecord]) -> RunRecord:
    op = OperatorRecord(
        "ops/diag", "ops/diag.py", "a" * 64, "unchanged", candidates=candidates, transcript=turns
    )
    plain = OperatorRecord("ops/other", "ops/other.py", "b" * 64, "unchanged")  # no agent: not exported
    return RunRecord("me/repo", "local", None, started_at=started, operators=[op, plain])


@pytest.fixture()
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    history = History.open(url)
    history.record_run(
        run(
            datetime(2026, 1, 5, tzinfo=UTC),
            [candidate(BAD, -1, None), candidate(GOOD, 3, 11.5)],
            transcript(),
        )
    )
    history.record_run(run(datetime(2026, 2, 1, tzinfo=UTC), [candidate(BAD, -1, None)], transcript(0)))
    history.record_run(RunRecord("me/repo", "pull_request", "f" * 40, operators=[]))  # no transcript at all
    history.close()
    return url


def export(db: str, out: Path, *args: str) -> list[dict[str, Any]]:
    assert main(["export", "trajectories", "--db", db, "--out", str(out), *args]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_one_line_per_task_with_operator_turns_and_final_candidate(db: str, tmp_path: Path) -> None:
    lines = export(db, tmp_path / "all.jsonl")
    assert len(lines) == 2
    first = lines[0]
    assert first["format"] == "kernelbot.trajectory" and first["format_version"] == 1
    assert first["operator"]["source"] == OPERATOR and first["operator"]["name"] == "ops/diag"
    assert first["model"] == "openai/fake-kernel-model"
    assert first["final"]["source"] == GOOD and first["final"]["index"] == 1
    assert first["reward"] == 3 and first["suggested"] is True
    assert [c["reward"] for c in first["candidates"]] == [-1, 3]
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert first["messages"][2]["tool_calls"][0]["function"]["name"] == "write_candidate"
    assert first["messages"][3]["tool_call_id"] == "c1"
    assert len(first["turns"]) == 6 and first["turns"][4]["role"] == "event"  # events kept in turns only
    assert first["totals"]["tokens_in"] == 900 and first["totals"]["cost_usd"] == pytest.approx(0.001)
    second = lines[1]
    assert second["reward"] == -1 and second["suggested"] is False and second["final"]["source"] == BAD


def test_since_and_min_reward_filter(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [x["reward"] for x in export(db, tmp_path / "a.jsonl", "--since", "2026-01-20")] == [-1]
    assert [x["reward"] for x in export(db, tmp_path / "b.jsonl", "--min-reward", "2")] == [3]
    assert "1 below reward 2" in " ".join(capsys.readouterr().err.split())
    assert export(db, tmp_path / "c.jsonl", "--since", "2026-03-01T00:00:00+00:00") == []


def test_bad_since_is_a_usage_error(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["export", "trajectories", "--db", db, "--out", str(tmp_path / "x.jsonl"), "--since", "last week"]
    )
    assert code == 2 and "--since 'last week' is not a date" in capsys.readouterr().err


def test_messages_and_final_candidate_rules() -> None:
    assert [m["role"] for m in messages(transcript())] == ["system", "user", "assistant", "tool", "user"]
    assert final_candidate([]) is None
    tie = [candidate(BAD, -1, None), candidate(BAD + "#2", -1, None)]
    assert final_candidate(tie) == (1, tie[1])  # the latest attempt among equals
    fast = [candidate(GOOD, 2, 30.0), candidate(GOOD + "#", 3, 2.0), candidate(GOOD + "##", 3, 5.0)]
    assert final_candidate(fast) == (2, fast[2])  # reward first, then speed
