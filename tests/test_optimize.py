"""`kernelbot optimize`: the search agent finds verified speedups; cheats fed by a replay agent are never suggested."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelbot.cli import main
from tests.ops import FAST_CONFIG, diag_op, write_repo

ADVERSARIAL = Path(__file__).parent / "adversarial"

DIAG = diag_op(512)

ROWSUM = """
import torch

class Model(torch.nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = torch.nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.lin(x).sum(dim=1, keepdim=True)

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return [512, 1024]
"""


ROWMEAN = ROWSUM.replace(
    "self.lin(x).sum(dim=1, keepdim=True)", "torch.mean(self.lin(x), dim=1, keepdim=True)"
)

# The shape of problem 29: a scaling by a constant between the product and the mean.
SCALED_MEAN = ROWSUM.replace(
    "self.lin(x).sum(dim=1, keepdim=True)",
    "torch.mean(0.5 * (x @ self.lin.weight.T) / 2.0, dim=1, keepdim=True)",
)


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    files = {
        "ops/diag.py": DIAG,
        "ops/rowsum.py": ROWSUM,
        "ops/rowmean.py": ROWMEAN,
        "ops/scaled_mean.py": SCALED_MEAN,
    }
    return write_repo(tmp_path, files, config=FAST_CONFIG)


def optimize(repo: Path, *args: str) -> dict:
    out = repo / "result.json"
    assert main(["optimize", *args, "--device", "cpu", "--out", str(repo / "out"), "--json", str(out)]) == 0
    return json.loads(out.read_text())


# ~130 s on the 2-core CI box: the search agent's whole budget, a max-autotune build included. Run on purpose
# (-m slow); in CI, test_review's search-agent review covers the rewrite end to end and test_search_stacking
# the stacking order.
@pytest.mark.slow
def test_diag_product_is_rewritten_verified_and_faster(repo: Path) -> None:
    data = optimize(repo, "ops/diag.py")
    best = data["best"]
    assert best is not None and best["origin"].startswith("diag-matmul-broadcast")  # alone or stacked
    assert best["status"] == "ok" and best["reward"] >= 2
    # O(n²) against an O(n³) product at n = 512 (measured speedups belong to benchmarks/: this says only that
    # the side-by-side rounds found it faster by far more than the 5% that reward 2 asks).
    assert best["speedup_vs_eager"] >= 3
    tried = {c["origin"] for c in data["candidates"]}
    assert "reduce-before-matmul" not in tried and data["skipped_rules"]["reduce-before-matmul"]
    # Then max-autotune, verified alone, is stacked on the rewrite and verified as one more candidate.
    (stacked,) = [
        c for c in data["candidates"] if c["origin"] == "diag-matmul-broadcast+compile-max-autotune"
    ]
    assert stacked["status"] == "ok" and stacked["reward"] >= 1, stacked["reason"]


# End to end for the plain sum and for problem 29's scaled mean; the mean alone is the rule tests' (test_rules).
@pytest.mark.parametrize(
    "op",
    # ~50 s and 77 s on the 2-core runner: run on purpose (-m slow); the rule's own tests stay in CI
    [
        pytest.param("ops/rowsum.py", marks=pytest.mark.slow),
        pytest.param("ops/scaled_mean.py", marks=pytest.mark.slow),
    ],
)
def test_reduction_moves_before_the_linear_layer(repo: Path, op: str) -> None:
    data = optimize(repo, op, "--budget", "1")
    (candidate,) = data["candidates"]
    assert candidate["origin"] == "reduce-before-matmul"
    assert candidate["status"] == "ok" and candidate["reward"] >= 2
    assert data["stopped_by"] == "budget"


@pytest.mark.slow  # ~65 s; the review test with the search agent writes the drop-in file in CI
def test_winner_is_a_drop_in_file_that_runs_without_kernelbot(repo: Path) -> None:
    data = optimize(repo, "ops/diag.py", "--budget", "1")
    path = Path(data["best"]["drop_in_path"])
    text = path.read_text()
    assert text.startswith("# Drop-in replacement for ops/diag.py") and "How it was verified" in text
    script = textwrap.dedent(f"""
        import runpy, sys, torch
        ns = runpy.run_path({str(path)!r})
        model, ref = ns["ModelNew"](*ns["get_init_inputs"]()), ns["Model"](*ns["get_init_inputs"]())
        a, b = torch.randn(64), torch.randn(64, 64)
        assert torch.allclose(model(a, b), ref(a, b))
        assert not [m for m in sys.modules if m.startswith("kernelbot")], "the drop-in imported kernelbot"
        print("ok")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=repo, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


# 96 s on CI's 2 cores: run on purpose (-m slow). CI judges every one of these cheats in test_adversarial.py
# (the exact status and reason of each); this is the whole optimize loop over them.
@pytest.mark.slow
def test_no_cheat_is_ever_suggested(repo: Path) -> None:
    cheats = sorted((ADVERSARIAL / "cheats").glob("*.py"))
    assert len(cheats) >= 15
    op = ADVERSARIAL / "ops" / "matmul_op.py"
    out = repo / "cheats.json"
    code = main(
        [
            "optimize",
            str(op),
            "--repo",
            str(repo),
            "--agent",
            "replay",
            "--candidates",
            *map(str, cheats),
            "--budget",
            str(len(cheats)),
            "--device",
            "cpu",
            "--out",
            str(repo / "out"),
            "--json",
            str(out),
        ]
    )
    data = json.loads(out.read_text())
    assert code == 0
    assert data["best"] is None
    assert len(data["candidates"]) == len(cheats)
    assert all(c["reward"] == -1 and c["status"] != "ok" for c in data["candidates"]), [
        (c["origin"], c["status"]) for c in data["candidates"] if c["reward"] != -1
    ]


@pytest.mark.slow  # ~35 s; test_check's side-by-side reward test stays in CI
def test_a_reward_comes_from_timing_side_by_side_not_from_stale_baselines(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Baselines cached at a slow moment (here: made 3x slower than measured) would give an unchanged copy
    of the operator reward 3; timed in the same rounds as eager and torch.compile it earns 1."""
    import kernelbot.pipeline.optimize as optimize_module

    real = optimize_module.check_operator

    def stale(*args: object, **kwargs: object) -> object:
        report = real(*args, **kwargs)  # type: ignore[arg-type]
        for ev in (report.eager, report.compiled):
            if ev is not None and ev.timing is not None:
                ev.timing.median_ms *= 3
        return report

    monkeypatch.setattr(optimize_module, "check_operator", stale)
    copy = repo / "copy.py"
    copy.write_text(ROWSUM.replace("class Model(", "class ModelNew("))
    data = optimize(repo, "ops/rowsum.py", "--agent", "replay", "--candidates", str(copy))
    (candidate,) = data["candidates"]
    assert candidate["status"] == "ok" and candidate["reward"] == 1, candidate
    evidence = candidate["side_by_side"]
    assert evidence is not None, f"no side-by-side timing was made: {candidate}"  # (under load: the budget)
    assert evidence["rounds"] >= 8 and 0.8 < evidence["speedup_vs_eager"] < 1.25, evidence
    low, high = evidence["speedup_vs_eager_ci99"]
    assert low <= evidence["speedup_vs_eager"] <= high
    assert data["best"] is None  # nothing is suggested


@pytest.mark.slow  # waits out --time (150 s): run on purpose with -m slow
def test_a_winner_keeps_its_reward_when_a_later_candidate_runs_out_the_clock(repo: Path) -> None:
    """Seen on the H200: a 29x exact rewrite ended at reward 1 because the side-by-side timing waited for
    the end of the search and a later candidate (a max-autotune build) used up --time first. A candidate that
    earns 2 or 3 is now timed side by side as soon as it is found."""
    fast = repo / "fast.py"
    fast.write_text(
        "import torch\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, A, B):\n        return A.unsqueeze(1) * B\n"
    )
    hang = repo / "hang.py"
    hang.write_text(
        "import torch\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, A, B):\n        while True:\n            pass\n"
    )
    # Five hangs: each is cut at the per-candidate limit (46.7 s here), and with cached baselines two of them
    # once fitted in --time (the search was then "exhausted", not stopped by the clock).
    args = ["ops/diag.py", "--agent", "replay", "--candidates", str(fast), *[str(hang)] * 5]
    data = optimize(repo, *args, "--time", "150")  # baselines took 40-56 s of it on a loaded 2-core box
    assert data["stopped_by"] == "time"
    winner = data["candidates"][0]
    assert winner["status"] == "ok" and winner["side_by_side"] is not None, winner
    assert winner["reward"] >= 2 and winner["provisional_reward"] is None, winner
    assert data["best"] is not None
