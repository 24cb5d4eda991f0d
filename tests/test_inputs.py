"""Inputs for each seed: made on the operator's device directly, or on the CPU when the factory needs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from kernelbot.harness.loader import make_inputs


def test_inputs_are_made_on_the_device_and_a_seed_means_the_same_inputs() -> None:
    seen: list[str] = []

    def factory() -> list[torch.Tensor]:
        seen.append(torch.empty(0).device.type)  # where a factory's tensors are born
        return [torch.randn(4, 3), 2.0]

    (x, scale) = make_inputs(factory, 7, "meta")  # "meta" stands for a GPU here: a non-CPU device
    assert seen == ["meta"] and x.device.type == "meta" and scale == 2.0
    first, again, other = (make_inputs(factory, s, "cpu")[0] for s in (7, 7, 8))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_a_factory_that_needs_the_cpu_falls_back_to_it_with_the_same_seed() -> None:
    seen: list[str] = []

    def factory() -> list[torch.Tensor]:
        seen.append(torch.empty(0).device.type)
        return [torch.from_numpy(torch.randn(5).numpy())]  # .numpy() fails off the CPU

    (x,) = make_inputs(factory, 3, "meta")
    assert seen == ["meta", "cpu"] and x.device.type == "meta"
    (cpu,) = make_inputs(factory, 3, "cpu")
    torch.manual_seed(3)
    assert torch.equal(cpu, torch.randn(5))  # re-seeded before the CPU attempt


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_the_inputs_are_born_there_and_repeat_per_seed() -> None:
    seen: list[str] = []

    def factory() -> list[torch.Tensor]:
        seen.append(torch.empty(0).device.type)
        return [torch.randn(1024, 1024)]

    first, again = (make_inputs(factory, 11, "cuda")[0] for _ in range(2))
    assert seen == ["cuda", "cuda"] and first.is_cuda and torch.equal(first, again)


def test_input_sets_shrink_to_the_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 6.4 GB input: one set; on an 8 GiB GPU the sets' budget shrinks with the device's (total) memory."""
    import types

    from kernelbot.harness import inputs

    gib = 1024**3
    assert inputs.set_bytes_budget("cpu") == inputs.MAX_INPUT_SET_BYTES
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda *a: types.SimpleNamespace(total_memory=8 * gib)
    )
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1 * gib, 141 * gib))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: 3 * gib)
    inputs.set_bytes_budget.cache_clear()  # asked once per process: this test's fake device is not kept
    budget = inputs.set_bytes_budget("cuda")
    inputs.set_bytes_budget.cache_clear()
    assert budget == 8 * gib // inputs.MEMORY_SHARE == 128 * 1024**2
    assert inputs.input_sets_for(1000, 16 * 1024**2, budget) == 8  # 8 sets of 16 MiB in 128 MiB
    assert inputs.input_sets_for(1000, int(6.4e9), budget) == 1  # never fewer than one
    assert inputs.input_sets_for(5000, 1024, inputs.MAX_INPUT_SET_BYTES) == inputs.MAX_INPUT_SETS
    assert inputs.memory_note("cuda") == " (this process peaked at 3.0 GiB; 1.0 of 141.0 GiB free on the GPU)"
    assert inputs.memory_note("cpu") == ""


@pytest.mark.parametrize("n", [1000, 16384 + 1, 3 * 65536 + 77, (1 << 20) + 5])
def test_each_sample_draws_new_values_from_the_master_and_keeps_no_neighbours_together(n: int) -> None:
    # A shift (or a shift and an order of blocks) kept each row a window of the master: a row-wise operator
    # could table its outputs for every shift at load time and gather them when timed (a reviewer's
    # finding). A permutation kept the multiset of values, so a statistic of them (a quantile, a norm) could
    # be kept from sample to sample (attacker round 8: 113x eager). Now: values drawn from the master's, a
    # multiset and an order only the seed decides, and neighbours apart.
    from kernelbot.harness.inputs import refresh

    master = torch.arange(n, dtype=torch.float64)
    sets = [[torch.zeros(n, dtype=torch.float64), torch.arange(3)]]
    masters = [[master, torch.arange(3)]]
    refresh(sets, masters, seed=11)
    got = sets[0][0].clone()
    assert bool(torch.isin(got, master).all())  # every value one of the master's
    assert not torch.equal(got.sort().values, master)  # but not the same multiset: about a third repeat
    assert 0.2 < 1 - got.unique().numel() / n < 0.5
    assert torch.equal(sets[0][1], torch.arange(3))  # what is not reordered is restored
    again = [[torch.empty(n, dtype=torch.float64), torch.arange(3)]]
    refresh(again, masters, seed=11)
    assert torch.equal(again[0][0], got)  # the seed alone decides: both processes agree
    refresh(again, masters, seed=12)
    assert not torch.equal(again[0][0], got)
    kept = float(((got[1:] - got[:-1]).abs() == 1).double().mean())
    assert kept < 0.01, kept  # adjacent before and after: a shift keeps ~100%


