"""The real-size problem set (benchmarks/realsize/) builds and runs shape-for-shape on the meta device: no
memory, no arithmetic, so the CPU checks in seconds what the H200 runs at full size."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelbot.harness.loader import import_file

PROBLEMS = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "realsize").glob("[0-9]*.py"))


def _nbytes(values: list[object]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def test_the_set_holds_at_least_25_problems_with_three_whole_networks() -> None:
    names = [p.stem for p in PROBLEMS]
    assert len(names) >= 25
    assert {"25_efficientnet_like", "26_vit_like", "27_gru"} <= set(names)


@pytest.mark.parametrize("path", PROBLEMS, ids=[p.stem for p in PROBLEMS])
def test_each_problem_builds_and_runs_on_the_meta_device(path: Path) -> None:
    module = import_file(path, f"realsize_{path.stem}")
    with torch.device("meta"), torch.no_grad():
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        out = model(*inputs)
    assert isinstance(out, torch.Tensor) and out.numel() > 0
    assert _nbytes(inputs) >= 16 * 2**20, "a real-size problem, not a toy"


def test_the_elementwise_problem_has_a_6_4_gb_input() -> None:
    module = import_file(next(p for p in PROBLEMS if "6p4gb" in p.stem), "realsize_gelu")
    with torch.device("meta"):
        assert _nbytes(module.get_inputs()) >= 6.4e9
