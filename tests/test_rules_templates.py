"""The GPU/conv/precision rules of rules/ and their templates: where they fire, what they render, what runs on CPU."""

from __future__ import annotations

import ast
import ctypes
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelbot.agents.base import Task, job_at_precision
from kernelbot.agents.rules import Rule, load_rules
from kernelbot.agents.search import SearchAgent
from kernelbot.analysis import epilogue
from kernelbot.analysis.tracer import analyze
from kernelbot.config import PrecisionPolicy
from kernelbot.harness.evaluate import Settings, evaluate
from kernelbot.harness.staticcheck import scan
from kernelbot.render import render
from kernelbot.spec import kernelbench_spec

FAST = Settings(timeout_s=120.0, time_budget_s=0.2, min_samples=5, max_samples=8, seeds=3)
NONE: dict[str, bool] = {"allow_tf32": False, "allow_bf16": False}
ALL: dict[str, bool] = {"allow_tf32": True, "allow_bf16": True}

OPERATORS = {
    "conv_bn_relu": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, cin, cout):
                super(Model, self).__init__()
                self.conv = nn.Conv2d(cin, cout, 3, padding=1)
                self.bn = nn.BatchNorm2d(cout)

            def forward(self, x):
                return torch.relu(self.bn(self.conv(x)))

        def get_inputs():
            return [torch.randn(2, 3, 16, 16)]

        def get_init_inputs():
            return [3, 8]
    """,
    "linear_gelu_scale_clamp": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self, n, scale):
                super(Model, self).__init__()
                self.lin = nn.Linear(n, n)
                self.scale = scale

            def forward(self, x):
                y = F.gelu(self.lin(x)) * self.scale
                return torch.clamp(y, min=-0.25, max=0.25)

        def get_inputs():
            return [torch.randn(8, 64)]

        def get_init_inputs():
            return [64, 0.5]
    """,
    "linear_relu": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(64, 32)

            def forward(self, x):
                return torch.relu(self.lin(x))

        def get_inputs():
            return [torch.randn(8, 64)]

        def get_init_inputs():
            return []
    """,
    "products": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(32, 48)
                self.w = nn.Parameter(torch.randn(48, 40) / 48**0.5)

            def forward(self, a, b, v):
                y = self.lin(torch.bmm(a, b))
                return (y @ self.w).matmul(v)

        def get_inputs():  # unit-scale values throughout, so a float32 rounding stays within 1e-4
            return [torch.randn(4, 24, 512) / 512**0.5, torch.randn(4, 512, 32), torch.randn(40)]

        def get_init_inputs():
            return []
    """,
    "scale_bias_gelu": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.rand(3, 1, 1) + 0.5)  # per channel of NCHW
                self.bias = nn.Parameter(torch.randn(5))  # along the last dim

            def forward(self, x):
                return F.gelu(x * self.scale + self.bias).clamp(-0.1, 2.0)

        def get_inputs():
            return [torch.randn(2, 3, 4, 5)]

        def get_init_inputs():
            return []
    """,
    "bias_rowscale_powers": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(8))  # along the last dim: four consecutive values a thread
                self.row = nn.Parameter(torch.rand(6, 1) + 0.5)  # one value a row: shared by the four

            def forward(self, x):
                y = (x + self.bias) * self.row
                return torch.pow(y, 3) * 0.1 + torch.pow(y.abs(), 1.5) - y**2 + torch.sqrt(y.abs())

        def get_inputs():
            return [torch.randn(6, 8)]

        def get_init_inputs():
            return []
    """,
    "pointwise_convs": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.pw = nn.Conv2d(8, 16, 1)  # 1x1: a matrix product
                self.pw_nobias = nn.Conv2d(16, 4, kernel_size=1, bias=False)  # likewise
                self.k3 = nn.Conv2d(4, 4, 3, padding=1)  # the rest are not
                self.strided = nn.Conv2d(4, 4, 1, stride=2)
                self.grouped = nn.Conv2d(4, 4, 1, groups=2)
                self.padded = nn.Conv2d(4, 4, 1, padding=1)

            def forward(self, x):
                y = self.pw_nobias(torch.relu(self.pw(x)))
                return self.padded(self.grouped(self.strided(self.k3(y))))

        def get_inputs():
            return [torch.randn(2, 8, 10, 12)]

        def get_init_inputs():
            return []
    """,
    "conv_family": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
                self.c1 = nn.Conv1d(6, 8, 3, padding=1)
                self.c3 = nn.Conv3d(4, 5, 3, padding=1, bias=False)
                self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)  # these two stay: groups, circular padding
                self.circ = nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular")

            def forward(self, x, v, u):
                a = self.circ(self.dw(self.up(x)))
                return torch.cat([a.flatten(), self.c1(v).flatten(), self.c3(u).flatten()])

        def get_inputs():
            return [torch.randn(2, 8, 6, 7), torch.randn(2, 6, 20), torch.randn(4, 5, 6, 7)]

        def get_init_inputs():
            return []
    """,
    "skinny_mlp": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.Linear(1024, 512)  # 6 rows, K = 1024: split in four
                self.w = nn.Parameter(torch.randn(40, 512) / 512**0.5)  # F.linear, K = 512: in two
                self.down = nn.Linear(40, 8)  # K = 40: too short to split

            def forward(self, x):
                return self.down(F.linear(torch.relu(self.up(x)), self.w))

        def get_inputs():
            return [torch.randn(2, 3, 1024)]

        def get_init_inputs():
            return []
    """,
    "pointwise_soup": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.LeakyReLU(0.2)

            def forward(self, a, b):
                x = torch.sigmoid(a) + torch.tanh(b) * 2.0
                x = F.silu(x) - a.abs()
                x = self.act(x).clamp_min(-0.5) / 3.0
                return torch.exp(-x) + F.gelu(b, approximate="tanh") + x.neg()

        def get_inputs():
            return [torch.randn(4, 33), torch.randn(4, 33)]

        def get_init_inputs():
            return []
    """,
}


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ops")
    for name, source in OPERATORS.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source).lstrip())
    return root