def test_the_guard_watches_every_operator_the_harness_runs_between_the_timed_calls() -> None:
    """guards.HARNESS_OPS is the list of ATen operators whose kernels the guard compares with their snapshot:
    a refresh (dense, both orders, sparse, renewed) must run none outside it, or a kernel registered over that
    one would run unseen."""
    from kernelbot.harness import guards
    from kernelbot.harness.inputs import PERMUTE_MAX, refresh

    matrix = torch.randn(12, 9).relu().to_sparse_csr()
    masters = [
        [
            torch.randn(2 * PERMUTE_MAX + 5),
            torch.randn(3, 7).t(),
            torch.arange(5),
            torch.randint(9, (4, 4)),
            matrix,
            3,
        ]
    ]
    sets = [[v.clone() if isinstance(v, torch.Tensor) else v for v in masters[0]]]
    seen = guards.ops_run_by(lambda: refresh(sets, masters, 123, renew=True))
    assert seen, "the trace saw nothing"
    assert seen <= set(guards.HARNESS_OPS), sorted(seen - set(guards.HARNESS_OPS))


def test_integer_inputs_are_reordered_unless_sorted_along_their_last_dimension() -> None:
    """Indices, labels and masks change every sample like floating inputs (the same every sample, an embedding
    lookup's outputs were answered from a cache: 230x eager); offsets and pointers (sorted rows) keep their
    structure, and a sparse matrix its pattern."""
    from kernelbot.harness.inputs import refresh

    indices = torch.randint(0, 5000, (512, 12))
    offsets = torch.arange(0, 600, 12)
    mask = torch.rand(64, 64) > 0.5
    matrix = torch.randn(40, 30).relu().to_sparse_csr()
    masters = [[indices, offsets, mask, matrix]]
    sets = [[v.clone() for v in masters[0]]]
    refresh(sets, masters, 7)
    new_indices, new_offsets, new_mask, new_matrix = sets[0]
    assert not torch.equal(new_indices, indices)
    # reordered, not redrawn: distinct indices stay distinct (a scatter's result stays defined)
    assert torch.equal(new_indices.flatten().sort().values, indices.flatten().sort().values)
    assert torch.equal(new_offsets, offsets)
    assert not torch.equal(new_mask, mask) and int(new_mask.sum()) == int(mask.sum())
    assert torch.equal(new_matrix.crow_indices(), matrix.crow_indices())
    assert torch.equal(new_matrix.col_indices(), matrix.col_indices())
    assert not torch.equal(new_matrix.values(), matrix.values())


def test_a_transposed_input_is_reordered_in_place_and_keeps_its_strides() -> None:
    from kernelbot.harness.inputs import refresh

    master = torch.randn(37, 300).t()
    sets = [[master.clone()]]
    refresh(sets, [[master]], 11)
    (fresh,) = sets[0]
    assert fresh.stride() == master.stride()
    assert not torch.equal(fresh, master)
    assert bool(torch.isin(fresh, master).all())


def test_a_kernel_registered_over_one_the_input_factory_runs_is_found() -> None:
    """A refresh that draws inputs afresh runs the operator's factory between the timed calls: the guard
    watches the operators the factory runs (traced when the candidate loads) as it watches its own."""
    from kernelbot.harness import guards

    factory = lambda: [torch.randn(64), torch.randint(0, 9, (8,))]  # noqa: E731
    integrity = guards.Integrity(ops=guards.ops_run_by(factory))
    library = torch.library.Library("aten", "IMPL")
    library.impl("randn", lambda *a, **k: torch.zeros(64), "CompositeExplicitAutograd")
    try:
        assert any("replaced the kernel of aten::randn" in v for v in integrity.violations())
    finally:
        library._destroy()


def test_tracing_the_input_factory_does_not_import_the_compiler() -> None:
    """The worker traces the input factory before each candidate loads; torch's first call through a dispatch
    mode imported torch._dynamo (827 modules, ~1 s on the CI machine) for every candidate evaluation."""
    probe = (
        "import sys, torch\n"
        "from kernelbot.harness import guards\n"
        "seen = guards.ops_run_by(lambda: [torch.randn(8), torch.randint(3, (2, 2))])\n"
        "print(sorted(seen), 'torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split("]")[-1].strip() == "False", done.stdout
    assert "'aten::randn'" in done.stdout and "'aten::randint'" in done.stdout, done.stdout


