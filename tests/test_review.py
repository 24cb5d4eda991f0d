"""`kernelbot review` end to end on a real git repository: every verdict, storage first, bad input."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from kernelbot.cli import main
from tests.gitrepo_builder import GitRepoBuilder
from tests.ops import matmul_op

CONFIG = """\
harness:
  time_budget_s: 1.0
  max_samples: 40
  timeout_s: 120
thresholds:
  regression: 0.25   # CPU timings on a shared 2-core box are noisy; planted changes are 3x or more
operators:
  - name: scaled_add
    callable: "kern/scaled_add.py:scaled_add"
    inputs: "kern/scaled_add.py:make_inputs"
    sources: [csrc/scaled_add.cu]
    shapes: [[64, 64]]   # cache-resident: at 256x256 the 64 rotated input sets stream from memory, and A/A intervals reached +-25%
"""


SCALED_ADD = """
import torch

def scaled_add(x, y):
    return x * 2.0 + y

def make_inputs(shape, dtype):
    return [torch.randn(*shape, dtype=dtype), torch.randn(*shape, dtype=dtype)]
"""

CU = 'extern "C" __global__ void scaled_add(const float* x, const float* y, float* o, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) o[i] = 2.0f * x[i] + y[i];\n}\n'


@pytest.fixture(scope="module")
def history_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepoBuilder, str, str]:
    repo = GitRepoBuilder(tmp_path_factory.mktemp("review") / "repo")
    base = repo.commit(
        {
            ".github/kernelbot.yml": CONFIG,
            "ops/slowed.py": matmul_op(1),
            "ops/sped_up.py": matmul_op(4),
            "ops/edited.py": matmul_op(2),
            "ops/cosmetic.py": matmul_op(1),
            "ops/removed.py": matmul_op(3),
            "kern/scaled_add.py": SCALED_ADD,
            "csrc/scaled_add.cu": CU,
        },
        message="base",
    )
    head = repo.commit(
        {
            "ops/slowed.py": matmul_op(4),
            "ops/sped_up.py": matmul_op(1),
            "ops/edited.py": matmul_op(2).replace("y = y + x @ self.w", "y = (x @ self.w) + y"),
            "ops/cosmetic.py": matmul_op(1, extra="# a comment only\n"),
            "ops/removed.py": None,
            "ops/added.py": matmul_op(1),
            "csrc/scaled_add.cu": CU.replace("2.0f * x[i]", "x[i] * 2.0f"),
        },
        message="head",
    )
    return repo, base, head


@pytest.fixture(scope="module")
def reviewed(history_repo: tuple[GitRepoBuilder, str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    repo, base, head = history_repo
    out = tmp_path_factory.mktemp("out")
    db = out / "history.db"
    code = review(
        repo,
        base,
        head,
        "--db",
        f"sqlite:///{db}",
        "--json",
        str(out / "r.json"),
        "--out",
        str(out / "comment.md"),
        "--fail-on-regression",
    )
    data = json.loads((out / "r.json").read_text())
    return {"code": code, "json": data, "md": (out / "comment.md").read_text(), "db": db}


def review(repo: GitRepoBuilder, base: str, head: str, *args: str) -> int:
    """`kernelbot review` of repo from base to head on the CPU, with extra arguments."""
    return main(
        ["review", "--repo", str(repo.root), "--base", base, "--head", head, "--device", "cpu", *args]
    )


def by_name(data: dict) -> dict[str, dict]:
    return {op["name"]: op for op in data["operators"]}


def test_every_verdict_is_right(reviewed: dict) -> None:
    ops = by_name(reviewed["json"])
    assert ops["ops/slowed"]["change"] == "modified" and ops["ops/slowed"]["verdict"] == "regression"
    assert ops["ops/slowed"]["ratio"] > 1.5
    assert ops["ops/sped_up"]["verdict"] == "improvement" and ops["ops/sped_up"]["ratio"] < 0.67
    assert ops["ops/edited"]["change"] == "modified" and ops["ops/edited"]["verdict"] == "no_change"
    assert (
        ops["ops/cosmetic"]["change"] == "cosmetic" and ops["ops/cosmetic"]["head"] is None
    )  # not re-measured
    assert (
        ops["ops/removed"]["change"] == "removed"
        and ops["ops/removed"]["head"] is None
        and ops["ops/removed"]["verdict"] is None
    )
    assert (
        ops["ops/added"]["change"] == "added"
        and ops["ops/added"]["base"] is None
        and ops["ops/added"]["head"]["status"] == "ok"
    )
    assert ops["scaled_add"]["change"] == "modified" and any(
        "scaled_add.cu" in r for r in ops["scaled_add"]["reasons"]
    )
    assert ops["scaled_add"]["verdict"] == "no_change"
    for op in ops.values():
        assert op["best_candidate"] is None  # no agent ran
        if op["verdict"] in ("regression", "improvement", "no_change"):
            assert 0 <= op["p_value"] <= 1 and op["base"]["timing"]["samples"] >= 10


def test_fail_on_regression_exits_one(reviewed: dict) -> None:
    assert reviewed["code"] == 1


def test_run_is_stored_with_every_sample(reviewed: dict) -> None:
    data = reviewed["json"]
    assert isinstance(data["run_id"], int)
    with sqlite3.connect(reviewed["db"]) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        assert "measurements" in tables or "measurement" in tables
        table = "measurements" if "measurements" in tables else "measurement"
        rows = conn.execute(f"select count(*) from {table}").fetchone()[0]
    measured = sum((op["base"] is not None) + (op["head"] is not None) for op in data["operators"])
    assert rows == measured


def test_comment_has_table_summary_and_marker(reviewed: dict) -> None:
    md = reviewed["md"]
    assert md.startswith("<!-- kernelbot:sticky-comment -->")
    assert "| `ops/slowed` | modified |" in md and "regression" in md
    assert "1 regression" in md.splitlines()[1] or "1 regression" in md
    assert "torch " in md and "How this was measured" in md


def test_unknown_revision_is_one_clear_line(
    history_repo: tuple[GitRepoBuilder, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _, head = history_repo
    assert review(repo, "no-such-branch", head) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-branch" in err[0]


def test_unreachable_database_keeps_the_results(
    history_repo: tuple[GitRepoBuilder, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, base, _ = history_repo
    head = repo.commit({"ops/added.py": matmul_op(1)}, message="only added")
    code = review(
        repo,
        base,
        head,
        "--db",
        "postgresql+psycopg://kb:secret@127.0.0.1:9/none",
        "--json",
        str(tmp_path / "r.json"),
    )
    err = capsys.readouterr().err
    assert code == 0
    assert "secret" not in err and "saved to" in err
    saved = list((repo.root / ".kernelbot").glob("unsaved-run-*.json"))
    assert saved and json.loads(saved[0].read_text())["head"] == head
    assert json.loads((tmp_path / "r.json").read_text())["run_id"] is None


def test_a_a_review_calls_no_regression(
    history_repo: tuple[GitRepoBuilder, str, str], tmp_path: Path
) -> None:
    repo, _, head = history_repo
    code = review(
        repo,
        head,
        head,
        "--all",
        "--db",
        f"sqlite:///{tmp_path / 'h.db'}",
        "--json",
        str(tmp_path / "aa.json"),
        "--fail-on-regression",
    )
    data = json.loads((tmp_path / "aa.json").read_text())
    assert code == 0
    assert len(data["operators"]) >= 5 and all(op["change"] == "unchanged" for op in data["operators"])
    assert not [op["name"] for op in data["operators"] if op["verdict"] in ("regression", "improvement")]


DIAG_OP = """
import torch

