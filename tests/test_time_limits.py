"""`optimize --time` is a hard bound, and a hung candidate is stopped at a limit scaled to the operator, not at
the harness's 300 s (issue: real-size operators). Real sandboxes, real waiting: about two minutes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kernelbot.cli import main
from kernelbot.harness.evaluate import OUT_OF_TIME

CONFIG = """\
harness:
  time_budget_s: 0.3
  max_samples: 20
  timeout_s: 300   # the default: what a hung candidate used to cost per request
"""

# About 10 ms an eager call on the CI's CPU.
OPERATOR = """
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(384, 384) / 20)

    def forward(self, x):
        for _ in range(12):
            x = torch.tanh(x @ self.w)
        return x

def get_inputs():
    return [torch.randn(384, 384)]

def get_init_inputs():
    return []
"""

CANDIDATE = """
import time
import torch

class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(384, 384) / 20)

    def forward(self, x):
        {wait}
        for _ in range(12):
            x = torch.tanh(x @ self.w)
        return x
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("limits")
    (root / ".github").mkdir()
    (root / ".github" / "kernelbot.yml").write_text(CONFIG)
    (root / "op.py").write_text(OPERATOR)
    (root / "hang.py").write_text(CANDIDATE.format(wait="while True:\n            pass"))
    # checked twice per seed (5 seeds by default): each evaluation takes well over 40 s
    (root / "slow.py").write_text(CANDIDATE.format(wait="time.sleep(4.0)"))
    return root


def _optimize(
    repo: Path, out: Path, *candidates: str, extra: tuple[str, ...] = ()
) -> tuple[int, dict, float]:
    started = time.monotonic()
    argv = ["optimize", str(repo / "op.py"), "--repo", str(repo), "--device", "cpu", "--agent", "replay"]
    argv += ["--candidates", *[str(repo / c) for c in candidates]]
    code = main([*argv, "--out", str(out), "--json", str(out / "r.json"), *extra])
    return code, json.loads((out / "r.json").read_text()), time.monotonic() - started


def test_a_hung_candidate_of_a_10_ms_operator_is_stopped_within_90_s(repo: Path, tmp_path: Path) -> None:
    code, data, _ = _optimize(repo, tmp_path, "hang.py")
    assert code == 0
    eager_ms = data["baselines"]["eager"]["timing"]["median_ms"]
    # The operator is of the size this test is about (~10 ms idle; 54 ms seen on a loaded 2-core box, where
    # the limit, derived from it, still stopped the hang in 67 s).
    assert 2 < eager_ms < 100, eager_ms
    (hung,) = data["candidates"]
    assert hung["status"] == "timeout" and hung["wall_s"] < 90, hung


def test_time_is_a_hard_bound_with_a_json_result(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, wall = _optimize(repo, tmp_path, "slow.py", "slow.py", "slow.py", extra=("--time", "60"))
    assert code == 0 and wall < 70, wall
    assert data["stopped_by"] == "time"
    assert data["candidates"] and data["candidates"][-1]["reason"] == OUT_OF_TIME
    # the table shows the cut candidate as not finished, without the -1 that reads "wrong" (a newcomer's find)
    assert "not finished" in capsys.readouterr().err
    assert set(data["wall_s"]) == {"baselines", "analysis"}