@pytest.fixture(scope="module")
def rules() -> dict[str, Rule]:
    return {r.id: r for r in load_rules()}


def _job(root: Path, name: str) -> dict[str, Any]:
    return {
        "kind": "kernelbench",
        "root": str(root),
        "file": f"{name}.py",
        "device": "cpu",
        "allow_tf32": False,
        "atol": None,
        "rtol": None,
    }


def _facts(root: Path, name: str, eager_ms: float = 1.0) -> dict[str, Any]:
    job = _job(root, name)
    facts = analyze(job, ["conv_bn_fold", "tf32x3_products"])
    facts["eager_ms"] = eager_ms
    return facts


def _render(rule: Rule, root: Path, name: str, facts: dict[str, Any], device: str) -> str:
    context = {
        "rule": rule,
        "params": rule.produces.params,
        "operator_source": (root / f"{name}.py").read_text().rstrip(),
        "facts": facts,
        "device": device,
    }
    assert rule.produces.template is not None
    source = render(f"kernels/{rule.produces.template}", **context)
    ast.parse(source)
    may_tf32 = rule.precision in ("tf32", "tf32x3")  # as the harness scans them (job_at_precision)
    findings = scan(source, allow_tf32=may_tf32, require_kernel=rule.require_kernel)
    assert findings == [], findings
    return source


def _evaluate(rule: Rule, root: Path, name: str, source: str) -> Any:
    path = root / f"cand_{rule.id}_{name}.py"
    path.write_text(source)
    return evaluate(
        job_at_precision(_job(root, name), rule.precision),
        "candidate",
        FAST,
        candidate=str(path),
        require_kernel=rule.require_kernel,
    )


def test_the_new_rules_load(rules: dict[str, Rule]) -> None:
    new = {
        "cuda-graph-capture",
        "cudnn-benchmark",
        "channels-last-conv",
        "conv-bn-fold",
        "fused-elementwise-epilogue",
        "tf32-matmul",
        "bf16-autocast",
    }
    assert new <= set(rules)
    assert rules["fused-elementwise-epilogue"].require_kernel