class Model(torch.nn.Module):
    def forward(self, v, x):
        return torch.diag(v) @ x

def get_inputs():
    return [torch.randn(512), torch.randn(512, 512)]

def get_init_inputs():
    return []
"""


def test_review_with_search_agent_suggests_a_verified_kernel(tmp_path: Path) -> None:
    repo = GitRepoBuilder(tmp_path / "repo")
    config = CONFIG.split("operators:")[0] + "agent:\n  budget: 1\n"
    base = repo.commit({".github/kernelbot.yml": config, "ops/keep.py": matmul_op(1)})
    head = repo.commit({"ops/diag.py": DIAG_OP})
    out = tmp_path / "r.json"
    code = review(
        repo,
        base,
        head,
        "--agent",
        "search",
        "--db",
        f"sqlite:///{tmp_path / 'h.db'}",
        "--json",
        str(out),
        "--out",
        str(tmp_path / "c.md"),
        "--candidates-dir",
        str(tmp_path / "cands"),
    )
    assert code == 0
    (op,) = json.loads(out.read_text())["operators"]
    best = op["best_candidate"]
    assert best["origin"] == "diag-matmul-broadcast" and best["status"] == "ok" and best["reward"] >= 2
    assert "class ModelNew" in best["source"]
    md = (tmp_path / "c.md").read_text()
    assert "Faster verified kernel for <code>ops/diag</code>" in md and "```python" in md
    assert "| `ops/diag` | added |" in md and "diag-matmul-broadcast" in md
    with sqlite3.connect(tmp_path / "h.db") as conn:
        (stored,) = conn.execute("select count(*) from candidates where reward >= 2").fetchone()
    assert stored >= 1


BROKEN = matmul_op(1).replace(
    "y = x @ self.w", "y = x @ self.w\n        raise RuntimeError('broken on purpose')"
)


def test_operator_broken_on_one_side_is_an_error_naming_the_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepoBuilder(tmp_path / "repo")
    config = CONFIG.split("operators:")[0]
    base = repo.commit(
        {".github/kernelbot.yml": config, "ops/fixed.py": BROKEN, "ops/breaks.py": matmul_op(1)}
    )
    head = repo.commit({"ops/fixed.py": matmul_op(2), "ops/breaks.py": BROKEN})
    (repo.root / "scratch.txt").write_text("not committed")
    repo.git("add", "scratch.txt")  # a dirty work tree: head is still the commit, and the run says so
    out = tmp_path / "r.json"
    code = review(
        repo, base, head, "--db", f"sqlite:///{tmp_path / 'h.db'}", "--json", str(out), "--fail-on-regression"
    )
    data = json.loads(out.read_text())
    ops = by_name(data)
    assert ops["ops/fixed"]["verdict"] == "error" and ops["ops/fixed"]["error"].startswith("base: ")
    assert "broken on purpose" in ops["ops/fixed"]["error"] and ops["ops/fixed"]["head"]["status"] == "ok"
    assert ops["ops/breaks"]["verdict"] == "error" and ops["ops/breaks"]["error"].startswith("head: ")
    assert ops["ops/breaks"]["base"]["status"] == "ok"
    assert code == 1  # broken at head fails the gate like a regression
    assert any("uncommitted" in w and "scratch.txt" in w for w in data["warnings"])
    assert "Traceback" not in capsys.readouterr().err
