"""The reward hacks of measurement.md, each run as a real candidate: every one must be caught, by a named layer.

Two layers are exercised separately so the report can say which one catches what:
- runtime: `evaluate()` alone (sandbox, guards, compare, timing);
- static: `staticcheck.scan()` on the source, findings meaning status "rejected" (the lead wires it into
  `evaluate()` on the parent side, before spawning; `_evaluate_guarded` is that real path).
A cheat whose runtime expectation is None is a known runtime hole that only the static check closes: its
runtime test is an xfail when the runtime lets it through, so the hole stays visible in every test run.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kernelbot.harness.evaluate import Settings, evaluate
from kernelbot.harness.results import Evaluation, reward
from kernelbot.harness.staticcheck import scan

HERE = Path(__file__).parent / "adversarial"
OPS, CHEATS, HONEST = HERE / "ops", HERE / "cheats", HERE / "honest"

# `KERNELBOT_ADVERSARIAL_DEVICE=cuda` runs the same suite on a GPU machine (the runtime layer's GPU paths:
# events, syncs, streams); CI runs it on the CPU.
DEVICE = os.environ.get("KERNELBOT_ADVERSARIAL_DEVICE", "cpu")
SETTINGS = Settings(time_budget_s=0.3, min_samples=10, max_samples=12, timeout_s=30, seeds=5)
HANG_SETTINGS = Settings(time_budget_s=0.3, min_samples=10, max_samples=12, timeout_s=4, seeds=5)


def _kernelbench(file: str) -> dict[str, Any]:
    return {
        "kind": "kernelbench",
        "root": str(OPS),
        "file": file,
        "device": DEVICE,
        "allow_tf32": False,
        "atol": None,
        "rtol": None,
    }


JOBS: dict[str, dict[str, Any]] = {
    "matmul": _kernelbench("matmul_op.py"),
    "relu": _kernelbench("relu_op.py"),
    "spatial_softmax": _kernelbench("spatial_softmax_op.py"),
    "decayed_rows": _kernelbench("decayed_rows_op.py"),
    # Declared form with two shapes: the timed one (first) and another the candidate never tuned for.
    "scale": {
        "kind": "declared",
        "root": str(OPS),
        "callable": "declared_scale.py:scale",
        "inputs": "declared_scale.py:make_inputs",
        "shapes": [[16, 32], [7, 9]],
        "dtypes": ["float32"],
        "device": DEVICE,
        "allow_tf32": False,
        "atol": None,
        "rtol": None,
    },
}


@dataclass(frozen=True)
class Cheat:
    name: str  # file stem under adversarial/cheats
    op: str  # key of JOBS
    runtime: frozenset[str] | None  # statuses the runtime harness alone may give; None: a known runtime hole
    reason: str  # regex the runtime reason must match (ignored when runtime is None)
    static: frozenset[str] = field(default_factory=frozenset)  # rules scan() must report (empty: none needed)
    settings: Settings = SETTINGS


def _c(
    name: str, op: str, runtime: str | None, reason: str, static: str = "", settings: Settings = SETTINGS
) -> Cheat:
    statuses = frozenset(runtime.split("|")) if runtime is not None else None
    return Cheat(name, op, statuses, reason, frozenset(static.split()) if static else frozenset(), settings)


CHEAT_LIST: list[Cheat] = [
    # stale memory, inputs, uninitialised memory, constant output
    _c("stale_empty_like", "matmul", "incorrect", r"NaN|outside atol"),
    _c("mutate_inputs", "matmul", "incorrect", r"outside atol"),
    _c("mutate_inputs_when_timed", "matmul", "incorrect", r"timed calls are wrong"),
    _c("uninit_partial", "relu", "incorrect", r"NaN|outside atol|disagree"),
    _c("constant_output", "relu", "incorrect", r"outside atol"),
    _c("below_atol_zeros", "spatial_softmax", "incorrect", r"compared at its own scale"),
    _c("decayed_rows_zeros", "decayed_rows", "incorrect", r"over its elements \[160, 0\] to .*own scale"),
    # streams, threads, processes
    _c("side_stream", "matmul", None, "", "stream"),
    _c("thread_defer", "matmul", "rejected|incorrect", r"thread|outside atol", "concurrency"),
    _c("thread_pool", "matmul", "rejected", r"started threads|_thread\.start", "concurrency"),
    _c("subprocess_defer", "matmul", "rejected", r"child process|sandbox refused subprocess", "concurrency"),
    _c(
        "fork_defer",
        "matmul",
        "rejected|incorrect",
        r"child process|outside atol|refused os\.fork",
        "concurrency",
    ),
    # lazy results
    _c("lazy_subclass", "matmul", "incorrect", r"LazyResult.*not a torch\.Tensor", "tensor-subclass"),
    _c("as_subclass", "matmul", "incorrect", r"Marked.*not a torch\.Tensor", "tensor-subclass"),
    # patching timers, sync, the harness, the reference's library calls
    _c("patch_timer_import", "matmul", "rejected", r"time\.perf_counter_ns was replaced", "monkeypatch"),
    _c("patch_timer_forward", "matmul", "rejected", r"time\.perf_counter_ns was replaced", "monkeypatch"),
    _c("patch_sync", "matmul", "rejected", r"torch\.cuda\.synchronize was replaced", "monkeypatch"),
    _c(
        "patch_harness_timer",
        "matmul",
        "rejected",
        r"_perf_counter_ns was replaced",
        "harness-access monkeypatch",
    ),
    _c("patch_harness_compare", "matmul", "rejected", r"compare was replaced", "introspection"),
    _c("patch_reference_op", "matmul", "rejected", r"torch\.matmul was replaced", "monkeypatch"),
    _c("patch_module_call", "matmul", "rejected", r"Module\.__call__ was replaced", "monkeypatch"),
    _c("aten_override", "matmul", None, "", "monkeypatch"),
    # caches
    _c("ptr_cache", "matmul", "incorrect", r"outside atol"),
    _c("content_cache", "matmul", "incorrect", r"outside atol"),
    # precision
    _c("fp16_compute", "matmul", "incorrect", r"outside atol=0\.0001"),
    _c("bf16_compute", "matmul", "incorrect", r"outside atol=0\.0001"),
    _c("tf32_flag", "matmul", "rejected", r"precision flag .*allow_tf32", "precision-flag"),
    _c("matmul_precision_forward", "matmul", "rejected", r"float32_matmul_precision", "precision-flag"),
    _c("tf32_cudnn_flags", "matmul", None, "", "precision-flag"),  # restored before the guard looks
    # right only when checked, or only on some shapes
    _c("first_calls_only", "relu", "incorrect", r"timed calls are wrong"),
    _c("shape_fastpath", "scale", "incorrect", r"shape=\[7, 9\]"),
    # the result channel
    _c("forge_stdout", "matmul", "incorrect", r"outside atol"),
    # The subject holds no key and no result channel: what it writes reaches the judge as malformed data.
    _c("forge_fd", "matmul", "rejected", r"failed authentication|subject process sent", "introspection"),
    _c(
        "forge_stolen_key",
        "matmul",
        "rejected|incorrect",
        r"sandbox refused sys\._getframe|outside atol",
        "introspection",
    ),
    # crashes and build errors: each a typed failure
    _c("crash_segfault", "matmul", "rejected|crashed", r"SIGSEGV|sandbox refused ctypes", "introspection"),
    _c("crash_signal", "matmul", "crashed", r"SIGSEGV"),
    _c("crash_sys_exit", "matmul", "crashed", r"sys\.exit\(3\)"),
    _c("crash_os_exit", "matmul", "crashed", r"exited with code 0"),
    _c("crash_hang", "matmul", "timeout", r"no answer within 4 s", settings=HANG_SETTINGS),
    _c("crash_memory", "matmul", "crashed", r"memory"),
    _c("crash_raise", "matmul", "crashed", r"ValueError: kernel launch failed.*crash_raise\.py:8"),
    _c("build_syntax_error", "matmul", "build_error", r"SyntaxError"),
    _c("build_import_error", "matmul", "build_error", r"fused_matmul_ext_that_was_never_built"),
    _c("build_no_modelnew", "matmul", "build_error", r"no ModelNew"),
    _c("wrong_shape", "matmul", "incorrect", r"shape \[80, 64\], expected \[64, 80\]"),
    _c("wrong_dtype", "matmul", "incorrect", r"dtype torch\.float64, expected torch\.float32"),
    _c("non_tensor", "matmul", "incorrect", r"numpy\.ndarray.*not a torch\.Tensor"),
]

HONEST_LIST: list[tuple[str, str]] = [
    ("matmul_plain", "matmul"),
    ("matmul_blocked", "matmul"),
    ("relu_clamp", "relu"),
    ("scale_fused", "scale"),
    ("spatial_softmax_exp", "spatial_softmax"),  # outputs below atol, compared at their own scale
    ("decayed_rows_scaled_first", "decayed_rows"),  # rows below atol under large ones, each run at its scale
    ("relu_inference_only", "relu"),  # the timed calls run without autograd, as the checked ones do
]


def _runtime(path: Path, op: str, settings: Settings = SETTINGS) -> Evaluation:
    return evaluate(JOBS[op], "candidate", settings, candidate=str(path), static_check=False)


def _evaluate_guarded(path: Path, op: str, settings: Settings = SETTINGS) -> Evaluation:
    """What kernelbot runs: evaluate() scans the source first (findings: rejected, nothing spawned)."""
    return evaluate(JOBS[op], "candidate", settings, candidate=str(path))


_RUNTIME_CACHE: dict[str, Evaluation] = {}


def _runtime_of(cheat: Cheat) -> Evaluation:
    """One runtime evaluation per cheat, shared by the runtime and the combined test (each spawn costs ~2 s)."""
    if cheat.name not in _RUNTIME_CACHE:
        _RUNTIME_CACHE[cheat.name] = _runtime(CHEATS / f"{cheat.name}.py", cheat.op, cheat.settings)
    return _RUNTIME_CACHE[cheat.name]


def _children() -> set[int]:
    pids: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as handle:
            pids |= {int(p) for p in handle.read().split()}
    return pids


def test_every_cheat_file_is_listed() -> None:
    listed = {c.name for c in CHEAT_LIST}
    assert {p.stem for p in CHEATS.glob("*.py")} == listed
    assert len(listed) >= 15


@pytest.mark.parametrize("cheat", CHEAT_LIST, ids=lambda c: c.name)
def test_static_layer(cheat: Cheat) -> None:
    rules = {f.rule for f in scan((CHEATS / f"{cheat.name}.py").read_text())}
    assert cheat.static <= rules, f"expected rules {sorted(cheat.static)}, got {sorted(rules)}"


@pytest.mark.parametrize("cheat", CHEAT_LIST, ids=lambda c: c.name)
def test_runtime_layer(cheat: Cheat) -> None:
    before = _children()
    ev = _runtime_of(cheat)
    assert _children() <= before, "the evaluation left a process behind in the parent"
    if cheat.runtime is None:
        if ev.ok:
            pytest.xfail(f"runtime hole, closed only by the static check ({sorted(cheat.static)})")
        return
    assert ev.status in cheat.runtime, f"{ev.status}: {ev.reason}"
    assert re.search(cheat.reason, ev.reason), ev.reason
    assert reward(ev, None, None) == -1


@pytest.mark.parametrize("cheat", CHEAT_LIST, ids=lambda c: c.name)
def test_both_layers_catch_every_cheat(cheat: Cheat) -> None:
    path = CHEATS / f"{cheat.name}.py"
    findings = scan(path.read_text())
    ev = Evaluation("candidate", "rejected", "static check") if findings else _runtime_of(cheat)
    assert ev.status != "ok" and reward(ev, None, None) == -1, ev.reason
    assert ev.reason.strip()


@pytest.mark.parametrize(("name", "op"), HONEST_LIST, ids=[n for n, _ in HONEST_LIST])
def test_honest_candidates_pass(name: str, op: str) -> None:
    path = HONEST / f"{name}.py"
    assert scan(path.read_text()) == []
    ev = _evaluate_guarded(path, op)
    assert ev.status == "ok", ev.reason
    assert ev.timing is not None and ev.timing.samples >= SETTINGS.min_samples
    assert reward(ev, None, None) >= 1


@pytest.mark.slow
def test_honest_torch_compile_passes() -> None:
    """torch.compile (inductor on CPU) starts threads and imports much of torch: the guards must not mind."""
    path = HONEST / "relu_compiled.py"
    assert scan(path.read_text()) == []
    ev = _evaluate_guarded(
        path, "relu", Settings(time_budget_s=0.3, min_samples=10, max_samples=12, timeout_s=300)
    )
    assert ev.status == "ok", ev.reason


def test_parent_unaffected_after_the_cheats() -> None:
    """After every cheat above (crashes, hangs, forgeries), this process still evaluates an honest candidate."""
    start = time.monotonic()
    ev = _runtime(HONEST / "matmul_plain.py", "matmul")
    assert ev.status == "ok", ev.reason
    assert time.monotonic() - start < 20