def test_cuda_graph_capture_only_for_launch_bound_cuda_operators(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["cuda-graph-capture"]
    fast, slow = _facts(ops, "linear_relu", eager_ms=0.03), _facts(ops, "linear_relu", eager_ms=2.0)
    assert rule.matches(fast, "cuda", "kernelbench", NONE) is None
    assert rule.matches(fast, "cpu", "kernelbench", NONE) == "not for cpu"
    assert "launch-bound" in (rule.matches(slow, "cuda", "kernelbench", NONE) or "")
    source = _render(rule, ops, "linear_relu", fast, "cuda")
    assert "torch.cuda.graph(" in source and ".clone()" in source


def test_a_network_of_many_small_kernels_counts_as_launch_bound(ops: Path, rules: dict[str, Rule]) -> None:
    # The analysis counts the kernels one forward launches (views launch none): conv, BN, ReLU here.
    conv = _facts(ops, "conv_bn_relu")
    assert conv["kernels"] == 3 and _facts(ops, "linear_relu")["kernels"] == 2
    for rule_id in ("cuda-graph-capture", "compile-reduce-overhead"):
        rule = rules[rule_id]
        assert rule.matches(conv | {"eager_ms": 0.06}, "cuda", "kernelbench", NONE) is None  # 20 us a kernel
        why = rule.matches(conv | {"eager_ms": 0.3}, "cuda", "kernelbench", NONE)  # 100 us a kernel
        assert why is not None and "per kernel" in why, why
        # 34_mlp_small_batch on the H200 (run 5): 32 us a kernel
        mlp = conv | {"eager_ms": 0.224, "kernels": 7}
        assert rule.matches(mlp, "cuda", "kernelbench", NONE) is None, rule_id
        many = conv | {"eager_ms": 0.3, "kernels": 15}
        assert rule.matches(many, "cuda", "kernelbench", NONE) is None, rule_id


def test_cudnn_benchmark_only_for_convolutions_on_cuda(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["cudnn-benchmark"]
    conv, linear = _facts(ops, "conv_bn_relu"), _facts(ops, "linear_relu")
    assert rule.matches(conv, "cuda", "kernelbench", NONE) is None
    assert rule.matches(conv, "cpu", "kernelbench", NONE) == "not for cpu"
    assert rule.matches(linear, "cuda", "kernelbench", NONE) is not None
    source = _render(rule, ops, "conv_bn_relu", conv, "cuda")
    assert "finally:" in source  # the caller's setting comes back


def test_tf32_only_where_the_policy_allows(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["tf32-matmul"]
    facts = _facts(ops, "linear_relu")
    assert rule.matches(facts, "cuda", "kernelbench", ALL) is None
    assert "tf32 not allowed" in (rule.matches(facts, "cuda", "kernelbench", NONE) or "")
    assert rule.matches(facts, "cpu", "kernelbench", ALL) == "not for cpu"
    assert rule.matches(_facts(ops, "pointwise_soup"), "cuda", "kernelbench", ALL) is not None  # no matmul
    source = _render(rule, ops, "linear_relu", facts, "cuda")  # scanned with allow_tf32, as the pipeline does
    assert any(f.rule == "precision-flag" for f in scan(source, allow_tf32=False))


def test_channels_last_matches_convs_and_runs_on_cpu(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["channels-last-conv"]
    conv = _facts(ops, "conv_bn_relu")
    assert rule.matches(conv, "cpu", "kernelbench", NONE) is None
    assert rule.matches(conv, "cuda", "kernelbench", NONE) is None
    assert rule.matches(_facts(ops, "linear_relu"), "cpu", "kernelbench", NONE) is not None
    ev = _evaluate(rule, ops, "conv_bn_relu", _render(rule, ops, "conv_bn_relu", conv, "cpu"))
    assert ev.status == "ok", ev.reason


def test_conv_bn_fold_matches_folds_lazily_and_runs_on_cpu(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["conv-bn-fold"]
    conv, linear = _facts(ops, "conv_bn_relu"), _facts(ops, "linear_relu")
    assert conv["rewrites"]["conv_bn_fold"]["applied"]
    assert rule.matches(conv, "cpu", "kernelbench", NONE) is None
    assert rule.matches(linear, "cpu", "kernelbench", NONE) is not None
    source = _render(rule, ops, "conv_bn_relu", conv, "cpu")
    assert "conv_bn_fold(" in source.split("class ModelNew")[1]
    # Folded from the weights the model holds at its first call, not at construction (the harness loads
    # the reference's weights after construction): BN statistics set afterwards must be honoured.
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    torch.manual_seed(0)
    model, new = namespace["Model"](3, 8).eval(), namespace["ModelNew"](3, 8).eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        model.bn.weight.uniform_(0.5, 1.5)
        model.bn.bias.uniform_(-1, 1)
        new.load_state_dict(model.state_dict())
        x = torch.randn(2, 3, 16, 16)
        torch.testing.assert_close(new(x), model(x), atol=1e-5, rtol=1e-5)
    ev = _evaluate(rule, ops, "conv_bn_relu", source)
    assert ev.status == "ok", ev.reason


def _render_rewrite(rule: Rule, root: Path, name: str, facts: dict[str, Any]) -> str:
    """A rewrite rule's candidate, built by the search agent (templates/kernels/fx_forward.py.j2)."""
    task = Task(
        kernelbench_spec(f"{name}.py"),
        root,
        "cpu",
        (root / f"{name}.py").read_text(),
        PrecisionPolicy(),
        facts,
    )
    source = SearchAgent([rule]).build(rule, task)
    assert source is not None
    return source


def test_conv1x1_matmul_rewrites_only_plain_pointwise_convs_and_runs_on_cpu(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["conv1x1-matmul"]
    facts = analyze(_job(ops, "pointwise_convs"), ["conv1x1_matmul"])
    rewrite = facts["rewrites"]["conv1x1_matmul"]
    assert rewrite["description"].endswith("(pw, pw_nobias)")  # not the 3x3, strided, grouped or padded ones
    assert rule.matches(facts, "cpu", "kernelbench", NONE) is None
    assert rule.matches(facts, "cuda", "kernelbench", NONE) is None
    others = analyze(_job(ops, "conv_bn_relu"), ["conv1x1_matmul"])  # a 3x3 convolution only
    assert rule.matches(others, "cuda", "kernelbench", NONE) is not None
    code = rewrite["forward_code"]
    # Two products, one bias (pw_nobias has none); the other four convolutions stay as they were.
    assert code.count("torch.matmul(") == 2 and code.count("torch.add(") == 1
    assert "self.pw(" not in code and all(
        f"self.{m}(" in code for m in ("k3", "strided", "grouped", "padded")
    )
    source = _render_rewrite(rule, ops, "pointwise_convs", facts)
    ev = _evaluate(rule, ops, "pointwise_convs", source)  # verified on fresh inputs at the float32 tolerance
    assert ev.status == "ok", ev.reason


def test_split_k_linear_splits_only_skinny_long_layers_and_runs_on_cpu(
    ops: Path, rules: dict[str, Rule], tmp_path: Path
) -> None:
    rule = rules["split-k-linear"]
    facts = analyze(_job(ops, "skinny_mlp"), ["split_k_linear"])
    rewrite = facts["rewrites"]["split_k_linear"]
    assert rewrite["description"].endswith("up (K 1024 in 4), linear (K 512 in 2)")  # not `down` (K 40)
    assert rewrite["forward_code"].count("torch.bmm(") == 2 and "self.down(" in rewrite["forward_code"]
    assert rule.matches(facts, "cuda", "kernelbench", NONE) is None
    assert rule.matches(facts, "cpu", "kernelbench", NONE) == "not for cpu"  # a GPU occupancy fix
    ev = _evaluate(rule, ops, "skinny_mlp", _render_rewrite(rule, ops, "skinny_mlp", facts))
    assert ev.status == "ok", ev.reason  # verified on fresh inputs at the float32 tolerance
    wide = (ops / "skinny_mlp.py").read_text().replace("torch.randn(2, 3, 1024)", "torch.randn(65, 1024)")
    (tmp_path / "wide_mlp.py").write_text(wide)  # 65 rows: enough tiles already
    assert not analyze(_job(tmp_path, "wide_mlp"), ["split_k_linear"])["rewrites"]["split_k_linear"][
        "applied"
    ]


def test_conv_bn_fold_without_the_rewrite_renders_a_clear_build_error(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["conv-bn-fold"]
    facts = {**_facts(ops, "conv_bn_relu"), "rewrites": {}}
    source = _render(rule, ops, "conv_bn_relu", facts, "cpu")
    assert "raise ImportError" in source


def test_bf16_autocast_only_where_allowed_and_runs_on_cpu(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["bf16-autocast"]
    facts = _facts(ops, "linear_relu")
    assert rule.matches(facts, "cpu", "kernelbench", ALL) is None
    assert rule.matches(facts, "cuda", "kernelbench", ALL) is None
    assert "bf16 not allowed" in (rule.matches(facts, "cpu", "kernelbench", NONE) or "")
    ev = _evaluate(rule, ops, "linear_relu", _render(rule, ops, "linear_relu", facts, "cpu"))
    assert ev.status == "ok", ev.reason


def test_fused_epilogue_fires_on_a_chain_not_on_one_op(ops: Path, rules: dict[str, Rule]) -> None:
    rule = rules["fused-elementwise-epilogue"]
    chain, single = _facts(ops, "linear_gelu_scale_clamp"), _facts(ops, "linear_relu")
    assert chain["epilogue"]["ops"] == ["gelu", "mul", "clamp"]
    assert rule.matches(chain, "cuda", "kernelbench", NONE) is None
    assert rule.matches(chain, "cpu", "kernelbench", NONE) == "not for cpu"
    assert rule.matches(single, "cuda", "kernelbench", NONE) is not None
    assert single["epilogue"] is None
    source = _render(rule, ops, "linear_gelu_scale_clamp", chain, "cuda")  # scanned with require_kernel
    assert "cupy.RawKernel" in source and "class ModelNew(nn.Module)" in source
    tree = ast.parse(source)  # the reference class is not in the candidate at all
    assert not any(
        isinstance(n, ast.Name | ast.ClassDef) and getattr(n, "id", getattr(n, "name", "")) == "Model"
        for n in ast.walk(tree)
    )


def test_fused_epilogue_fires_on_a_pointwise_graph_not_only_a_chain(
    ops: Path, rules: dict[str, Rule], tmp_path: Path
) -> None:
    """x * sigmoid(x) ends in a product of two tensors: the tail is a graph the kernel fuses, not a chain."""
    rule = rules["fused-elementwise-epilogue"]
    soup = _facts(ops, "pointwise_soup")
    assert soup["pointwise_tail"] == len(soup["epilogue"]["ops"]) >= 10
    assert rule.matches(soup, "cuda", "kernelbench", NONE) is None
    (tmp_path / "silu.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.sigmoid(x)\n\ndef get_inputs():\n    return [torch.randn(4, 8)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    silu = analyze(_job(tmp_path, "silu"), [])
    assert silu["epilogue"]["ops"] == ["sigmoid", "mul"] and silu["pointwise_tail"] == 2
    assert rule.matches(silu, "cuda", "kernelbench", NONE) is None
    single = _facts(ops, "linear_relu")
    assert single["pointwise_tail"] == 0
    assert rule.matches(single, "cuda", "kernelbench", NONE) == "needs a fusable tail of 2 pointwise ops"


def _kernel_source(candidate: str) -> str:
    """The CUDA source a fused-epilogue candidate hands to CuPy."""
    cuda = re.search(r'_SOURCE = r"""(.*?)"""', candidate, re.S)
    assert cuda is not None
    return cuda.group(1)


def _cpu_kernel(source: str, tmp: Path) -> Any:
    """The generated CUDA kernels compiled as C++ for one CPU 'thread' (a grid of 1x1), to check their math."""
    shim = textwrap.dedent("""
        #include <cmath>
        struct Dim { long long x; };
        struct float4 { float x, y, z, w; };
        static const Dim blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
        #define __global__
        #define __device__
        #define __forceinline__ inline
        #define __restrict__
        #include <cstring>
        inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
        inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
    """)
    (tmp / "k.cpp").write_text(shim + _kernel_source(source))
    subprocess.run(
        ["g++", "-O1", "-shared", "-fPIC", "-o", str(tmp / "k.so"), str(tmp / "k.cpp")], check=True
    )
    return ctypes.CDLL(str(tmp / "k.so"))


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to check the generated kernel's math on CPU")
@pytest.mark.parametrize(
    ("name", "lanes"),
    [
        ("linear_gelu_scale_clamp", ["vector"]),
        ("pointwise_soup", ["vector", "vector"]),
        ("scale_bias_gelu", None),  # a bias along a last dimension of 5: one element at a time only
        ("bias_rowscale_powers", ["vector", "vector", "scalar"]),
    ],
)
def test_fused_epilogue_kernel_math_matches_torch(
    ops: Path, rules: dict[str, Rule], tmp_path: Path, name: str, lanes: list[str] | None
) -> None:
    rule = rules["fused-elementwise-epilogue"]
    facts = _facts(ops, name)
    assert facts["epilogue"]["lanes"] == lanes
    source = _render(rule, ops, name, facts, "cuda")
    lib = _cpu_kernel(source, tmp_path)
    kernels = re.findall(r'extern "C" __global__ void (\w+)\(', source)
    assert len(kernels) == (2 if lanes else 1) and kernels[1:] == [f"{kernels[0]}_x4"] * bool(lanes)
    namespace: dict[str, Any] = {}
    operator_module = (ops / f"{name}.py").read_text()
    exec(compile(operator_module, "operator", "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
    candidate: dict[str, Any] = {"cupy": None}
    exec(compile(source.replace("import cupy", "cupy = None"), "candidate", "exec"), candidate)
    new = candidate["ModelNew"](*namespace["get_init_inputs"]()).eval()
    new.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    args = namespace["get_inputs"]()
    with torch.no_grad():
        ref = model(*args)
        inputs = [t.contiguous() for t in new.prefix(*args)]
    # Each kernel on its own: the one-element kernel is the four-wide one's fallback.
    for kernel in kernels:
        out = torch.full_like(ref, float("nan"))
        pointers = [ctypes.c_void_p(t.data_ptr()) for t in inputs] + [ctypes.c_void_p(out.data_ptr())]
        getattr(lib, kernel)(*pointers, ctypes.c_longlong(out.numel()))
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5, msg=kernel)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc to compile the generated kernels for a GPU")
def test_fused_epilogue_kernels_compile_for_hopper_with_16_byte_accesses_where_four_wide(
    ops: Path, rules: dict[str, Rule], tmp_path: Path
) -> None:
    source = _render(
        rules["fused-elementwise-epilogue"],
        ops,
        "bias_rowscale_powers",
        _facts(ops, "bias_rowscale_powers"),
        "cuda",
    )
    (tmp_path / "k.cu").write_text(_kernel_source(source))
    subprocess.run(
        ["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(tmp_path / "k.cu")], check=True
    )
    ptx = (tmp_path / "k.ptx").read_text()
    parts = re.split(r"\.entry (\w+)\(", ptx)[1:]  # name, body, name, body
    bodies = dict(zip(parts[::2], parts[1::2], strict=True))
    (one, four) = (bodies[n] for n in sorted(bodies, key=len))  # `fused_epilogue_12`, `fused_epilogue_12_x4`
    assert len(bodies) == 2 and "v4" not in one
    assert four.count("ld.global.nc.v4.f32") >= 2 and "st.global.v4.f32" in four  # x and the bias four-wide


def test_epilogue_fuses_literal_powers_and_refuses_tensor_exponents(tmp_path: Path) -> None:
    (tmp_path / "powers.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x, e):\n"
        "        return torch.pow(x, 3.0) + x.pow(2) + x ** 0.5 + torch.pow(x, 1.7) + torch.pow(x, e)\n\n"
        "def get_inputs():\n    return [torch.rand(4, 8) + 0.1, torch.rand(4, 8)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    described = epilogue.describe_job(_job(tmp_path, "powers"))
    assert described is not None
    exprs = [s["expr"] for s in described["statements"] if s["op"] == "pow"]
    assert exprs == ["(x0 * x0 * x0)", "(x0 * x0)", "sqrtf(x0)", "powf(x0, 1.7f)"]  # x ** e stays in PyTorch
    assert described["inputs"] == 2  # x, and the tensor power computed before the kernel


def test_epilogue_reads_broadcast_operands_in_place(ops: Path) -> None:
    described = epilogue.describe_job(_job(ops, "scale_bias_gelu"))
    assert described is not None
    assert described["ops"] == ["mul", "add", "gelu", "clamp"]  # the scale and the bias are fused too
    assert described["input_shapes"] == [[2, 3, 4, 5], [3, 1, 1], [5]]
    assert described["index"] == ["i", "((i / 20LL) % 3LL)", "(i % 5LL)"]
    assert epilogue.index_expression((4, 1), (2, 4, 3)) == "((i / 3LL) % 4LL)"
    assert epilogue.index_expression((2, 1, 3), (2, 4, 3)) == "(i / 12LL) * 3LL + (i % 3LL)"
    assert epilogue.index_expression((1,), (7, 5)) == "0"


def test_a_broadcasting_epilogue_refuses_shapes_it_was_not_built_for(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["fused-elementwise-epilogue"]
    source = _render(rule, ops, "scale_bias_gelu", _facts(ops, "scale_bias_gelu"), "cuda")
    candidate: dict[str, Any] = {}
    exec(compile(source.replace("import cupy", "cupy = None"), "candidate", "exec"), candidate)
    with pytest.raises(ValueError, match=r"built for input shapes \[\[2, 3, 4, 5\], \[3, 1, 1\], \[5\]\]"):
        candidate["_launch"]([torch.zeros(2, 3, 4, 6), torch.zeros(3, 1, 1), torch.zeros(6)])


def test_fused_epilogue_without_a_described_chain_renders_a_clear_build_error(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["fused-elementwise-epilogue"]
    facts = {k: v for k, v in _facts(ops, "linear_gelu_scale_clamp").items() if k != "epilogue"}
    assert "raise ImportError" in _render(rule, ops, "linear_gelu_scale_clamp", facts, "cuda")


@pytest.mark.slow  # ~25 s (torch.compile on the CPU)
def test_reduce_overhead_candidate_hands_out_copies_and_runs_on_cpu(
    ops: Path, rules: dict[str, Rule]
) -> None:
    """CUDA-graph outputs are overwritten by the next replay; the harness keeps outputs, so the rule clones them."""
    rule = rules["compile-reduce-overhead"]
    assert rule.matches(_facts(ops, "linear_relu", eager_ms=0.05), "cuda", "kernelbench", NONE) is None
    source = _render(rule, ops, "linear_relu", _facts(ops, "linear_relu"), "cpu")
    assert "out.clone()" in source
    ev = _evaluate(rule, ops, "linear_relu", source)  # on the CPU inductor runs without graphs: the code path
    assert ev.status == "ok", ev.reason


def test_only_a_tf32_candidate_may_switch_tf32_on(ops: Path) -> None:
    """The reference, baselines and exact candidates run pinned to full float32; a TF32 candidate gets TF32's
    tolerance and the leave to switch TF32 on inside its own calls, never the whole sandbox."""
    from kernelbot.spec import kernelbench_spec

    job = kernelbench_spec("linear_relu.py").job(ops, "cuda")
    assert job["allow_tf32"] is False and job_at_precision(job, "exact") == job
    relaxed = job_at_precision(job, "tf32")
    assert relaxed["allow_tf32"] is False and relaxed["candidate_precision"] == "tf32"
    assert relaxed["atol"] == relaxed["rtol"] == 1e-2


def _stacked(rule: Rule, ops: Path, name: str, base_rule: Rule, base_source: str) -> str:
    """The search agent's stack: the wrapper rule's template subclassing the earlier candidate's ModelNew."""
    from kernelbot.agents.base import Proposal, Task
    from kernelbot.agents.search import SearchAgent
    from kernelbot.config import PrecisionPolicy
    from kernelbot.spec import kernelbench_spec

    task = Task(
        kernelbench_spec(f"{name}.py"), ops, "cpu", (ops / f"{name}.py").read_text(), PrecisionPolicy(), {}
    )
    source = SearchAgent([rule]).build(
        rule, task, on=Proposal(base_source, origin=base_rule.id, description="")
    )
    assert source is not None
    return source


@pytest.mark.slow  # ~30 s (torch.compile on the CPU)
def test_conv_bn_fold_under_a_stacked_compile_folds_eagerly_and_runs_on_cpu(
    ops: Path, rules: dict[str, Rule]
) -> None:
    # On the H200, reduce-overhead on the fold crashed: the fold ran inside the compiled CUDA graph and its
    # cached weights were overwritten by the next replay. The fold now always runs eagerly (a graph break).
    fold = _render(rules["conv-bn-fold"], ops, "conv_bn_relu", _facts(ops, "conv_bn_relu"), "cpu")
    assert "@torch.compiler.disable\ndef _folded(" in fold
    source = _stacked(rules["compile-reduce-overhead"], ops, "conv_bn_relu", rules["conv-bn-fold"], fold)
    ast.parse(source)
    assert source.count("class ModelNew(ModelNew):") == 1
    ev = _evaluate(rules["compile-reduce-overhead"], ops, "conv_bn_relu", source)
    assert ev.status == "ok", ev.reason


def test_a_compile_mode_stacked_on_the_fused_epilogue_passes_the_kernel_check(
    ops: Path, rules: dict[str, Rule]
) -> None:
    # Its super().forward is the kernel candidate's, and the CuPy launch is kept out of the compiled graph.
    name = "linear_gelu_scale_clamp"
    kernel = _render(rules["fused-elementwise-epilogue"], ops, name, _facts(ops, name), "cuda")
    assert "@torch.compiler.disable\ndef _launch(" in kernel
    for wrapper in ("compile-max-autotune", "tf32-matmul"):
        source = _stacked(rules[wrapper], ops, name, rules["fused-elementwise-epilogue"], kernel)
        assert scan(source, allow_tf32=True, require_kernel=True) == [], wrapper


def _errors_against_float64(candidate: dict[str, Any], inputs: list[torch.Tensor]) -> tuple[float, float]:
    """(ModelNew's, Model's) RMS error against Model in float64, on the CPU, where TF32 is a no-op: so a
    tf32x3 candidate's error here is its split-and-sum arithmetic's alone. RMS, as the protocol's float64 rule
    compares errors: the largest single error of one draw swings with the seed and the CPU's kernels."""
    model, new = candidate["Model"]().eval(), candidate["ModelNew"]().eval()
    new.load_state_dict(model.state_dict())
    with torch.no_grad():
        truth = model.double()(*[t.double() for t in inputs])
        model.float()
        return (
            (new(*inputs).double() - truth).pow(2).mean().sqrt().item(),
            (model(*inputs).double() - truth).pow(2).mean().sqrt().item(),
        )


def test_tf32x3_fires_on_float32_products_on_cuda_where_the_policy_allows(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["tf32x3-matmul"]
    facts = _facts(ops, "products")
    assert facts["rewrites"]["tf32x3_products"]["applied"]
    assert "4 float32 matrix product(s)" in facts["rewrites"]["tf32x3_products"]["description"]
    assert rule.matches(facts, "cuda", "kernelbench", NONE | {"allow_tf32x3": True}) is None
    assert rule.matches(facts, "cuda", "kernelbench", {"allow_tf32x3": False}) == (
        "tf32x3 not allowed by the precision policy"
    )
    assert rule.matches(facts, "cpu", "kernelbench", {"allow_tf32x3": True}) == "not for cpu"
    assert rule.matches(_facts(ops, "pointwise_soup"), "cuda", "kernelbench", {"allow_tf32x3": True}) == (
        "pattern not found in the graph"
    )
    conv = _facts(ops, "conv_bn_relu")  # a convolution is a product too: a sum over its input channels
    assert rule.matches(conv, "cuda", "kernelbench", {"allow_tf32x3": True}) is None


def test_tf32x3_computes_one_group_convolutions_over_tripled_channels(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["tf32x3-matmul"]
    facts = _facts(ops, "conv_family")
    assert (
        "3 float32 matrix product(s) or convolution(s)" in facts["rewrites"]["tf32x3_products"]["description"]
    )
    source = _render(rule, ops, "conv_family", facts, "cuda")
    forward = source.split("class ModelNew")[1]
    assert forward.count("tf32x3_conv(") == 3  # transposed, 1-d, 3-d; not the grouped or circular ones
    assert "self.dw(" in forward and "self.circ(" in forward
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    torch.manual_seed(0)
    emulated_error, fp32_error = _errors_against_float64(namespace, namespace["get_inputs"]())
    assert emulated_error < 4 * fp32_error, (emulated_error, fp32_error)  # the tripled channels sum the three
    ev = _evaluate(rule, ops, "conv_family", source)
    assert ev.status == "ok", ev.reason


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to check the generated kernel's math on CPU")
@pytest.mark.parametrize("left", [True, False])
def test_tf32x3_split_kernel_writes_what_the_pytorch_split_does_bit_for_bit(
    ops: Path, rules: dict[str, Rule], tmp_path: Path, left: bool
) -> None:
    source = _render(rules["tf32x3-matmul"], ops, "products", _facts(ops, "products"), "cuda")
    lib = _cpu_kernel(source, tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    x = torch.randn(3, 8, 5) * torch.logspace(-20, 20, 5)  # stacked along dim 1: outer 3, inner 8 * 5 = 40
    expected = namespace["_stacked"](x, 1, left=left)  # a CPU tensor: the PyTorch ops
    out = torch.full((3, 24, 5), float("nan"))
    lib.tf32x3_split(
        ctypes.c_void_p(x.data_ptr()),
        ctypes.c_void_p(out.data_ptr()),
        ctypes.c_longlong(x.numel() // 4),
        ctypes.c_longlong(40 // 4),
        ctypes.c_longlong(int(left)),
    )
    assert torch.equal(out.view(torch.int32), expected.view(torch.int32))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc to compile the generated kernels for a GPU")
def test_tf32x3_split_kernel_compiles_for_hopper_with_16_byte_accesses(
    ops: Path, rules: dict[str, Rule], tmp_path: Path
) -> None:
    source = _render(rules["tf32x3-matmul"], ops, "products", _facts(ops, "products"), "cuda")
    (tmp_path / "k.cu").write_text(_kernel_source(source))
    subprocess.run(
        ["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(tmp_path / "k.cu")], check=True
    )
    ptx = (tmp_path / "k.ptx").read_text()
    assert ".entry tf32x3_split(" in ptx
    loads = len(re.findall(r"ld\.global\.nc\.v4\.f32", ptx))  # the loop is unrolled: several copies
    stores = len(re.findall(r"st\.global\.v4\.[fub]32", ptx))  # the bit-masked values store as u32
    assert loads >= 1 and stores == 3 * loads  # one 16-byte read, three 16-byte writes, in every copy
    assert not re.search(r"(ld|st)\.global(\.nc)?\.f32", ptx)  # and no access one float wide


def test_tf32x3_splits_operands_into_tf32_values_and_keeps_the_float32_tolerance(
    ops: Path, rules: dict[str, Rule]
) -> None:
    rule = rules["tf32x3-matmul"]
    source = _render(rule, ops, "products", _facts(ops, "products"), "cuda")
    forward = source.split("class ModelNew")[1]
    assert forward.count("tf32x3_matmul(") == 3 and forward.count("tf32x3_linear(") == 1
    # It switches TF32 on inside its products: only a tf32 or tf32x3 candidate's scan allows that.
    assert any(f.rule == "precision-flag" for f in scan(source, allow_tf32=False))
    job = _job(ops, "products")
    assert job_at_precision(job, "tf32x3") == {**job, "candidate_precision": "tf32x3"}  # tolerance unchanged

    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    x = torch.randn(4096) * torch.logspace(-20, 20, 4096)  # float32 values over 40 decades
    hi, lo = namespace["_split"](x)
    for part in (hi, lo):  # both TF32 values: the low 13 mantissa bits are zero
        assert not (part.view(torch.int32) & 0x1FFF).any()
    assert ((hi.double() + lo.double() - x.double()).abs() <= 2**-21 * x.double().abs()).all()

    torch.manual_seed(0)
    inputs = [torch.randn(4, 24, 512), torch.randn(4, 512, 32), torch.randn(40)]
    emulated_error, fp32_error = _errors_against_float64(namespace, inputs)
    assert emulated_error < 4 * fp32_error, (
        emulated_error,
        fp32_error,
    )  # the split-and-sum arithmetic itself
    ev = _evaluate(rule, ops, "products", source)
    assert ev.status == "ok", ev.reason


def test_tf32x3_splits_a_weight_once_per_version_and_keeps_gradients(
    ops: Path, rules: dict[str, Rule]
) -> None:
    source = _render(rules["tf32x3-matmul"], ops, "linear_relu", _facts(ops, "linear_relu"), "cuda")
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate", "exec"), namespace)
    model, new = namespace["Model"](), namespace["ModelNew"]()
    new.load_state_dict(model.state_dict())
    x = torch.randn(8, 64)
    with torch.no_grad():
        new(x)
        cached = new.lin.weight.__dict__["_kernelbot_tf32x3"]
        new(x)
        assert new.lin.weight.__dict__["_kernelbot_tf32x3"] is cached  # same version: not split again
        new.lin.weight.mul_(-1)  # an in-place update (an optimizer step, load_state_dict) bumps the version
        model.lin.weight.mul_(-1)
        torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
        assert new.lin.weight.__dict__["_kernelbot_tf32x3"] is not cached
    # With autograd recording, the bit split (no gradient) is skipped: the product stays differentiable.
    new(x).sum().backward()
    model(x).sum().backward()
    assert new.lin.weight.grad is not None and model.lin.weight.grad is not None
    torch.testing.assert_close(new.lin.weight.grad, model.lin.weight.grad)