def test_no_tensor_subclass_hook_runs_inside_the_refresh() -> None:
    """Attacker round 28 gave a tensor the refresh computes with (its mask's threshold, a module constant
    then) a subclass in place; its __torch_function__ ran at every torch.where of the refresh and did the
    sample's work there. The refresh runs with torch-function dispatch off: a subclass hook is not called,
    here even with every input and master of that subclass (which the refresh's class check allows)."""
    from kernelbot.harness import inputs

    calls: list[str] = []

    class Spy(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            calls.append(getattr(func, "__name__", "?"))
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    torch.lt(torch.zeros(1).as_subclass(Spy), 1.0)
    assert calls == ["lt"]  # the instrument sees a call made outside the refresh
    calls.clear()
    for n in (100, 3 * 65536 + 7):  # a whole permutation and blocks (each draws with torch.where)
        master = torch.randn(n)
        sets, masters = [[torch.zeros(n).as_subclass(Spy)]], [[master.as_subclass(Spy)]]
        inputs.refresh(sets, masters, seed=3)
        assert bool(torch.isin(sets[0][0].as_subclass(torch.Tensor), master).all())
    assert calls == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_the_one_index_gather_draws_the_same_values_as_the_block_path(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to INDEX_MAX elements a set is gathered by one index (both orders and the coin folded into it);
    above, block by block. Both must draw the same values for a seed: the judge and the subject compute the
    same inputs whatever size an input has, and the security arguments are made for the block path."""
    from kernelbot.harness import inputs

    for n in (inputs.PERMUTE_MAX + 1, inputs.BLOCK, 3 * inputs.BLOCK + 77, inputs.INDEX_MAX):
        master = (torch.randn(n) * 100).to(dtype) if dtype != torch.bool else torch.rand(n) < 0.3
        strided = torch.randn(n // 64, 64).t() if dtype == torch.float32 else None  # reordered logically

        def drawn(index_max: int, seed: int, master: torch.Tensor = master) -> torch.Tensor:
            monkeypatch.setattr(inputs, "INDEX_MAX", index_max)
            sets = [[torch.empty_like(master)], [torch.empty_like(master)]]
            inputs.refresh(sets, [[master], [master]], seed=seed)
            assert torch.equal(sets[0][0], sets[1][0])  # one order a position, shared by the sets
            return sets[0][0]

        for seed in (5, 6):
            assert torch.equal(drawn(1 << 30, seed), drawn(0, seed)), (n, dtype, seed)
        if strided is not None:
            assert torch.equal(drawn(1 << 30, 7, strided), drawn(0, 7, strided))


@pytest.mark.parametrize("index_max", [0, 1 << 30], ids=["blocks", "one-index"])
def test_every_operator_the_refresh_runs_is_watched(index_max: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every aten operator a refresh runs, the ones its operators' kernels call inside included (torch.rand's
    calls uniform_), must be among those whose kernels the sealed check and the guard hold: attacker round 35
    registered a CPU kernel of its own for aten::uniform_ and replayed the refresh there. The profiler sees the
    nested calls; each operator seen must be watched with every overload."""
    from kernelbot.harness import guards, inputs, sealed

    monkeypatch.setattr(inputs, "INDEX_MAX", index_max)
    watched = set(guards.HARNESS_OPS) | set(sealed.TORCH_PATH_OPS)
    small, large = inputs.PERMUTE_MAX // 2, 2 * inputs.BLOCK + 77
    masters = [
        torch.randn(small), torch.randn(large), torch.randn(large // 64, 64).t(), torch.randint(0, 9, (large,)),
        torch.rand(small) < 0.5, torch.randn(small, dtype=torch.complex64), torch.arange(small),
        torch.eye(16).to_sparse_csr(),
    ]  # fmt: skip
    # on a GPU machine, `KERNELBOT_ADVERSARIAL_DEVICE=cuda` profiles the CUDA refresh (its kernels differ)
    dev = os.environ.get("KERNELBOT_ADVERSARIAL_DEVICE", "cpu")
    masters = [m.to(dev) for m in masters]
    with torch.autograd.profiler.profile() as profiled:
        for seed in (3, 4):
            sets = [[m.clone() for m in masters] for _ in range(2)]
            inputs.refresh(sets, [masters, masters], seed=seed)
        inputs.refresh(
            [[m.clone() for m in masters[:2]]],
            [masters[:2]],
            seed=5,
            drawn=inputs.draw(
                lambda s: [torch.randn(small, device=dev), torch.randn(large, device=dev)], 5, 1
            ),
        )
    seen = {e.name.removeprefix("aten::") for e in profiled.function_events if e.name.startswith("aten::")}
    assert seen, "the profiler saw no operator"
    # the factory's own operators are watched through ops_run_by, with theirs inside (normal_, from randn)
    factory = set(guards.ops_run_by(lambda: [torch.randn(small, device=dev), torch.randn(large, device=dev)]))
    assert "aten::normal_" in factory, factory
    missing = sorted(set(guards.with_overloads(sorted(seen))) - watched - factory)
    assert not missing, missing
