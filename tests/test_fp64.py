"""Correctness against a float64 run of the reference: exact rewrites that sum in another order pass where
the elementwise tolerance rejects them; lower precision, zeros and NaN references do not (issue: real-size
operators). The problem is the one seen on the H200 at its real inner dimension, 8192."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelbot.harness import compare
from kernelbot.harness.evaluate import Settings, evaluate
from kernelbot.harness.results import Evaluation

SETTINGS = Settings(time_budget_s=0.3, min_samples=10, max_samples=12, timeout_s=300, seeds=2)

# sum(x @ W.T, dim=1) with rows of W that cancel in pairs: outputs of ~80 from 8192 terms of ~90 each, where
# the float32 reference itself is only accurate to ~3e-3 (measured: 20 of 128 elements of the exact rewrite
# x @ W.sum(0) fall outside 1e-4, its RMS error against float64 is 0.4x the reference's, TF32's ~700x).
OPERATOR = """
import torch

class Model(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        a = torch.randn(n // 2, k)
        self.w = torch.nn.Parameter(torch.cat([a, -a]) + 0.01 * torch.randn(n, k))

    def forward(self, x):
        return torch.sum(x @ self.w.T, dim=1, keepdim=True)

def get_inputs():
    return [torch.randn(128, 8192)]

def get_init_inputs():
    return [8192, 8192]
"""

CANDIDATE = """
import torch

def tf32(t):  # what TF32 Tensor Cores keep of a float32 input: 10 mantissa bits
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)

class ModelNew(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(n, k))

    def forward(self, x):
        return {body}
"""

BODIES = {
    "exact": "(x @ self.w.sum(0)).unsqueeze(1)",
    "tf32": "torch.sum(tf32(x) @ tf32(self.w).T, dim=1, keepdim=True)",
    "bf16": "(x.bfloat16() @ self.w.sum(0).bfloat16()).float().unsqueeze(1)",
    "zeros": "torch.zeros(x.shape[0], 1)",
}


@pytest.fixture(scope="module")
def problem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fp64")
    (root / "sum_matmul.py").write_text(OPERATOR)
    for name, body in BODIES.items():
        (root / f"{name}.py").write_text(CANDIDATE.format(body=body))
    return root


def _check(root: Path, name: str, time_it: bool = False) -> Evaluation:
    job = {"kind": "kernelbench", "root": str(root), "file": "sum_matmul.py", "device": "cpu"}
    return evaluate(job, "candidate", SETTINGS, candidate=str(root / f"{name}.py"), time_it=time_it)


def test_the_exact_rewrite_passes_by_the_float64_rule(problem: Path) -> None:
    # Timed too: the re-check of the timed calls' outputs holds them to the same rule (on the H200 it did
    # not, and the exact rewrite was called incorrect after passing the check).
    ev = _check(problem, "exact", time_it=True)
    assert ev.ok, ev.reason
    assert ev.timing is not None
    assert ev.by_fp64  # the elementwise rule alone rejects it (values that cancel to ~1e2 from ~1e5)
    assert ev.fp64_ratio is not None and ev.fp64_ratio <= compare.GOLDEN_MULTIPLIER
    assert ev.public()["fp64_ratio"] == ev.fp64_ratio


@pytest.mark.parametrize("name", ["tf32", "bf16", "zeros"])
def test_lower_precision_or_zeros_fail_both_rules(problem: Path, name: str) -> None:
    ev = _check(problem, name)
    assert ev.status == "incorrect", (ev.status, ev.reason)
    assert "against float64" in ev.reason and ev.fp64_ratio is not None and ev.fp64_ratio > 10


def _check_operator(tmp_path: Path, forward: str) -> Evaluation:
    """The check of an operator whose forward(x) on an 8 x 8 input is the one line `forward`."""
    (tmp_path / "op.py").write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        f"        {forward}\n"
        "def get_inputs():\n    return [torch.randn(8, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    job = {"kind": "kernelbench", "root": str(tmp_path), "file": "op.py", "device": "cpu"}
    return evaluate(job, "operator", SETTINGS, time_it=False)


def test_an_all_nan_reference_is_an_operator_error(tmp_path: Path) -> None:
    ev = _check_operator(tmp_path, "return x * float('nan')")
    assert ev.status == "operator_error" and "all NaN" in ev.reason


def test_an_operator_out_of_gpu_memory_gets_one_line_with_the_fix(tmp_path: Path) -> None:
    """Its working set does not fit (a 6.4 GB operator on an 80 GB H100): one line, not torch's paragraph."""
    ev = _check_operator(
        tmp_path,
        "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 11.92 GiB. GPU 0 has a total "
        "capacity of 79.18 GiB of which 5.94 GiB is free.\\nSee docs')",
    )
    assert ev.status == "operator_error", ev.reason
    assert "\n" not in ev.reason and "ran out of GPU memory" in ev.reason, ev.reason
    assert "Tried to allocate 11.92 GiB" in ev.reason and "smaller shape" in ev.reason
    assert "total capacity" not in ev.reason  # torch's advice on allocator settings is left out


def test_without_a_float64_run_the_elementwise_rule_decides_and_says_so() -> None:
    ref, out = torch.ones(100), torch.ones(100) + 1e-2

    def unavailable() -> list[torch.Tensor] | str:
        return "the operator in float64 raised RuntimeError: no double kernel"

    with pytest.raises(compare.Mismatch, match=r"float64 check could not run: .*no double kernel"):
        compare.compare(out, ref, None, None, compare.Golden(unavailable))


def test_the_float64_rule_allows_twice_the_references_error_and_no_more() -> None:
    golden = torch.linspace(1.0, 2.0, 1000, dtype=torch.float64)
    noise = torch.linspace(-1.0, 1.0, 1000, dtype=torch.float64).sin()
    ref = golden + 1e-3 * noise  # the float32 reference's own error
    assert compare.fp64_rule(golden + 1.9e-3 * noise, ref, golden, torch.float32)[0]
    assert not compare.fp64_rule(golden + 2.2e-3 * noise, ref, golden, torch.float32)[0]


def test_an_output_below_atol_is_compared_at_its_own_scale() -> None:
    """Attacker round 54: a softmax over 4M pixels is ~1e-7 an element, so zeros lay within atol=1e-4 of every
    element and passed (reward 2, no work). Under the default tolerance atol counts at most ATOL_SHARE x rtol
    of the output's RMS now: zeros, fp16 rounding or a 1% error fail, float32 rounding passes; an output of
    ordinary scale keeps the elementwise rule's allowance; an atol the operator declares is left alone."""
    gen = torch.Generator().manual_seed(7)
    probs = torch.softmax(0.5 * torch.randn(1 << 18, generator=gen), 0)  # every element < 5e-5 < atol
    rounded = torch.softmax(0.5 * torch.randn(1 << 18, generator=gen.manual_seed(7)).double(), 0).float()
    assert compare.compare(rounded, probs, None, None).max_abs < 1e-9  # another order of the same sums
    for wrong in (torch.zeros_like(probs), probs * 1.01, probs.half().float()):
        assert bool(((wrong - probs).abs() <= 1e-4).all())  # the elementwise rule alone passes each
        with pytest.raises(
            compare.Mismatch, match=r"RMS error .* the reference's RMS .* compared at its own scale"
        ):
            compare.compare(wrong, probs, None, None)
        compare.compare(wrong, probs, 1e-4, 1e-4, at_scale=False)  # declared by the operator: its own word
    # RMS ~0.76, every element 1.5e-4 off in proportion: inside the elementwise rule, and inside the scale
    # rule only by the atol it allows (with no share of atol it would fail)
    ordinary = 0.5 + 0.5 * torch.rand(4096, generator=gen)
    assert compare.compare(ordinary * (1 + 1.5e-4), ordinary, None, None).max_abs < 2e-4
    loss = torch.tensor(5e-7)  # a scalar loss of near-equal distributions, below atol
    assert compare.compare(loss * 1.005, loss, None, None).max_abs < 1e-8  # its rounding can be a ratio
    with pytest.raises(compare.Mismatch, match=r"compared at its own scale"):
        compare.compare(torch.zeros_like(loss), loss, None, None)


def test_an_output_below_atol_that_fails_its_scale_may_pass_by_the_float64_rule() -> None:
    """As the elementwise rule: the scale rule's rejection is rescued where the error is rounding the float32
    reference shares (cancellation), and not where the output is simply wrong."""
    golden = torch.linspace(1e-6, 2e-6, 1000, dtype=torch.float64)
    noise = torch.linspace(-1.0, 1.0, 1000, dtype=torch.float64).sin()
    ref = (golden + 1e-7 * noise).float()  # a reference only 5% accurate at this scale
    near = (golden - 1e-7 * noise).float()  # as far from float64 the other way: 20x ref's RMS x rtol
    assert compare.compare(near, ref, None, None, compare.Golden(lambda: [golden])).by_fp64
    with pytest.raises(compare.Mismatch, match=r"own scale.*at most 2x .*, 1 of 1 fail"):
        compare.compare(torch.zeros_like(ref), ref, None, None, compare.Golden(lambda: [golden]))


def test_a_region_below_atol_under_a_large_one_is_compared_at_its_own_scale() -> None:
    """Attacker round 57: rows decaying by 0.9 a position, zeros past row 160 (84% of the output, every zeroed
    element within atol). Over the whole output the top rows' RMS paid for the zeros; block by block it does
    not, and the float64 rule over each block does not rescue them. Rounding passes, even where the rows
    underflow (the float32 reference is itself far off there)."""
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(1024, 256, generator=gen).double(), torch.randn(256, 256, generator=gen).double() / 16
    decay = 0.9 ** torch.arange(1024, dtype=torch.float64)
    golden = (x @ w) * decay[:, None]
    ref = (x.float() @ w.float()) * decay.float()[:, None]
    other = (x.float() * decay.float()[:, None]) @ w.float()  # the same product, another rounding
    zeros = ref.clone()
    zeros[160:] = 0
    assert bool(((zeros - ref).abs() <= 1e-4).all())  # the elementwise rule alone passes
    whole = torch.linalg.vector_norm(zeros - ref) / torch.linalg.vector_norm(ref)
    assert whole < 1e-6  # and over the whole output the error is nothing
    with pytest.raises(compare.Mismatch, match=r"over its elements \[160, 0\] to \[175, 255\], the first of"):
        compare.compare(zeros, ref, None, None)
    with pytest.raises(
        compare.Mismatch, match=r"float64 rule over each such run alone .* [1-9]\d* of \d+ fail"
    ):
        compare.compare(zeros, ref, None, None, compare.Golden(lambda: [golden]))
    compare.compare(other, ref, None, None, compare.Golden(lambda: [golden]))
    compare.compare(zeros, ref, 1e-4, 1e-4, at_scale=False)  # an atol the operator declares: its own word


def test_the_scale_rule_by_blocks_is_the_same_a_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks that do not fall on block boundaries (the last block of each chunk is short) find the same
    first block off its scale."""
    ref = torch.cat([torch.ones(5000), torch.full((5000,), 1e-7)])
    out = ref.clone()
    out[8192:8400] = 0
    said = []
    for chunk in (1 << 24, 3000):
        monkeypatch.setattr(compare, "CHUNK", chunk)
        with pytest.raises(compare.Mismatch) as caught:
            compare.compare(out, ref, None, None)
        said.append(str(caught.value))
    assert "over its elements [8192] to [9999]" in said[0] and "over its elements [6000] to [8999]" in said[1]


@pytest.mark.parametrize("chunk", [7, 1 << 24])
def test_the_comparison_a_chunk_at_a_time_says_what_the_whole_tensor_says(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Multi-GB outputs are compared in chunks (a 6.4 GB one ran the H200 out of memory whole): the same
    # errors, the same float64 figures and the same first wrong element, at any chunk size.
    monkeypatch.setattr(compare, "CHUNK", chunk)
    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(5, 9, generator=gen)
    golden = compare.Golden(lambda: [ref.double() + 1e-9])
    near = ref + 1e-7 * torch.randn(5, 9, generator=gen)
    err = compare.compare(near, ref, None, None, golden)
    golden.get()
    again = compare.compare(near, ref, None, None, golden)
    assert err.max_abs == pytest.approx(float((near - ref).abs().max()), rel=1e-12)
    assert again.fp64_err is not None and again.fp64_ref_err == pytest.approx(1e-9, rel=1e-3)
    wrong = ref.clone()
    wrong[3, 4] += 1.0
    wrong[4, 8] += 1.0
    with pytest.raises(compare.Mismatch, match=r"2 of 45 elements .* first at \[3, 4\]"):
        compare.compare(wrong, ref, None, None)
    nan = ref.clone()
    nan[2, 7] = float("nan")
    with pytest.raises(compare.Mismatch, match=r"NaN/Inf where the reference has none, first at \[2, 7\]"):
        compare.compare(nan, ref, None, None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_fast_path_for_finite_chunks_counts_what_the_special_value_path_counts(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks where both sides are finite skip the NaN/Inf masks (a compile baseline's rounding sent every
    # chunk through them: 72 s of a 140 s check on the CPU). Chunks with and without special values must give
    # the figures a plain float64 computation over the whole tensor gives, and neither path may touch the
    # output it reads (o.double() is o itself in float64).
    monkeypatch.setattr(compare, "CHUNK", 500)
    gen = torch.Generator().manual_seed(5)
    ref = torch.randn(4000, generator=gen).to(dtype)
    ref[::9] = 0
    ref[1234], ref[3001] = float("nan"), float("-inf")  # two chunks through the special-value path
    out = (ref.double() + 3e-4 * torch.randn(4000, generator=gen, dtype=torch.float64)).to(dtype)
    out[1234], out[3001] = float("nan"), float("-inf")
    kept = out.clone()
    special = torch.isnan(ref) | torch.isinf(ref)
    o64, r64 = out.double().masked_fill(special, 0), ref.double().masked_fill(special, 0)
    diff = (o64 - r64).abs()
    over = diff > 1e-4 + 1e-4 * r64.abs()
    nonzero = r64 != 0
    with pytest.raises(compare.MismatchWithError) as raised:
        compare.compare(out, ref, 1e-4, 1e-4)
    first = int(over.nonzero()[0])
    assert f"{int(over.sum())} of 4000 elements" in str(raised.value) and f"first at [{first}]" in str(
        raised.value
    )
    assert raised.value.error.max_abs == pytest.approx(float(diff.max()), rel=1e-12)
    assert raised.value.error.max_rel == pytest.approx(
        float((diff[nonzero] / r64.abs()[nonzero]).max()), rel=1e-12
    )
    assert torch.equal(out.nan_to_num(), kept.nan_to_num())
    inf = out[:500].clone()
    inf[17] = float("inf")
    assert compare._finite_chunk(inf, ref[:500], 1e-4, 1e-4) is None  # left to the path that says where


def _long_sums(terms: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Row sums of 4096 terms in float32, added in the given order 64 at a time: what atomics or cuSPARSE's
    SpMV on power-law rows give run to run (seen on the H200: the operator itself was called a race)."""
    acc = torch.zeros(terms.shape[0])
    for part in terms[:, order].split(64, 1):
        acc = acc + part.sum(1)
    return acc


def test_two_runs_summed_in_another_order_agree_to_rounding_a_lost_update_does_not() -> None:
    terms = torch.randn(64, 4096, generator=torch.Generator().manual_seed(5)) * 100
    golden = compare.Golden(lambda: [terms.double().sum(1)])
    gen = torch.Generator().manual_seed(6)
    ref = _long_sums(terms, torch.arange(4096))
    one, two = (_long_sums(terms, torch.randperm(4096, generator=gen)) for _ in range(2))
    assert not torch.allclose(one, two, atol=1e-5, rtol=1e-5)  # beyond a tenth of the default tolerance
    assert compare.identical_or_rounding(one, two, None, None, [ref], golden)
    assert not compare.identical_or_rounding(one, two, None, None)  # no float64 run: the strict rule
    lost = two.clone()
    lost[7] -= terms[7, 11]  # one term's update lost in a race
    assert not compare.identical_or_rounding(one, lost, None, None, [ref], golden)


class _Largest(torch.utils._python_dispatch.TorchDispatchMode):
    """The most elements of any tensor an op made while this mode was on."""

    def __init__(self, *given: torch.Tensor) -> None:
        super().__init__()
        self.most, self.inputs = 0, {t.untyped_storage().data_ptr() for t in given}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else [out]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.inputs:
                self.most = max(self.most, t.numel())
        return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool, torch.complex64])
def test_wide_sums_and_closeness_of_a_large_output_take_a_chunk_at_a_time(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's seed fingerprints and its rounding check summed whole float64 copies: on an 80 GB H100
    the copy of a 6.4 GB output (11.9 GiB) ran it out of memory. Now no temporary is larger than a chunk."""
    monkeypatch.setattr(compare, "CHUNK", 1000)
    x = (torch.randn(7, 1001) * 3).to(dtype) if dtype != torch.bool else torch.rand(7, 1001) < 0.3
    y = x.clone()
    if dtype.is_floating_point:
        y.view(-1)[-1] += 1  # differs in the last chunk only
    wide = torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else torch.int64
    expected = x.to(wide).sum()
    with _Largest(x, y) as mode:
        total = compare.wide_sum(x)
        close = None if dtype.is_complex else compare._close(x, y, 1e-6, 1e-6)
    assert total == pytest.approx(float(expected.real if dtype.is_complex else expected), rel=1e-12)
    assert close is None or close == (not dtype.is_floating_point)
    assert mode.most <= 1000
    with _Largest(x) as whole:
        x.to(wide).sum()  # what the fingerprint did before: the mode does see a whole copy
    assert whole.most == x.numel()
