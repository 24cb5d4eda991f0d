"""Rule row-softmax-kernel: where the rewrite fires, what it renders, and that its kernels build for Hopper.

The kernels' numbers are checked on the GPU (tests/test_gpu_row_softmax.py): their block reductions need warps.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelbot.agents.rules import Rule, load_rules
from kernelbot.analysis.rewrites_softmax import MAX_COLS
from kernelbot.analysis.tracer import analyze
from kernelbot.harness.staticcheck import scan
from kernelbot.render import render

SOFTMAXES = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.sm = nn.Softmax(dim=-1)

    def forward(self, x, odd):
        a = torch.softmax(x, dim=-1) + F.log_softmax(x, -1) + x.softmax(1) + self.sm(x)  # four rewritten
        b = torch.softmax(x, dim=0) + torch.softmax(x, -1, dtype=torch.float64).float()  # not the last dim; dtype
        return a + b, torch.log_softmax(odd, -1)  # a width of 6: not a multiple of 4


def get_inputs():
    return [torch.randn(5, 8), torch.randn(3, 6)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def rule() -> Rule:
    return {r.id: r for r in load_rules()}["row-softmax-kernel"]


def _facts(tmp_path: Path, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (tmp_path / "op.py").write_text(source)
    job = {
        "kind": "kernelbench",
        "root": str(tmp_path),
        "file": "op.py",
        "device": "cpu",
        "allow_tf32": False,
    }
    return job, analyze(job, ["row_softmax"]) | {"eager_ms": 1.0}


def _render(rule: Rule, source: str, facts: dict[str, Any]) -> str:
    candidate = render(
        f"kernels/{rule.produces.template}",
        rule=rule,
        params=rule.produces.params,
        operator_source=source.rstrip(),
        facts=facts,
        device="cuda",
    )
    ast.parse(candidate)
    assert scan(candidate, allow_tf32=False, require_kernel=rule.require_kernel) == []
    return candidate


def test_row_softmax_fires_on_last_dimension_softmaxes_of_width_a_multiple_of_four(
    tmp_path: Path, rule: Rule
) -> None:
    _, facts = _facts(tmp_path, SOFTMAXES)
    assert facts["rewrites"]["row_softmax"]["description"].startswith("computed 4 row softmax(es)")
    assert rule.matches(facts, "cuda", "kernelbench", {}) is None
    assert rule.matches(facts, "cpu", "kernelbench", {}) == "not for cpu"
    forward = _render(rule, SOFTMAXES, facts).split("class ModelNew(Model):")[1]
    assert forward.count("row_softmax(") == 4
    assert forward.count("row_softmax(x, True)") == 1  # the log-softmax
    assert "torch.softmax(x, dim = 0)" in forward and "dtype = torch.float64" in forward
    assert "torch.log_softmax(odd, -1)" in forward

    wide = SOFTMAXES.replace("torch.randn(5, 8)", f"torch.randn(2, {MAX_COLS + 4})")
    _, facts = _facts(tmp_path, wide)  # wider than the widest kernel: nothing fires
    assert rule.matches(facts, "cuda", "kernelbench", {}) == "pattern not found in the graph"


def test_row_softmax_candidate_refuses_what_its_kernels_do_not_take_in_one_line(
    tmp_path: Path, rule: Rule
) -> None:
    _, facts = _facts(tmp_path, SOFTMAXES)
    namespace: dict[str, Any] = {}
    candidate = _render(rule, SOFTMAXES, facts).replace("import cupy", "cupy = None")
    exec(compile(candidate, "candidate", "exec"), namespace)
    with pytest.raises(
        ValueError, match=r"row_softmax: built for float32 CUDA rows .* got torch.float32 \(5, 8\) on cpu"
    ):
        namespace["row_softmax"](torch.randn(5, 8), False)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc to compile the generated kernels for a GPU")
def test_row_softmax_kernels_build_for_hopper_four_wide_and_without_spills(
    tmp_path: Path, rule: Rule
) -> None:
    _, facts = _facts(tmp_path, SOFTMAXES)
    cuda = re.search(r'_SOURCE = r"""(.*?)"""', _render(rule, SOFTMAXES, facts), re.S)
    assert cuda is not None
    (tmp_path / "k.cu").write_text(cuda.group(1))
    built = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-cubin",
            "-Xptxas",
            "-v",
            "-o",
            str(tmp_path / "k.cubin"),
            str(tmp_path / "k.cu"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    entries = re.findall(r"Compiling entry function '(\w+)'", built.stderr)
    assert (
        entries
        and sorted(entries, key=lambda e: int(e.rsplit("_", 1)[1]))[-1] == f"row_softmax_{MAX_COLS // 1024}"
    )
    spills = re.findall(r"(\d+) bytes spill stores", built.stderr)
    assert len(spills) == len(entries) and set(spills) == {"0"}
    subprocess.run(
        ["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(tmp_path / "k.cu")], check=True
    )
    accesses = set(re.findall(r"(?:ld|st)\.global[\w.]*", (tmp_path / "k.ptx").read_text()))
    assert accesses == {
        "ld.global.nc.v4.f32",
        "st.global.v4.f32",
    }  # 16 bytes a load and a store, nothing narrower
