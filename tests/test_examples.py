"""The example repository and the benchmark problems: every CPU example and its candidate pass the harness."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelbot.config import load_config
from kernelbot.harness.evaluate import Settings, evaluate
from kernelbot.spec import discover, is_kernelbench_source

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
PROBLEMS = REPO / "benchmarks" / "problems"
CPU_EXAMPLES = ["bias_gelu_clamp", "conv_bn_relu", "linear_relu_scale", "rowmean_linear"]
FAST = Settings(timeout_s=120.0, time_budget_s=0.2, max_samples=10)


def _job(stem: str) -> dict:
    return {
        "kind": "kernelbench",
        "root": str(EXAMPLES),
        "file": f"ops/{stem}.py",
        "device": "cpu",
        "allow_tf32": False,
        "atol": None,
        "rtol": None,
    }


@pytest.mark.parametrize("stem", CPU_EXAMPLES)
def test_example_operator_and_candidate_pass(stem: str) -> None:
    eager = evaluate(_job(stem), "eager", FAST, time_it=False)
    assert eager.status == "ok", eager.reason
    assert not eager.degenerate
    candidate = evaluate(
        _job(stem), "candidate", FAST, candidate=str(EXAMPLES / "candidates" / f"{stem}.py"), time_it=False
    )
    assert candidate.status == "ok", candidate.reason


def test_one_example_candidate_is_timed_and_rechecked() -> None:
    # The timed outputs are checked again after timing; one small example covers that path.
    candidate = evaluate(
        _job("rowmean_linear"),
        "candidate",
        FAST,
        candidate=str(EXAMPLES / "candidates" / "rowmean_linear.py"),
    )
    assert candidate.status == "ok", candidate.reason
    assert candidate.timing is not None and candidate.timing.samples >= 10


@pytest.mark.slow
def test_example_compiles_on_cpu() -> None:
    compiled = evaluate(
        _job("linear_relu_scale"), "compile", Settings(timeout_s=300.0, time_budget_s=0.5), time_it=False
    )
    assert compiled.status == "ok", compiled.reason


def test_examples_repository_is_discovered() -> None:
    config = load_config(EXAMPLES)
    specs = {spec.name: spec for spec in discover(EXAMPLES, config)}
    assert {f"ops/{stem}" for stem in CPU_EXAMPLES} <= set(specs)
    scale_shift = specs["scale_shift"]
    assert scale_shift.kind == "declared" and scale_shift.sources == ("csrc/scale_shift.cu",)
    assert scale_shift.supports("cuda") and not scale_shift.supports("cpu")
    for rel in scale_shift.sources:
        assert (EXAMPLES / rel).exists()
    for stem in CPU_EXAMPLES:  # candidates are not operators themselves
        assert (EXAMPLES / "candidates" / f"{stem}.py").exists()
        assert not is_kernelbench_source((EXAMPLES / "candidates" / f"{stem}.py").read_text())


def _problem_files() -> list[Path]:
    return sorted(p for p in PROBLEMS.glob("[0-9]*.py") if not p.stem.endswith("_new"))


def test_problem_set_is_large_enough() -> None:
    assert len(_problem_files()) >= 30
    assert len(list(PROBLEMS.glob("*_new.py"))) >= 8


@pytest.mark.parametrize("path", _problem_files(), ids=lambda p: p.stem)
def test_problem_is_kernelbench_form(path: Path) -> None:
    assert is_kernelbench_source(path.read_text())


@pytest.mark.parametrize("path", sorted(PROBLEMS.glob("*_new.py")), ids=lambda p: p.stem)
def test_problem_candidate_defines_model_new(path: Path) -> None:
    tree = ast.parse(path.read_text())
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert "ModelNew" in classes and "Model" not in classes
    assert path.with_name(path.name.replace("_new.py", ".py")).exists(), "a candidate needs its problem"


def test_the_demo_script_makes_its_repository_and_never_deletes_anything_else(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = [sys.executable, str(EXAMPLES / "make_demo_repo.py")]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused = subprocess.run([*script, str(mine)], capture_output=True, text=True)
    assert refused.returncode == 1 and (mine / "notes.txt").read_text() == "keep me"
    assert (
        refused.stderr.strip()
        == f"{mine} exists and is not a demo repository made by this script: name a new directory"
    )
    demo = tmp_path / "demo"
    for _ in range(2):  # the second run replaces the first one's repository
        subprocess.run([*script, str(demo)], check=True, capture_output=True)
    branches = subprocess.run(
        ["git", "branch", "--format=%(refname:short)"], cwd=demo, capture_output=True, text=True
    )
    assert branches.stdout.split() == ["main", "pr"]
