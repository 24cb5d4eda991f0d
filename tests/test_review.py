"""`kernelbot review` end to end on a real git repository: every verdict, storage first, bad input."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main
from kernelbot.errors import KernelbotError
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
    # An edit that does not change the work: never a change. Under load the interval can be too wide to call
    # it unchanged ("ambiguous", seen once in a CI run beside other jobs); it still holds 1 then. Called
    # unchanged, its interval is inside the threshold, not necessarily around 1 (the edited code may differ
    # by a real 1%: seen, 0.96-0.995, on a loaded machine).
    edited = ops["ops/edited"]
    assert edited["change"] == "modified" and edited["verdict"] in ("no_change", "ambiguous"), edited
    low, high = edited["ratio_ci99"]
    if edited["verdict"] == "ambiguous":
        assert low <= 1.0 <= high, edited
    else:
        assert 1 - edited["threshold"] <= low <= high <= 1 + edited["threshold"], edited  # stats._judged
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
    # A 7 us operator on a shared 2-core runner: whole batches run 2x slow at random (measured: batch medians
    # of 5.6 to 12.4 us in one A/A run), so 16 rounds do not always settle +-25%. It must never be called a
    # change; "ambiguous" is the honest answer when the interval straddles the threshold.
    assert ops["scaled_add"]["verdict"] in ("no_change", "ambiguous")
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
        started, finished = conn.execute("select started_at, finished_at from runs").fetchone()
    measured = sum((op["base"] is not None) + (op["head"] is not None) for op in data["operators"])
    assert rows == measured
    assert started < finished  # the run's real start, not the moment it was stored


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
    repo, _, previous = history_repo
    head = repo.commit({"ops/fresh.py": matmul_op(1)}, message="one operator added")
    code = review(
        repo,
        previous,
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


@pytest.mark.slow  # ~100 s; test_every_verdict_is_right (an edit calls no change) and test_stats' A/A simulations stay in CI
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


def test_the_run_budget_bounds_the_whole_review(
    history_repo: tuple[GitRepoBuilder, str, str], tmp_path: Path
) -> None:
    """--time is one budget for all operators: those it leaves no time for are listed as not measured."""
    repo, _, head = history_repo
    started = time.monotonic()
    code = review(
        repo,
        head,
        head,
        "--all",
        "--time",
        "20",
        "--json",
        str(tmp_path / "t.json"),
        "--db",
        f"sqlite:///{tmp_path / 'h.db'}",
    )
    wall = time.monotonic() - started
    data = json.loads((tmp_path / "t.json").read_text())
    assert code == 0 and data["time_budget_s"] == 20
    assert wall < 20 + 20, wall  # the bound, plus worktrees, storing and the process's own start
    cut = [op for op in data["operators"] if op["stopped_by"] == "time"]
    started_ops = [op for op in data["operators"] if op["stopped_by"] is None]
    assert started_ops and cut and len(cut) + len(started_ops) == len(data["operators"]) >= 5
    assert all(
        op["error"].startswith(
            ("not measured: the run's time budget of 20 s", "not finished: the run's time")
        )
        and op["verdict"] is None
        for op in cut
    )
    assert any("time budget (20 s) ended before" in w for w in data["warnings"])
    assert f"{len(cut)} not measured" in data["summary"]


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


@pytest.mark.slow  # ~90 s; the Action's test of a verified suggestion (search agent, review, comment) stays in CI
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
    cands = tmp_path / "cands"  # candidates/ and the winner's drop-in file, one level each
    assert (cands / "candidates").is_dir() and not (cands / "candidates" / "candidates").exists()
    assert (cands / "ops_diag_kernelbot.py").is_file()
    md = (tmp_path / "c.md").read_text()
    assert "Faster verified kernel for <code>ops/diag</code>" in md and "```python" in md
    assert "| `ops/diag` | added |" in md and "diag-matmul-broadcast" in md
    assert "Reward (CUDA Agent's milestones" in md  # the reward column explained where a candidate is shown
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


def test_a_spent_budget_never_fails_the_gate_nor_hides_what_needs_no_timing(
    history_repo: tuple[GitRepoBuilder, str, str], tmp_path: Path
) -> None:
    """--time too short for any timing: nothing is "broken at head", cosmetic changes are still listed."""
    repo, base, head = history_repo
    code = review(repo, base, head, "--time", "5", "--fail-on-regression", "--json", str(tmp_path / "t.json"),
                  "--db", f"sqlite:///{tmp_path / 'h.db'}")  # fmt: skip
    ops = by_name(json.loads((tmp_path / "t.json").read_text()))
    assert code == 0
    assert ops["ops/cosmetic"]["change"] == "cosmetic" and ops["ops/cosmetic"]["stopped_by"] is None
    assert ops["ops/cosmetic"]["error"] is None
    timed = [op for name, op in ops.items() if name != "ops/cosmetic"]
    assert timed and all(op["stopped_by"] == "time" and op["verdict"] is None for op in timed)


def test_agents_share_what_measuring_the_rest_leaves() -> None:
    from kernelbot.pipeline.review import MEASURE_GUESS_S, _optimize_time

    pending = 2  # operators still to measure
    # 300 s left, measuring took 20 s so far: 40 s kept for the two, the rest shared by three agents.
    assert _optimize_time(300.0, pending, 3, [20.0], 900.0) == pytest.approx((300 - 40) / 3)
    assert _optimize_time(300.0, pending, 3, [], 900.0) == pytest.approx((300 - 2 * MEASURE_GUESS_S) / 3)
    assert _optimize_time(10_000.0, 0, 1, [20.0], 900.0) == 900.0  # never past agent.time_s
    assert _optimize_time(50.0, pending, 2, [40.0], 900.0) < 0  # nothing left: the caller skips the agent


def test_the_run_directory_in_a_reviewed_repository_ignores_itself(tmp_path: Path) -> None:
    import subprocess

    from kernelbot.gitrepo import work_dir

    repo = GitRepoBuilder(tmp_path / "repo")
    repo.commit({"ops/a.py": matmul_op(1)}, message="one")
    (work_dir(repo.root) / "candidates").mkdir()
    (work_dir(repo.root) / "candidates" / "best.py").write_text("x = 1\n")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo.root,
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0 and status.stdout == ""


def test_a_candidate_faster_only_against_cached_baselines_is_explained() -> None:
    """No suggestion although a candidate looked 8x faster: the comment says why (not timed side by side)."""
    import types

    from kernelbot.pipeline.results import OperatorResult
    from kernelbot.pipeline.review import _optimize

    looked = types.SimpleNamespace(origin="diag-matmul-broadcast", provisional_reward=3, speedup_vs_eager=8.2)
    outcome = types.SimpleNamespace(best=None, candidates=[looked], stopped_by="time")
    result = OperatorResult("ops/d", "ops/d.py", "added", [], 0.03)
    _optimize(result, lambda *_: outcome, None, Path("."), None, 60.0, None)  # type: ignore[arg-type]
    assert result.best_candidate is None and result.error is None
    [note] = result.notes
    assert note.startswith(
        "diag-matmul-broadcast looked 8.20× faster than eager against the cached baselines"
    )
    assert "its time ran out first" in note


def test_a_search_that_found_nothing_faster_says_what_its_best_scored() -> None:
    """The agent ran and wrote candidates, none with reward 2 or 3: the comment says what the best scored."""
    import types

    from kernelbot.pipeline.results import OperatorResult
    from kernelbot.pipeline.review import _optimize

    tried = [
        types.SimpleNamespace(
            origin="compile-max-autotune",
            provisional_reward=None,
            speedup_vs_eager=0.4,
            reward=1,
            side_by_side=None,
        ),
        types.SimpleNamespace(
            origin="tf32x3-matmul",
            provisional_reward=None,
            speedup_vs_eager=None,
            reward=-1,
            side_by_side=None,
        ),
    ]
    outcome = types.SimpleNamespace(best=None, candidates=tried, stopped_by="exhausted")
    result = OperatorResult("ops/r", "ops/r.py", "modified", [], 0.03)
    _optimize(result, lambda *_: outcome, None, Path("."), None, 60.0, None)  # type: ignore[arg-type]
    assert result.notes == [
        "2 candidates tried, none more than 5% faster than eager (reward 2); the best, compile-max-autotune, "
        "0.40× eager (reward 1)"
    ]


def test_a_faster_median_without_a_reward_names_the_interval_that_kept_it() -> None:
    """2.32x eager side by side and reward 1 (a loaded CPU: 99% interval 0.80-3.10x after 8 rounds): the
    note says why, not just the ratio, which read as a bug."""
    import types

    from kernelbot.pipeline.optimize import why_nothing_suggested

    evidence = {"rounds": 8, "speedup_vs_eager": 2.32, "speedup_vs_eager_ci99": [0.80, 3.10]}
    noisy = types.SimpleNamespace(
        origin="compile-max-autotune",
        provisional_reward=None,
        speedup_vs_eager=2.32,
        reward=1,
        side_by_side=evidence,
    )
    outcome = types.SimpleNamespace(best=None, candidates=[noisy], stopped_by="exhausted")
    assert why_nothing_suggested(outcome) == (  # type: ignore[arg-type]
        "1 candidate tried, none more than 5% faster than eager (reward 2); the best, compile-max-autotune, "
        "2.32× eager (reward 1): its 99% interval side by side, 0.80–3.10× after 8 rounds, does not clear 1.05× "
        "(a quieter machine or more --time narrows it)"
    )
    # A slower candidate keeps the plain line: its interval is not the reason.
    slow = types.SimpleNamespace(**{**vars(noisy), "speedup_vs_eager": 0.9})
    outcome.candidates = [slow]
    assert why_nothing_suggested(outcome).endswith("0.90× eager (reward 1)")  # type: ignore[arg-type,union-attr]


def test_a_fast_candidate_left_at_reward_1_is_marked_and_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    """reduce-before-matmul+compile-max-autotune at 16.7x eager but reward 1 (a held-out problem on the CPU):
    only the best so far is timed side by side, and the table now says so instead of a bare 1."""
    import types

    from rich.console import Console

    from kernelbot import console
    from kernelbot.commands.optimize import render as render_table

    def candidate(
        origin: str, ms: float, ratio: float, reward: int, **extra: object
    ) -> types.SimpleNamespace:
        timing = types.SimpleNamespace(median_ms=ms)
        ev = types.SimpleNamespace(timing=timing, status="ok", reason="")
        fields = {"side_by_side": None, "provisional_reward": None, "speedup_vs_compile": ratio, **extra}
        return types.SimpleNamespace(
            origin=origin, evaluation=ev, speedup_vs_eager=ratio, reward=reward, **fields
        )

    sbs = {"rounds": 8, "speedup_vs_eager_ci99": [37.51, 38.46], "speedup_vs_compile_ci99": [30.02, 31.2]}
    best = candidate("reduce-before-matmul", 4.5, 37.8, 3, side_by_side=sbs)
    later = candidate("reduce-before-matmul+compile-max-autotune", 10.8, 16.7, 1, provisional_reward=3)
    eager = types.SimpleNamespace(timing=types.SimpleNamespace(median_ms=180.9))
    check = types.SimpleNamespace(
        spec=types.SimpleNamespace(name="08_matmul_rowsum"), eager=eager, compiled=None
    )
    result = types.SimpleNamespace(candidates=[best, later], check=check, best=best, best_path="out.py")
    term = Console(width=200, record=True, color_system=None)
    monkeypatch.setattr(console, "err", term)
    render_table(result)  # type: ignore[arg-type]
    text = " ".join(term.export_text().split())  # the note wraps at the console's width
    assert "1 ‡" in text and "3 ‡" not in text
    assert "37.80× † [37.51–38.46]" in text and "[30.02–31.20]" in text, text  # the interval with the point
    assert "reward would be 3 (reduce-before-matmul+compile-max-autotune)" in text


def test_a_report_stored_before_notes_existed_still_renders() -> None:
    """publish --run-id renders stored reports of earlier versions: a missing key is not an error."""
    from kernelbot.render import render

    device = {
        "gpu": None,
        "cpu": "x",
        "device": "cpu",
        "driver": "",
        "cuda": "",
        "torch": "2",
        "cupy": "",
        "kernelbot": "0",
    }
    op = {"name": "ops/a", "path": "ops/a.py", "change": "added", "base": None, "head": None, "ratio": None,
          "p_value": None, "verdict": None, "best_candidate": None, "error": None}  # fmt: skip
    text = render("comment.md.j2", review={"base": "a" * 40, "head": "b" * 40, "device": device, "run_id": 3,
                                           "warnings": [], "operators": [op]}, summary="1 added")  # fmt: skip
    assert "| `ops/a` | added |" in text and "**Notes**" not in text


def test_an_operators_name_cannot_break_out_of_the_comment() -> None:
    """Attacker round 56: a PR's file name with a backtick, a pipe, an unclosed HTML comment and the sticky
    marker closed the table's code span and hid the regression row after it (in the comment, the check run's
    summary and the weekly report). Names are code spans now: escaped, one line, one cell."""
    from kernelbot.render import STICKY_MARKER, code, render

    device = {"gpu": None, "cpu": "x", "device": "cpu", "driver": "", "cuda": "", "torch": "2", "cupy": "",
              "kernelbot": "0"}  # fmt: skip
    evil = "ops/x` | ✅ safe | <!-- " + STICKY_MARKER + "\n::stop-commands::kb\n@octocat `` y"
    assert code("a`b") == "``a`b``" and code("`a") == "`` `a ``" and code("a|b") == "`a\\|b`"
    ops = [
        {"name": evil, "path": evil + ".py", "change": "added", "base": None, "head": None, "ratio": None,
         "p_value": None, "verdict": None, "best_candidate": None, "error": "broken <b>", "notes": ["n"]},
        {"name": "ops/slow", "path": "ops/slow.py", "change": "modified", "base": None, "head": None,
         "ratio": 4.2, "p_value": 0.001, "verdict": "regression", "best_candidate": None, "error": None},
    ]  # fmt: skip
    text = render("comment.md.j2", review={"base": "a" * 40, "head": "b" * 40, "device": device, "run_id": 3,
                                           "warnings": [], "operators": ops}, summary="1 regression")  # fmt: skip
    assert text.startswith(STICKY_MARKER) and text.count(STICKY_MARKER) == 1
    assert "<!--" not in text.replace(STICKY_MARKER, "") and not any(
        line.startswith("::") for line in text.splitlines()
    )
    rows = [line for line in text.splitlines() if line.startswith("| ") and "added" in line]
    assert len(rows) == 1 and rows[0].replace("\\|", "").count("|") == 11, rows  # 10 cells, one row
    assert "| `ops/slow` | modified |" in text and "regression" in text.split("`ops/slow`")[1]


def test_only_the_operators_a_command_names_are_optimized_and_share_the_agents_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/kernelbot optimize ops/b`: the agent works on ops/b alone and gets the whole share (measuring is
    stubbed here; what is checked is who is optimized and with how much time)."""
    from kernelbot.fingerprint import collect
    from kernelbot.harness.results import Evaluation
    from kernelbot.pipeline import review as pipeline

    repo = GitRepoBuilder(tmp_path / "repo")
    base = repo.commit({f"ops/{n}.py": matmul_op(1) for n in "abc"}, message="base")
    head = repo.commit({f"ops/{n}.py": matmul_op(2) for n in "abc"}, message="head")

    def measured(target: Any, base_root: Path, head_root: Path, base_cfg: Any, head_cfg: Any, *_: Any) -> Any:
        result = pipeline._result(target, base_root, head_root, head_cfg)
        result.head = Evaluation("operator", "ok")
        return result

    monkeypatch.setattr(pipeline, "_measure", measured)
    given: dict[str, float] = {}

    def optimizer(spec: Any, root: Path, config: Any, time_s: float, gpu: str | None = None) -> Any:
        given[spec.name] = time_s
        raise KernelbotError("not run in this test")

    pipeline.run_review(repo.root, base, head, collect("cpu"), optimizer=optimizer, time_s=400.0,
                        optimize_only=("ops/b",))  # fmt: skip
    assert list(given) == ["ops/b"]
    # ops/c is still to measure after ops/b (about nothing kept for it: stubbed measuring takes no time), and
    # it is not named: the whole rest is ops/b's (agent.time_s, 900 s, is more). Shared with ops/c, ~200 s.
    assert given["ops/b"] > 390.0
