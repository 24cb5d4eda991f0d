"""The search agent stacks wrapper rules (compile modes, TF32, cuDNN autotuning) on the best verified candidate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelbot.agents.base import Feedback, Proposal, Task
from kernelbot.agents.rules import Rule, load_rules
from kernelbot.agents.search import SearchAgent
from kernelbot.config import PrecisionPolicy
from kernelbot.errors import ConfigError
from kernelbot.harness.results import Evaluation
from kernelbot.spec import kernelbench_spec
from tests.ops import TINY_LINEAR_RELU


def _task(tmp_path: Path, policy: PrecisionPolicy) -> Task:
    (tmp_path / "op.py").write_text(TINY_LINEAR_RELU)
    facts = {"traceable": True, "ops": ["linear", "relu"], "modules": ["Linear"], "input_dtypes": ["float32"]}
    return Task(
        kernelbench_spec("op.py"), tmp_path, "cuda", TINY_LINEAR_RELU, policy, facts | {"eager_ms": 1.0}
    )


def _feedback(proposal: Proposal, status: str, speedup: float | None) -> Feedback:
    ok = status == "ok"
    return Feedback(proposal, Evaluation("candidate", status), 2 if ok else -1, speedup if ok else None, None)


def _answer(
    agent: SearchAgent, task: Task, results: dict[str, tuple[str, float]]
) -> tuple[list[Feedback], list[Proposal]]:
    """Answer every single-rule candidate with the given (status, speedup vs eager); collect the stacks."""
    feedback: list[Feedback] = []
    stacks: list[Proposal] = []
    while (p := agent.propose(task, feedback)) is not None:
        if "+" in p.origin:
            stacks.append(p)
            continue
        status, speedup = results.get(p.origin, ("ok", 1.0))
        feedback.append(_feedback(p, status, speedup))
    return feedback, stacks


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return load_rules()


def test_stacks_go_on_the_fastest_verified_candidate_and_respect_conflicts(
    tmp_path: Path, rules: list[Rule]
) -> None:
    agent = SearchAgent(rules)
    task = _task(tmp_path, PrecisionPolicy(allow_tf32=True))
    task.facts["eager_ms"] = 0.1  # launch-bound: reduce-overhead and the CUDA-graph capture match too
    singles = {
        "compile-reduce-overhead": ("ok", 1.5),
        "compile-max-autotune": ("ok", 1.4),
        "tf32-matmul": ("ok", 0.97),
        "cuda-graph-capture": ("ok", 0.8),
    }
    feedback, stacks = _answer(agent, task, singles)
    assert {f.proposal.origin for f in feedback} == set(singles)
    # TF32 lost alone but may win under the compiled model; max-autotune and the graph capture conflict
    # with reduce-overhead (a CUDA graph already).
    assert [p.origin for p in stacks] == ["compile-reduce-overhead+tf32-matmul"]
    (stacked,) = stacks
    assert stacked.precision == "tf32"
    ast.parse(stacked.source)
    assert "class ModelNew(ModelNew):" in stacked.source
    assert stacked.source.count("class ModelNew(Model):") == 1  # the base candidate, kept whole
    assert 'mode="reduce-overhead"' in stacked.source


def test_the_fastest_exact_candidate_is_a_base_too(tmp_path: Path, rules: list[Rule]) -> None:
    """With TF32 allowed and fastest, the exact stacks a full-precision run would make are still built."""
    task = _task(tmp_path, PrecisionPolicy(allow_tf32=True))
    task.facts["eager_ms"] = 0.1
    singles = {
        "compile-reduce-overhead": ("ok", 1.3),
        "compile-max-autotune": ("ok", 1.2),
        "tf32-matmul": ("ok", 1.5),
        "cuda-graph-capture": ("ok", 0.8),
    }
    _, stacks = _answer(SearchAgent(rules), task, singles)
    # On the exact base: TF32 (max-autotune and the graph capture conflict); on the TF32 base: the graph
    # capture and max-autotune (reduce-overhead with TF32 is the same pair as the first, built once).
    assert [p.origin for p in stacks] == [
        "compile-reduce-overhead+tf32-matmul",
        "tf32-matmul+cuda-graph-capture",
        "tf32-matmul+compile-max-autotune",
    ]
    assert {p.precision for p in stacks} == {"tf32"}


def test_a_rule_that_failed_alone_is_not_stacked_and_nothing_stacks_without_a_verified_base(
    tmp_path: Path, rules: list[Rule]
) -> None:
    task = _task(tmp_path, PrecisionPolicy(allow_tf32=True))
    _, stacks = _answer(
        SearchAgent(rules), task, {"tf32-matmul": ("incorrect", 0.0), "compile-max-autotune": ("ok", 1.2)}
    )
    assert stacks == []
    _, stacks = _answer(SearchAgent(rules), task, {r.id: ("crashed", 0.0) for r in rules})
    assert stacks == []


def test_stacked_precisions_combine_and_a_stacking_rule_must_be_a_template(tmp_path: Path) -> None:
    from kernelbot.agents.search import _combined

    assert _combined("exact", "tf32") == "tf32" and _combined("bf16", "exact") == "bf16"
    assert _combined("tf32", "bf16") is None and _combined("exact", "exact") == "exact"
    bad = tmp_path / "rules"
    bad.mkdir()
    (bad / "r.yaml").write_text(
        "id: r\ndescription: d\nrationale: r\nproduces: {rewrite: diag_matmul}\nstacks: true\n"
    )
    with pytest.raises(ConfigError, match="only a template rule can stack"):
        load_rules(bad)
    (bad / "r.yaml").write_text(
        "id: r\ndescription: d\nrationale: r\nproduces: {template: tf32.py.j2}\nconflicts: [nope]\n"
    )
    with pytest.raises(ConfigError, match=r"rules/r\.yaml: key 'conflicts': no rule named nope"):
        load_rules(bad)


def test_the_graph_capture_goes_on_top_of_a_rewrite(tmp_path: Path, rules: list[Rule]) -> None:
    """A launch-bound network: the conv-BN fold wins alone, then the whole folded forward is captured once."""
    task = _task(tmp_path, PrecisionPolicy())
    task.facts["eager_ms"] = 0.05
    rewrite = Proposal("class ModelNew(Model):\n    pass\n", origin="conv-bn-fold", description="fold")
    singles = [_feedback(rewrite, "ok", 1.3)]
    agent = SearchAgent(rules)
    while (p := agent.propose(task, singles)) is not None and "+" not in p.origin:
        singles.append(_feedback(p, "ok", 1.1))
    assert p is not None and p.origin == "conv-bn-fold+cuda-graph-capture"
    ast.parse(p.source)
    assert p.source.count("class ModelNew(ModelNew):") == 1 and "graph.replay()" in p.source


def test_a_stricter_policys_stacks_are_built_under_a_looser_one(tmp_path: Path, rules: list[Rule]) -> None:
    """Bases are the fastest IEEE candidate, the fastest with tf32x3, and the fastest overall: a run that
    allows TF32 builds every stack the default float32 run (tf32x3 on) would build."""
    forward = (
        "def forward(self, x):\n    return torch.relu(tf32x3_linear(x, self.lin.weight, self.lin.bias))\n"
    )
    split = {
        "applied": True,
        "description": "computed 1 float32 matrix product(s) ...",
        "forward_code": forward,
    }
    singles = {
        "compile-max-autotune": ("ok", 1.2),
        "tf32x3-matmul": ("ok", 1.8),
        "tf32-matmul": ("ok", 4.0),
    }
    made = {}
    for name, policy in (("default", PrecisionPolicy()), ("tf32", PrecisionPolicy(allow_tf32=True))):
        task = _task(tmp_path, policy)
        task.facts["rewrites"] = {"tf32x3_products": split}
        feedback, stacks = _answer(SearchAgent(rules), task, singles)
        assert "tf32x3-matmul" in {f.proposal.origin for f in feedback}
        made[name] = {p.origin: p.precision for p in stacks}
    assert made["default"]["tf32x3-matmul+compile-max-autotune"] == "tf32x3"
    assert "tf32-matmul" not in "".join(made["default"])  # not allowed, and tf32x3 conflicts with it
    assert made["default"].items() <= made["tf32"].items()
    assert made["tf32"]["compile-max-autotune+tf32-matmul"] == "tf32"  # on the IEEE base; built once


def test_a_rewrite_that_lost_to_a_wrapper_alone_gets_the_wrapper_on_top(
    tmp_path: Path, rules: list[Rule], monkeypatch: pytest.MonkeyPatch
) -> None:
    """34_mlp_small_batch on the H200: the graph capture and tf32x3 each just under the line alone. The fastest
    forward replacements besides the policies' bases are bases too, at most EXTRA_BASES of them."""
    task = _task(tmp_path, PrecisionPolicy())
    task.facts["eager_ms"] = 0.05  # launch-bound: the graph capture matches
    forward = (
        "def forward(self, x):\n    return torch.relu(tf32x3_linear(x, self.lin.weight, self.lin.bias))\n"
    )
    task.facts["rewrites"] = {
        "tf32x3_products": {"applied": True, "description": "d", "forward_code": forward},
        "split_k_linear": {
            "applied": True,
            "description": "d",
            "forward_code": "def forward(self, x):\n    return x\n",
        },
    }
    singles = {
        "cuda-graph-capture": ("ok", 1.04),
        "tf32x3-matmul": ("ok", 1.03),
        "split-k-linear": ("ok", 0.9),
    }
    feedback, stacks = _answer(SearchAgent(rules), task, singles)
    assert set(singles) <= {f.proposal.origin for f in feedback}
    origins = [p.origin for p in stacks]
    assert "tf32x3-matmul+cuda-graph-capture" in origins  # on the slower rewrite, after the graph capture won
    assert "split-k-linear+cuda-graph-capture" in origins
    assert origins.index("tf32x3-matmul+cuda-graph-capture") < origins.index(
        "split-k-linear+cuda-graph-capture"
    )
    (on_tf32x3,) = [p for p in stacks if p.origin == "tf32x3-matmul+cuda-graph-capture"]
    assert on_tf32x3.precision == "tf32x3" and "tf32x3_linear(" in on_tf32x3.source
    # With EXTRA_BASES = 0 only the fastest candidate is a base, and nothing stacks on a graph capture.
    monkeypatch.setattr("kernelbot.agents.search.EXTRA_BASES", 0)
    _, none = _answer(SearchAgent(rules), task, singles)
    assert not [p for p in none if p.origin.endswith("+cuda-graph-capture")]
