"""The rules in rules/: they load, and each fx-rewrite and compile rule fires where it should and not elsewhere."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kernelbot.agents.rules import Rule, load_rules
from kernelbot.analysis.tracer import analyze
from kernelbot.errors import ConfigError

REWRITES = ["diag_matmul", "reduce_before_matmul", "matmul_reassociate"]
EXACT = {"allow_tf32": False, "allow_bf16": False}


def facts_for(
    tmp_path: Path, forward: str, inputs: str, init: str = "", eager_ms: float = 1.0
) -> dict[str, Any]:
    source = textwrap.dedent(f"""
        import torch
        import torch.nn.functional as F

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                {init or "pass"}

            def forward(self, *args):
                {forward}

        def get_inputs():
            return {inputs}

        def get_init_inputs():
            return []
    """)
    (tmp_path / "op.py").write_text(source)
    facts = analyze(
        {"kind": "kernelbench", "root": str(tmp_path), "file": "op.py", "device": "cpu"}, REWRITES
    )
    facts["eager_ms"] = eager_ms
    return facts


@pytest.fixture(scope="module")
def rules() -> dict[str, Rule]:
    return {rule.id: rule for rule in load_rules()}


def fires(rule: Rule, facts: dict[str, Any], device: str = "cpu", policy: dict[str, bool] = EXACT) -> bool:
    return rule.matches(facts, device, "kernelbench", policy) is None


def test_every_rule_file_loads_with_its_id(rules: dict[str, Rule]) -> None:
    assert {
        "diag-matmul-broadcast",
        "reduce-before-matmul",
        "matmul-reassociate",
        "compile-max-autotune",
        "compile-reduce-overhead",
    } <= set(rules)
    for rule in rules.values():
        assert rule.description and rule.rationale and rule.path == f"rules/{rule.id}.yaml"


@pytest.mark.parametrize(
    ("forward", "inputs", "expected"),
    [
        (
            "a, b = args\n                return torch.diag(a) @ b",
            "[torch.randn(8), torch.randn(8, 5)]",
            True,
        ),
        (
            "a, b = args\n                return torch.matmul(b, torch.diag(a))",
            "[torch.randn(5), torch.randn(8, 5)]",
            True,
        ),
        ("a, b = args\n                return a @ b", "[torch.randn(8, 8), torch.randn(8, 5)]", False),
        (
            "a, b = args\n                return torch.diag(a) + 1",
            "[torch.randn(8), torch.randn(8, 5)]",
            False,
        ),
        (
            "a, b = args\n                return torch.diag(a) @ b",
            "[torch.randn(8, 8), torch.randn(8, 5)]",
            False,
        ),  # diag of a matrix is a vector
    ],
    ids=["diag-left", "diag-right", "plain-matmul", "diag-no-matmul", "diag-of-matrix"],
)
def test_diag_rule(tmp_path: Path, rules: dict[str, Rule], forward: str, inputs: str, expected: bool) -> None:
    assert fires(rules["diag-matmul-broadcast"], facts_for(tmp_path, forward, inputs)) is expected


@pytest.mark.parametrize(
    ("forward", "init", "expected"),
    [
        (
            "(x,) = args\n                return torch.sum(x @ self.w.T, dim=1)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            True,
        ),
        (
            "(x,) = args\n                return self.lin(x).sum(-1, keepdim=True)",
            "self.lin = torch.nn.Linear(8, 16)",
            True,
        ),
        (
            "(x,) = args\n                return F.linear(x, self.w).sum(dim=-1)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            True,
        ),
        (
            "(x,) = args\n                return torch.mean(self.lin(x), dim=1, keepdim=True)",
            "self.lin = torch.nn.Linear(8, 16)",
            True,
        ),
        (
            "(x,) = args\n                return (x @ self.w.T).mean(-1)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            True,
        ),
        (
            "(x,) = args\n                return torch.sum(x @ self.w.T, dim=0)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            False,
        ),
        (
            "(x,) = args\n                return torch.relu(x @ self.w.T).sum(dim=1)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            False,
        ),
        (
            "(x,) = args\n                return (2 * (x @ self.w.T) / 3.0).mean(dim=1)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            True,
        ),
        (
            "(x,) = args\n                return (x @ self.w.T + 1.0).sum(dim=1)",
            "self.w = torch.nn.Parameter(torch.randn(16, 8))",
            False,
        ),
        (
            "(x,) = args\n                return (x @ self.w.T * x).sum(dim=1)",
            "self.w = torch.nn.Parameter(torch.randn(8, 8))",
            False,
        ),
    ],
    ids=[
        "matmul-sum",
        "linear-sum-keepdim",
        "F.linear-sum",
        "linear-mean-keepdim",
        "matmul-mean",
        "sum-over-rows",
        "nonlinear-between",
        "scalar-scales-between",
        "shift-between",
        "tensor-scale-between",
    ],
)
def test_reduce_before_matmul_rule(
    tmp_path: Path, rules: dict[str, Rule], forward: str, init: str, expected: bool
) -> None:
    facts = facts_for(tmp_path, forward, "[torch.randn(4, 8)]", init)
    assert fires(rules["reduce-before-matmul"], facts) is expected


def test_reassociation_fires_only_when_cheaper(tmp_path: Path, rules: dict[str, Rule]) -> None:
    chain = "a, b, c = args\n                return (a @ b) @ c"
    cheaper = facts_for(tmp_path, chain, "[torch.randn(64, 64), torch.randn(64, 64), torch.randn(64, 1)]")
    assert fires(rules["matmul-reassociate"], cheaper)
    already_best = facts_for(
        tmp_path, chain, "[torch.randn(1, 64), torch.randn(64, 64), torch.randn(64, 64)]"
    )
    assert not fires(rules["matmul-reassociate"], already_best)


def test_generated_forward_is_valid_python(tmp_path: Path) -> None:
    facts = facts_for(
        tmp_path,
        "a, b = args\n                return torch.diag(a) @ b",
        "[torch.randn(8), torch.randn(8, 5)]",
    )
    code = facts["rewrites"]["diag_matmul"]["forward_code"]
    ast.parse(code)
    assert "diag" not in code and "mul" in code


def test_compile_rules_match_by_device_and_launch_time(tmp_path: Path, rules: dict[str, Rule]) -> None:
    facts = facts_for(
        tmp_path, "(x,) = args\n                return torch.relu(x) * 2", "[torch.randn(8)]", eager_ms=0.01
    )
    assert fires(rules["compile-max-autotune"], facts, "cpu") and fires(
        rules["compile-max-autotune"], facts, "cuda"
    )
    assert fires(rules["compile-reduce-overhead"], facts, "cuda")
    assert not fires(rules["compile-reduce-overhead"], facts, "cpu")
    facts["eager_ms"] = 5.0
    assert not fires(rules["compile-reduce-overhead"], facts, "cuda")  # not launch-bound


def test_a_measured_gpu_busy_share_decides_launch_boundness(tmp_path: Path, rules: dict[str, Rule]) -> None:
    """The H200's ViT-like network (6.8 ms eager over many kernels) never had the CUDA-graph capture tried:
    the time-per-kernel guess said no. Where the analysis measured how busy the GPU was, that decides."""
    facts = facts_for(
        tmp_path, "(x,) = args\n                return torch.relu(x) * 2", "[torch.randn(8)]", eager_ms=6.8
    )
    assert facts["gpu_busy"] is None  # not measured on the CPU: the guesses decide, and say no at 6.8 ms
    capture = rules["cuda-graph-capture"]
    assert not fires(capture, facts, "cuda")
    facts["gpu_busy"] = 0.55  # launches take 45% of eager's wall time
    assert fires(capture, facts, "cuda") and fires(rules["compile-reduce-overhead"], facts, "cuda")
    facts["gpu_busy"], facts["eager_ms"] = 0.97, 0.01  # busy GPU: no graph, however short the call
    why = capture.matches(facts, "cuda", "kernelbench", EXACT)
    assert why is not None and "GPU busy 97%" in why


def test_the_busy_share_counts_overlapping_kernels_once() -> None:
    from kernelbot.analysis.tracer import busy_share

    assert busy_share([(0, 10), (5, 15), (20, 30)], wall_us=50) == 0.5  # 25 us of 50: the overlap once
    assert busy_share([(0, 100)], wall_us=80) == 1.0  # clock skew cannot make the GPU more than busy
    assert busy_share([], wall_us=80) is None


def test_untraceable_operator_matches_no_graph_rule(tmp_path: Path, rules: dict[str, Rule]) -> None:
    facts = facts_for(
        tmp_path,
        "a, b = args\n                if a.sum() > 0:\n                    return torch.diag(a) @ b\n                return b",
        "[torch.randn(8), torch.randn(8, 5)]",
    )
    assert facts["traceable"] is False and facts["trace_error"]
    assert (
        rules["diag-matmul-broadcast"].matches(facts, "cpu", "kernelbench", EXACT)
        == "forward is not fx-traceable"
    )


def test_a_trace_that_kept_the_forwards_results_as_constants_is_not_a_graph(tmp_path: Path) -> None:
    """A buffer written in place and then computed on: fx runs those operations for real while tracing and
    keeps their results as constants, so the graph was one copy_ and rules matched on ops the forward does
    not show (a user's KernelBench-style problem: ops == ["copy"], traceable). Now it is untraceable, said why."""
    facts = facts_for(
        tmp_path,
        "(x,) = args\n                self.buf.copy_(x)\n                self.buf.mul_(2).sub_(self.buf.mean())\n"
        "                return self.buf.clone(), self.buf.sum(0)",
        "[torch.randn(8, 5)]",
        init='self.register_buffer("buf", torch.zeros(8, 5))',
    )
    assert facts["traceable"] is False and "depends on an input" in facts["trace_error"], facts
    beside = facts_for(  # a parameter returned beside a computed output: an honest graph
        tmp_path,
        "(x,) = args\n                return x.mul(2), self.bias",
        "[torch.randn(8, 5)]",
        init="self.bias = torch.nn.Parameter(torch.zeros(5))",
    )
    assert beside["traceable"] is True, beside
    honest = facts_for(tmp_path, "(x,) = args\n                return x.mul(2).sum(0)", "[torch.randn(8, 5)]")
    assert honest["traceable"] is True and {"mul", "sum"} <= set(honest["ops"]), honest


def test_a_bad_rule_file_is_one_line_naming_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "id: bad\ndescription: x\nrationale: y\nproduces: {rewrite: diag_matmul}\nexpected_gian: 3\n"
    )
    with pytest.raises(
        ConfigError, match=r"^rules/bad.yaml: key 'expected_gian': Extra inputs are not permitted$"
    ):
        load_rules(tmp_path)
    (tmp_path / "bad.yaml").write_text(
        "id: other\ndescription: x\nrationale: y\nproduces: {template: t.j2}\n"
    )
    with pytest.raises(ConfigError, match="must equal the file name"):
        load_rules(tmp_path)
    (tmp_path / "bad.yaml").write_text(
        "id: bad\ndescription: x\nrationale: y\nproduces: {rewrite: diag_matmull}\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"^rules/bad.yaml: key 'produces.rewrite': no rewrite named 'diag_matmull' \(registered: .*diag_matmul",
    ):
        load_rules(tmp_path)
    (tmp_path / "bad.yaml").write_text(
        "id: bad\ndescription: x\nrationale: y\nproduces: {template: nope.py.j2}\n"
    )
    with pytest.raises(
        ConfigError, match=r"^rules/bad.yaml: key 'produces.template': no templates/kernels/nope.py.j2"
    ):
        load_rules(tmp_path)


def test_every_rewrite_module_is_found_without_an_import() -> None:
    """A rewrites_*.py module registers its rewrites by being there: discovery finds each one."""
    import pkgutil

    import kernelbot.agents as agents
    from kernelbot.analysis.rewrites import all_rewrites

    modules = [m.name for m in pkgutil.iter_modules(agents.__path__) if m.name.startswith("rewrites_")]
    found = {fn.__module__.rsplit(".", 1)[1] for fn in all_rewrites().values()}
    assert set(modules) <= found and {
        "conv_bn_fold",
        "row_softmax",
        "split_k_linear",
        "tf32x3_products",
    } <= set(all_rewrites())


def test_analysis_facts_are_cached_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelbot.analysis import analyze as analysis

    (tmp_path / "op.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, d, x):\n"
        "        return torch.diag(d) @ x\n\ndef get_inputs():\n    return [torch.randn(8), torch.randn(8, 4)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    job = {"kind": "kernelbench", "root": str(tmp_path), "device": "cpu", "file": "op.py"}
    cache = tmp_path / "cache"
    first = analysis.analyze_operator(job, ["diag_matmul"], cache_dir=cache, spec_hash="v1")
    assert first["rewrites"]["diag_matmul"]["applied"] and "analysis_failed" not in first
    runs: list[object] = []
    real_run = analysis.run_jailed
    monkeypatch.setattr(analysis, "run_jailed", lambda *a, **k: runs.append(a) or real_run(*a, **k))
    assert analysis.analyze_operator(job, ["diag_matmul"], cache_dir=cache, spec_hash="v1") == first
    assert runs == []  # from the cache
    elsewhere = tmp_path / "worktree"  # the same operator checked out elsewhere (a review's worktree)
    elsewhere.mkdir()
    (elsewhere / "op.py").write_text((tmp_path / "op.py").read_text())
    moved = {**job, "root": str(elsewhere)}
    assert analysis.analyze_operator(moved, ["diag_matmul"], cache_dir=cache, spec_hash="v1") == first
    assert runs == []
    # Another version of the operator, or other rewrites asked for: analysed again.
    analysis.analyze_operator(job, ["diag_matmul"], cache_dir=cache, spec_hash="v2")
    assert analysis.analyze_operator(job, [], cache_dir=cache, spec_hash="v1")["rewrites"] == {}
    assert len(runs) == 2
    # A failed analysis (here: a timeout) is not remembered: it may be the machine's fault.
    failed = analysis.analyze_operator(job, ["x"], timeout_s=0.001, cache_dir=cache, spec_hash="v1")
    assert failed["analysis_failed"] and failed["traceable"] is False
    assert analysis.analyze_operator(job, ["x"], cache_dir=cache, spec_hash="v1")["traceable"] is True
