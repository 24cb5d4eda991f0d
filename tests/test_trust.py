"""Trust: what PR and candidate code can reach, tried as an attacker would (docs/security.md).

Each attack runs as a real candidate through `evaluate()` with the static check off, so what is asserted is
what the runtime layers (the OS sandbox, the audit hook, the judge's separate process and clock) do alone.
The runner's secrets are planted in this process's environment and on its disk; none may come back.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelbot.harness import jail
from kernelbot.harness.evaluate import OUT_OF_TIME, Settings, evaluate, out_of_time
from kernelbot.harness.results import Evaluation, reward
from kernelbot.harness.staticcheck import scan

HERE = Path(__file__).parent / "adversarial"
TRUST, OPS, HONEST = HERE / "trust", HERE / "ops", HERE / "honest"
SETTINGS = Settings(time_budget_s=0.3, min_samples=10, max_samples=12, timeout_s=60, seeds=5)
SECRETS = {
    "GITHUB_TOKEN": "ghs_" + uuid.uuid4().hex,
    "GH_PAT": "github_pat_" + uuid.uuid4().hex,
    "KERNELBOT_DB_URL": f"postgresql://bot:{uuid.uuid4().hex}@db/kernelbot",
    "AWS_ACCESS_KEY_ID": "AKIA" + uuid.uuid4().hex[:16].upper(),
}
# `KERNELBOT_ADVERSARIAL_DEVICE=cuda` runs these attacks on a GPU machine too (as tests/test_adversarial.py).
DEVICE = os.environ.get("KERNELBOT_ADVERSARIAL_DEVICE", "cpu")
MATMUL = {"kind": "kernelbench", "root": str(OPS), "file": "matmul_op.py", "device": DEVICE,
          "allow_tf32": False, "atol": None, "rtol": None}  # fmt: skip

pytestmark = pytest.mark.skipif(jail.probe() is not None, reason=f"no OS sandbox here: {jail.probe()}")


@pytest.fixture(autouse=True)
def planted_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    return SECRETS


class Listener:
    """A TCP server on the runner's loopback that records whatever reaches it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                self.received.append(conn.recv(1024))

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def _attack(name: str, tmp_path: Path, settings: Settings = SETTINGS, **fill: Any) -> Evaluation:
    source = (TRUST / f"{name}.py").read_text()
    for key, value in fill.items():
        blank = "0" if isinstance(value, int) else "0.0" if isinstance(value, float) else '""'
        source = source.replace(f"{key} = {blank}", f"{key} = {value!r}")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return evaluate(MATMUL, "candidate", settings, candidate=str(path), static_check=False)


def _checked(name: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    """An attack through `kernelbot check` against the matmul operator, the static check on and the confirming
    rounds run, as its author ran it: the exit code and the candidate's JSON."""
    from kernelbot.cli import main

    out = tmp_path / "r.json"
    op, cand = OPS / "matmul_op.py", TRUST / f"{name}.py"
    code = main(["check", str(op), "--candidate", str(cand), "--no-compile", "--json", str(out)])
    return code, json.loads(out.read_text())["candidate"]


def _leaks(ev: Evaluation) -> list[str]:
    return [k for k, v in SECRETS.items() if v in (ev.reason or "")]


def _processes_with(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_frame_walking_through_computed_names_is_refused_and_earns_nothing(tmp_path: Path) -> None:
    ev = _attack("frame_walk_computed", tmp_path)
    assert ev.status == "rejected" and "tb_frame" in ev.reason
    assert reward(ev, None, None) == -1


def test_a_timer_patched_through_a_signal_frame_is_timed_by_the_judges_clock(tmp_path: Path) -> None:
    honest = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack("frame_walk_signal", tmp_path)
    assert honest.ok and honest.timing is not None
    if ev.ok:  # it may also be caught; if not, its nanosecond claims must not survive the judge's clock
        assert ev.timing is not None
        assert ev.timing.median_ms > 0.3 * honest.timing.median_ms, (
            ev.timing.median_ms,
            honest.timing.median_ms,
        )
        assert ev.timing.wall_bound > 0  # the samples counted the judge's time, not the claim
    else:  # its handler cannot even be set now: the subject's code runs off the main thread (build_error)
        assert ev.status in ("rejected", "crashed", "build_error")


def test_proc_environ_and_the_parents_environment_are_out_of_reach(tmp_path: Path) -> None:
    ev = _attack("proc_environ", tmp_path)
    assert not ev.ok and _leaks(ev) == []
    assert ev.status == "rejected" and "/proc" in ev.reason


def test_a_socket_through_the_private_module_is_refused(tmp_path: Path) -> None:
    listener = Listener()
    try:
        ev = _attack("socket_exfil", tmp_path, PORT=listener.port)
        time.sleep(0.3)
    finally:
        listener.close()
    assert ev.status == "rejected" and "socket" in ev.reason
    assert listener.received == []


def test_a_process_started_past_the_audit_hook_stays_inside_the_os_sandbox(tmp_path: Path) -> None:
    """fork_exec is not audited: the shell and Python it starts see no secret, write nothing outside, reach
    no socket of the runner's, and the daemon they leave dies with the sandbox."""
    listener = Listener()
    outside = tmp_path / "outside" / "pwned"
    outside.parent.mkdir()
    marker = "kb" + uuid.uuid4().hex[:12]
    repo = Path(__file__).resolve().parents[1]
    try:
        ev = _attack(
            "escape_subprocess",
            tmp_path,
            PORT=listener.port,
            REPO=str(repo),
            OUTSIDE=str(outside),
            MARKER=marker,
        )
        time.sleep(0.5)
    finally:
        listener.close()
    assert not ev.ok
    assert "done" in ev.reason, ev.reason  # the shell ran: what follows is what it could do
    assert "leaked:0" in ev.reason and _leaks(ev) == []  # no secret in any environment it can see
    assert "git:0" in ev.reason  # the repository's .git (its remote's credentials) is hidden
    # The runner's home shows no more than the interpreter's own prefix, where Python lives under it.
    home = {p.relative_to(Path.home()).parts[0] for p in jail.python_paths() if p.is_relative_to(Path.home())}
    shown = ev.reason.split("home:", 1)[1].split(" |", 1)[0]
    assert set(filter(None, shown.split(","))) <= home, shown
    assert "write-refused" in ev.reason and not outside.exists()
    assert "connect-refused" in ev.reason and listener.received == []
    assert _processes_with(marker) == []


def test_a_thread_started_through_the_private_module_is_refused(tmp_path: Path) -> None:
    ev = _attack("thread_raw", tmp_path)
    if sys.version_info >= (3, 12):
        assert ev.status == "rejected" and "_thread.start" in (ev.reason or ""), (ev.status, ev.reason)
    else:  # caught alive by the guard's count, or its answer incomplete when copied
        assert ev.status in ("rejected", "incorrect"), (ev.status, ev.reason)
    assert reward(ev, None, None) == -1


def test_a_thread_that_ends_before_the_guard_looks_is_still_counted(tmp_path: Path) -> None:
    """Threads started only once the check is over, each gone long before the guard's look at the end of the
    timing: Python 3.12's audit event names the start; before it (as for a native thread, which no event
    names), on the CPU the kernel's last task id in the sandbox's PID namespace has moved."""
    ev = _attack("thread_when_timed", tmp_path)
    named = "_thread.start" if sys.version_info >= (3, 12) else "started a thread or process once the timing"
    if DEVICE == "cpu" or sys.version_info >= (3, 12):
        assert ev.status == "rejected" and named in (ev.reason or ""), (ev.status, ev.reason)
    assert reward(ev, None, None) == -1


def test_an_answer_queued_before_the_judge_asks_is_rejected(tmp_path: Path) -> None:
    ev = _attack("fake_answer", tmp_path)
    assert ev.status == "rejected" and "subject process sent" in ev.reason


def test_memory_taken_through_the_shared_region_is_refused_and_freed(tmp_path: Path) -> None:
    ev = _attack("region_fill", tmp_path)
    assert ev.status == "rejected" and "held in the shared region" in ev.reason, ev.reason


def test_an_answer_that_breaks_the_judges_read_stays_the_candidates_failure(tmp_path: Path) -> None:
    ev = _attack("shape_overflow", tmp_path)  # a shape whose element count overflows torch's
    assert ev.status == "rejected" and "tensor shape" in ev.reason, (ev.status, ev.reason)


def test_the_sandbox_environment_is_an_allow_list() -> None:
    env = jail.environment({"PYTHONPATH": "/x"})
    assert not set(SECRETS) & set(env)
    assert env["HOME"] == "/tmp" and env["PYTHONPATH"] == "/x"


def test_honest_candidates_keep_passing_in_the_sandbox() -> None:
    ev = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_blocked.py"))
    assert ev.ok and ev.timing is not None and ev.timing.median_ms > 0


def test_without_bubblewrap_untrusted_code_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jail.shutil, "which", lambda name: None)
    jail.probe.cache_clear()
    try:
        with pytest.raises(
            jail.JailUnavailable, match=r"install it \(apt-get install bubblewrap\).*harness\.sandbox: none"
        ):
            jail.require("bwrap")
        jail.require("none")  # the explicit opt-out
    finally:
        jail.probe.cache_clear()


def test_a_candidate_that_returns_nothing_when_timed_is_incorrect(tmp_path: Path) -> None:
    """It tells the timing's reused input objects from the check's fresh clones and returns None there."""
    ev = _attack("none_when_timed", tmp_path)
    assert ev.status == "incorrect" and "timed calls are wrong" in ev.reason and "NoneType" in ev.reason


@pytest.mark.parametrize(
    "attack",
    [
        # With inputs refreshed by a fixed shift it computed 400 samples ahead in an untimed step (5.6x
        # 'faster', reward 3, before the refresh became a permutation the judge draws for each sample).
        "precompute_refreshes",
        # It computes every timed call's output while the refresh writes the inputs (a patched Tensor.copy_)
        # and answers the timed calls by lookup. The judge refreshes its own copy only now and then, so each
        # charge is made against a refresh of its own taken in the same moment (6x 'faster' without it).
        "work_in_the_refresh",
    ],
)
def test_work_done_outside_the_timed_calls_earns_nothing(attack: str, tmp_path: Path) -> None:
    # 40 samples: most past the judge's first refreshes, where it holds the subject's against its median
    # (with 12, a judge that never charged those samples passed too).
    settings = replace(SETTINGS, min_samples=40, max_samples=40, time_budget_s=10.0)
    honest = evaluate(MATMUL, "candidate", settings, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack(attack, tmp_path, settings=settings)
    assert honest.ok and honest.timing is not None
    if ev.ok:
        assert ev.timing is not None and ev.timing.median_ms > 0.5 * honest.timing.median_ms
    else:
        assert ev.status in ("incorrect", "rejected"), ev.reason


def test_a_thread_forked_from_scripted_code_is_refused(tmp_path: Path) -> None:
    """TorchScript's fork runs its task on torch's inter-op pool: a native thread that threading never lists
    and no audit event names (attacker round 7 ran Python there, in parallel with the refresh, for reward 3).
    The static check names the module it lives in; without it, the guard counts the kernel's threads."""
    ev = _attack("scripted_fork", tmp_path)
    assert ev.status == "rejected" and "started native threads" in (ev.reason or ""), (ev.status, ev.reason)


@pytest.mark.slow  # ~90 s; test_a_cache_within_a_sample_finds_no_set_twice keeps round 7's defence in CI
def test_a_sample_never_calls_an_input_set_twice(tmp_path: Path) -> None:
    """Where memory allows few sets (16 MB inputs: 32 in the 512 MB), a candidate that answers a set called
    again from a cache kept by the tensor's identity and version asked for ~800 calls a sample and answered
    all but 32 from it (30x the operator; attacker round 7: 42-48x on a 32 MB example operator). Calls a
    sample are capped at the sets."""
    (tmp_path / "big_op.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return (x * 1.5).relu()\n\n\ndef get_inputs():\n    return [torch.randn(4 * 1024 * 1024)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    job = {**MATMUL, "root": str(tmp_path), "file": "big_op.py"}
    # 180 s: 32 sets of 16 MB refreshed every sample take ~50 s on the 2-core CI machine (60 timed out once)
    settings = replace(SETTINGS, min_samples=10, max_samples=10, time_budget_s=10.0, timeout_s=180)
    operator = evaluate(job, "operator", settings)
    cached = evaluate(
        job, "candidate", settings, candidate=str(TRUST / "version_cache.py"), static_check=False
    )
    assert operator.timing is not None and cached.timing is not None, (cached.status, cached.reason)
    assert cached.timing.calls_per_sample <= (512 << 20) // (16 << 20)
    assert cached.timing.median_ms > 0.25 * operator.timing.median_ms


EMBEDDING = (
    "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self, num, dim):\n"
    "        super().__init__()\n        self.emb = nn.Embedding(num, dim)\n\n    def forward(self, idx):\n"
    "        return self.emb(idx).sum(1)\n\n\ndef get_inputs():\n    return [torch.randint(0, 5000, (512, 12))]\n\n\n"
    "def get_init_inputs():\n    return [5000, 128]\n"
)


def test_an_operator_with_integer_inputs_only_gets_fresh_inputs_each_sample(tmp_path: Path) -> None:
    """Its indices were the same in every sample: a cache answered every timed call (230x eager, reward 3)."""
    (tmp_path / "embedding.py").write_text(EMBEDDING)
    job = {**MATMUL, "root": str(tmp_path), "file": "embedding.py"}
    settings = replace(SETTINGS, min_samples=10, max_samples=10, time_budget_s=10.0)
    operator = evaluate(job, "operator", settings)
    cached = evaluate(
        job, "candidate", settings, candidate=str(TRUST / "embedding_cache.py"), static_check=False
    )
    assert operator.timing is not None, (operator.status, operator.reason)
    if cached.ok:
        assert cached.timing is not None and cached.timing.median_ms > 0.25 * operator.timing.median_ms
    else:  # a stale answer for a reordered input
        assert cached.status == "incorrect", (cached.status, cached.reason)


SORT = (
    "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
    "        return torch.sort(x.reshape(-1)).values\n\n\ndef get_inputs():\n    return [torch.randn(256, 1024)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)
LOSS = (
    "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, p, t):\n"
    "        return torch.mean((p - t) ** 2)\n\n\ndef get_inputs():\n"
    "    return [torch.randn(128, 4096), torch.randn(128, 4096)]\n\n\ndef get_init_inputs():\n    return []\n"
)


CLIP = (
    "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self, q):\n"
    "        super().__init__()\n        self.q = q\n\n    def forward(self, x):\n"
    "        t = torch.quantile(x.abs().flatten(), self.q)\n        return torch.clamp(x, -t, t)\n\n\n"
    "def get_inputs():\n    return [torch.randn(256, 1024)]\n\n\ndef get_init_inputs():\n    return [0.999]\n"
)
SORTED = SORT.replace("torch.randn(256, 1024)", "torch.sort(torch.randint(0, 1000, (4096,))).values")


@pytest.mark.parametrize(
    ("source", "attack", "fresh"),
    [
        (SORT, "sort_cache", False),
        (LOSS, "loss_cache", False),
        (CLIP, "quantile_cache", False),
        (SORTED, "sort_cache", True),
    ],
    ids=["sort", "loss", "quantile", "structure-only"],
)
def test_outputs_kept_from_an_earlier_sample_are_wrong_now(
    source: str, attack: str, fresh: bool, tmp_path: Path
) -> None:
    """A sort of every element, or a loss over two same-size inputs, gave the same outputs in every sample
    (the refresh only permuted, with one order for both inputs): answers kept by identity stayed right. Now
    each sample's values are drawn from the master's (the multiset changes); an operator whose inputs the
    refresh cannot change (all sorted integers: structure) gets them drawn afresh from its factory."""
    (tmp_path / "op.py").write_text(source)
    job = {**MATMUL, "root": str(tmp_path), "file": "op.py"}
    settings = replace(SETTINGS, min_samples=10, max_samples=10, time_budget_s=10.0)
    operator = evaluate(job, "operator", settings)
    assert operator.timing is not None, (operator.status, operator.reason)
    assert ("afresh" in (operator.timing.sample_note or "")) is fresh
    cached = evaluate(job, "candidate", settings, candidate=str(TRUST / f"{attack}.py"), static_check=False)
    assert cached.status == "incorrect" and "outputs of the timed calls are wrong" in (cached.reason or "")


def test_an_operator_with_a_broadcast_input_is_timed(tmp_path: Path) -> None:
    """An expanded input (stride 0) cannot be written: the refresh crashed the operator's own timing."""
    (tmp_path / "broadcast.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, x, b):\n"
        "        return x * 2 + b\n\n\ndef get_inputs():\n"
        "    return [torch.randn(64, 1).expand(64, 128), torch.randn(64, 128)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    ev = evaluate({**MATMUL, "root": str(tmp_path), "file": "broadcast.py"}, "operator", SETTINGS)
    assert ev.ok and ev.timing is not None, (ev.status, ev.reason)


def test_a_kernel_registered_over_one_the_harness_runs_is_refused(tmp_path: Path) -> None:
    """Registered over aten::copy_'s existing CompositeExplicitAutograd kernel, the names of the operator's
    registrations stay as they were, and the refresh ran it unseen (the judge's charge on the refresh was all
    that held): the guard compares the kernels of the operators the harness runs with their snapshot."""
    ev = _attack("kernel_in_the_refresh", tmp_path)
    assert ev.status == "rejected", (ev.status, ev.reason)
    assert "replaced the kernel of aten::copy_" in (ev.reason or "")


@pytest.mark.parametrize(
    ("attack", "caught"),
    [
        # its mode is on the subject's thread (worker.SubjectThread): refused there after the job that left it
        ("lazy_mode", "left 1 torch function mode(s) active on its thread"),
        # the sealed check after its job finds it first (worker._handoff), the guard's word was "registered
        # kernels for aten::detach@CPU"
        ("lazy_kernel", "replaced the kernel of aten::detach"),
        ("lazy_list", None),  # nothing to catch: its __iter__ is never called, so its outputs stay empty
        # Bytes are read by address before the guard looks, and the guard then finds the hook.
        ("lazy_method", "torch.Tensor.contiguous was added to the class"),
        ("lazy_guard", None),  # an unwatched class: its hook runs after the copy, the outputs stay empty
        ("lazy_metaclass", None),  # its type is named through type's own descriptors: never computed
    ],
)
def test_outputs_computed_when_the_harness_copies_them_earn_nothing(
    attack: str, caught: str | None, tmp_path: Path
) -> None:
    """Each returns empty memory and computes the product in harness code that reads the output (a mode on
    torch's stack, a kernel registered for aten::detach, a container's __iter__), out of every timed window.
    The first was reward 3 ('32x faster') through `kernelbot check` with the static check on."""
    ev = _attack(attack, tmp_path)
    assert reward(ev, None, None) == -1
    if caught is not None:
        assert ev.status == "rejected" and caught in ev.reason, ev.reason
    else:
        assert ev.status in ("incorrect", "rejected"), ev.reason


@pytest.mark.parametrize("hook", ["scanner", "readv", "write"])
def test_outputs_computed_when_the_next_command_is_read_earn_nothing(hook: str, tmp_path: Path) -> None:
    """The worker reads and parses its commands and writes its answers through functions bound when it
    started (and CPython's C JSON scanner, made there): a hook in json's decoder, os.readv or os.write never
    sees a command, so this candidate never learns it is timed and computes honestly (3.4-5.3x 'faster',
    reward 3, before). `os` is watched too: replacing its functions is rejected."""
    honest = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack("lazy_command", tmp_path, HOOK=hook)
    if hook == "write":  # a wrapper of os.write is caught by the watch on os
        assert reward(ev, None, None) == -1 and ev.status in ("incorrect", "rejected"), ev.reason
    assert honest.ok and honest.timing is not None
    if ev.ok:
        assert ev.timing is not None and ev.timing.median_ms > 0.5 * honest.timing.median_ms, ev.timing
    else:
        assert ev.status in ("incorrect", "rejected"), ev.reason


def test_a_slowed_calibration_does_not_let_the_margin_cover_a_whole_sample(tmp_path: Path) -> None:
    honest = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack("short_samples", tmp_path, CHECK_CALLS=2 * SETTINGS.seeds)
    assert honest.ok and honest.timing is not None and honest.timing.calls_per_sample > 1
    assert ev.ok and ev.timing is not None, ev.reason  # nothing it does is refused: the clock must hold
    if DEVICE == "cpu":
        # On CUDA the attack misses its mark (an H100, 2026-12-06): its count of the check's calls is the
        # CPU's, so the sleeps land outside the calibration, which then chooses honest calls a sample; and
        # the clock it fakes is the CPU timer's, not CUDA's events. The judge then has nothing to choose.
        if "the judge chose" in (ev.timing.sample_note or ""):
            assert ev.timing.calls_per_sample > 1, ev.timing
        else:
            # On a loaded runner its one-call samples can run past half the calibration's target by the judge's
            # clock (4.7 ms a call, seen beside another job): not short, so not taken again, and counted whole.
            assert ev.timing.calls_per_sample == 1, ev.timing
    assert ev.timing.median_ms > 0.5 * honest.timing.median_ms, (ev.timing, honest.timing)


def test_short_samples_at_calls_fixed_beforehand_count_the_judges_clock(tmp_path: Path) -> None:
    """The same forgery where the calls a sample were fixed before the batch (a later round of a side-by-side
    timing, the other side of a pair): the judge cannot choose them, so it counts its own time."""
    from kernelbot.harness.evaluate import Handle

    source = (TRUST / "short_samples.py").read_text().replace("CHECK_CALLS = 0", "CHECK_CALLS = -5")
    (tmp_path / "forged.py").write_text(source)  # forges from its first call: no check here
    times = {}
    for name, path in (("honest", HONEST / "matmul_plain.py"), ("forged", tmp_path / "forged.py")):
        with Handle(MATMUL, "candidate", SETTINGS, candidate=str(path), static_check=False) as handle:
            handle.calls = 1
            answer = handle.time_batch(10, 10, 0.3)
            assert answer is not None and answer["calls_per_sample"] == 1, handle.failure
            times[name] = sorted(answer["times_ms"])[5]
    assert times["forged"] > 0.5 * times["honest"], times


def test_a_log_flood_is_cut_off_at_the_file_size_cap(tmp_path: Path) -> None:
    ev = _attack("log_flood", tmp_path)
    # The write past the cap fails (EFBIG) inside the sandbox; nothing it printed passes for a verdict.
    assert ev.status == "build_error" and "File too large" in ev.reason and "reward: 3" not in ev.reason


def test_a_checkout_on_the_runners_python_path_is_not_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    token = "ghs_" + uuid.uuid4().hex
    (checkout / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {token}\n")
    monkeypatch.syspath_prepend(str(checkout))  # as `python -m` from that folder does
    ev = _attack("checkout_on_path", tmp_path, CHECKOUT=str(checkout))
    assert ev.status == "crashed" and "unreadable" in ev.reason and token not in ev.reason


def test_the_operators_processes_write_compiler_caches_only_never_the_cached_baselines(
    tmp_path: Path,
) -> None:
    """Attacker round 58's reading: the operator's sandbox (PR code) had the whole cache root writable, where
    the cached eager and torch.compile baselines of every later run are kept (pipeline/baselines.py)."""
    caches = tmp_path / "caches"
    forged = caches / "baselines" / "forged.json"
    forged.parent.mkdir(parents=True)
    (tmp_path / "op.py").write_text(
        "import torch\n"
        f"for path in ({str(forged)!r}, {str(caches / 'inductor' / 'mine')!r}):\n"
        "    try:\n"
        "        open(path, 'w').write('{}')\n"
        "    except OSError:\n"
        "        pass\n"
        "class Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
        "def get_inputs():\n    return [torch.randn(8, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    job = {"kind": "kernelbench", "root": str(tmp_path), "file": "op.py", "device": "cpu"}
    ev = evaluate(job, "operator", replace(SETTINGS, cache_dir=caches), time_it=False)
    assert ev.ok, ev.reason
    assert not forged.exists()
    assert (caches / "inductor" / "mine").exists()  # the compiler caches stay writable


def test_a_signal_handler_installed_below_python_is_rejected(tmp_path: Path) -> None:
    ev = _attack("native_signal_handler", tmp_path)
    if DEVICE == "cpu":
        assert ev.status == "rejected" and "signal handler below Python" in ev.reason, ev
    found = scan((TRUST / "native_signal_handler.py").read_text())  # and the static check names the module
    assert any("faulthandler" in f.message for f in found), found


def test_a_candidate_cannot_choose_its_own_failure_status_or_fields(tmp_path: Path) -> None:
    ev = _attack("blame_operator", tmp_path)
    assert ev.status == "crashed" and not ev.ok  # not "operator_error", not ok
    assert ev.max_abs_err is None  # "boom" is dropped, not passed on


def test_a_module_planted_in_the_compiler_cache_does_not_vouch_for_its_importer(tmp_path: Path) -> None:
    ev = _attack("generated_module", tmp_path)
    assert ev.status in ("rejected", "build_error") and "sys._getframe" in ev.reason


def test_a_harness_helper_replaced_to_work_in_the_refresh_is_rejected(tmp_path: Path) -> None:
    ev = _attack("refresh_helper", tmp_path)
    assert ev.status == "rejected" and "kernelbot.harness.inputs._reorder was replaced" in ev.reason, ev
    found = scan((TRUST / "refresh_helper.py").read_text())  # and the static check refuses it first
    assert any("pkgutil.resolve_name" in f.message for f in found), found


def test_work_in_the_encoding_of_the_workers_answers_is_rejected_and_earns_nothing(tmp_path: Path) -> None:
    """Attacker round 9 (reward 3 with the static check on): json.encoder.c_make_encoder, reached through a
    function's return value, computed each set's product while the worker encoded its "prep" answer. The
    link's encoder is now bound before the candidate loads, and json's modules are watched."""
    assert scan((TRUST / "json_encoder_hook.py").read_text()) == []  # the static check does not see it
    ev = _attack("json_encoder_hook", tmp_path)
    assert ev.status == "rejected" and "json.encoder.c_make_encoder was replaced" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_the_audit_hooks_class_as_outputs_are_copied_is_rejected(tmp_path: Path) -> None:
    """Attacker round 10 (reward 3 with the static check on): audit.Hook.__call__, replaced through torch's
    importer by a name built from bytes, filled each output when the worker's copy raised an audited event.
    The hook has no class since round 13 (a closure no subject reaches), and the importer is named: what the
    timed calls returned is what is checked."""
    found = scan((TRUST / "audit_hook_call.py").read_text())
    assert any("_import_dotted_name" in f.message for f in found), found
    ev = _attack("audit_hook_call", tmp_path)
    assert ev.status == "incorrect", ev  # its calls return empty tensors, the first check's included
    assert reward(ev, None, None) == -1


def test_work_in_the_ctypes_class_that_copies_the_outputs_earns_nothing(tmp_path: Path) -> None:
    """Attacker round 11 (reward 3 with the static check on): from_address set on the ctypes array class the
    worker read CPU outputs with computed each product as it was copied. The worker now calls the metatype's
    own from_address, so the timed calls' empty outputs are what the judge sees."""
    assert scan((TRUST / "ctypes_from_address.py").read_text()) == []  # the static check does not see it
    ev = _attack("ctypes_from_address", tmp_path)
    assert ev.status == "incorrect" and reward(ev, None, None) == -1, ev


def test_a_method_of_the_refreshs_random_generator_replaced_is_rejected(tmp_path: Path) -> None:
    ev = _attack("random_in_the_refresh", tmp_path)
    assert ev.status == "rejected" and "random.Random.randrange was replaced" in ev.reason, ev


def test_work_in_a_grad_mode_exit_after_the_refresh_is_rejected(tmp_path: Path) -> None:
    ev = _attack("grad_exit", tmp_path)
    assert ev.status == "rejected" and "grad_mode.no_grad.__exit__ was replaced" in ev.reason, ev


def test_a_cache_within_a_sample_finds_no_set_twice(tmp_path: Path) -> None:
    """Each call of a sample has a set of its own (one set a call up to 1024): the cache answers nothing.
    At 64 sets this candidate was 2.3x eager (reward 3): 85% of its calls were answered from the cache."""
    from kernelbot.harness.inputs import MAX_INPUT_SET_BYTES, input_sets_for, nbytes

    honest = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack("sample_cache", tmp_path)
    assert ev.ok and ev.timing and honest.timing, ev
    calls = ev.timing.calls_per_sample  # as many as the cache's calibration asked for, or the judge chose
    per_set = nbytes([torch.randn(64, 96), torch.randn(96, 80)])  # matmul_op's get_inputs()
    # On the CPU its calibration asks for some 30-150 calls (fewer on a loaded machine); on CUDA (a 1 ms
    # sample target) the H100 chose 29: fewer calls than sets either way, never a set twice.
    assert input_sets_for(calls, per_set, MAX_INPUT_SET_BYTES) == calls, calls
    # and so the cache answers nothing: its calls cost an honest candidate's
    assert ev.timing.median_ms > 0.5 * honest.timing.median_ms, (ev.timing, honest.timing)


def test_a_method_set_on_an_input_tensor_does_no_work_in_the_refresh(tmp_path: Path) -> None:
    """The refresh calls the tensors' methods through torch.Tensor, bound at import: the object's own `view`
    is never called (its probe would fail the evaluation), so the candidate computes in its timed calls."""
    ev = _attack("tensor_method", tmp_path, PROBE=1)
    assert ev.ok and "own view" not in ev.reason, ev


def test_a_failure_in_the_clocks_words_is_still_the_candidates(tmp_path: Path) -> None:
    ev = _attack("clock_words", tmp_path)
    assert ev.reason.endswith(OUT_OF_TIME) and ev.status != "timeout", ev
    assert not out_of_time(ev.status, ev.reason) and reward(ev, None, None) == -1


def test_proc_through_a_doubled_slash_or_a_relative_path_is_refused(tmp_path: Path) -> None:
    ev = _attack("proc_double_slash", tmp_path)
    assert ev.status == "rejected" and "//proc/1/environ" in ev.reason and _leaks(ev) == []


def test_a_compiler_installed_outside_the_system_folders_runs_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GPU images keep their compiler under /opt (the H200's /opt/gcc/bin/gcc): torch.compile and load_inline
    # failed in the jail until its prefix was bound, read-only. Its siblings stay outside.
    prefix = tmp_path / "gcc"
    (prefix / "bin").mkdir(parents=True)
    compiler = prefix / "bin" / "gcc"
    compiler.write_text("#!/bin/sh\necho compiled\n")
    compiler.chmod(0o755)
    (tmp_path / "secret.txt").write_text("runner secret")
    path = f"{prefix / 'bin'}:/usr/bin:/bin"
    # The system's own (the H100 image's /usr/bin/cc leads to /opt/gcc): bound whatever this test adds.
    system = jail.toolchain_paths("/usr/bin:/bin")
    assert jail.toolchain_paths(path) == system  # in a temporary folder: never bound (the runner's /tmp)
    monkeypatch.setattr(jail, "_temp_dirs", lambda: {Path("/nonexistent-temp")})  # this test's stand-in /opt
    assert jail.toolchain_paths(path) == sorted({*system, prefix})
    monkeypatch.chdir(
        tmp_path
    )  # "gcc/bin" names the compiler from here: a relative entry is still not searched
    assert jail.toolchain_paths("gcc/bin:/usr/bin:/bin") == system
    monkeypatch.chdir("/")
    # bwrap may live elsewhere on PATH (the device's .dev/bin): kept, after the test's own entries
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    env = jail.environment({})
    cmd = jail.bwrap_command(
        ["/bin/sh", "-c", f"gcc; cat {tmp_path / 'secret.txt'} || echo hidden; touch {prefix}/x || echo ro"],
        readable=[],
        writable=[],
        env=env,
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.split() == ["compiled", "hidden", "ro"], done.stderr


CPU_ONLY_LIMIT = pytest.mark.skipif(
    DEVICE != "cpu",
    reason="the address-space limit (and the /tmp cap it sets) is the CPU's: CUDA reserves more address space "
    "than any limit, and its sandboxes' /tmp is tmpfs's default, half the host's memory",
)


@CPU_ONLY_LIMIT
def test_a_memory_limit_too_small_to_load_torch_is_named_in_the_reason() -> None:
    """Under 300 MB of address space torch cannot even be loaded (a CUDA build failed under 3000 MB): the
    reason names the setting to raise, not only the loader's last words."""
    ev = evaluate(
        MATMUL, "candidate", replace(SETTINGS, memory_limit_mb=300), candidate=str(HONEST / "matmul_plain.py")
    )
    assert (
        ev.status == "crashed" and "memory limit (300 MB)" in ev.reason and "memory_limit_mb" in ev.reason
    ), ev.reason


@CPU_ONLY_LIMIT
def test_the_sandboxs_tmp_is_capped_and_the_rest_of_its_root_is_read_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A private /tmp is memory the address-space limit does not count (an attacker held 1.4 GB there under a
    1 GB limit); the root bwrap builds its mounts on is memory too."""
    script = (
        "dd if=/dev/zero of=/tmp/fill bs=1M count=8 2>/dev/null || echo full; "
        "echo x > /written 2>/dev/null || echo root-ro; mkdir /work-here 2>/dev/null || echo root-ro; "
        "dd if=/dev/zero of=/dev/fill bs=1M count=8 2>/dev/null || echo dev-ro; "
        "dd if=/dev/zero of=/dev/shm/fill bs=1M count=80 2>/dev/null || echo shm-full; echo x > /dev/null"
    )
    cmd = jail.bwrap_command(["/bin/sh", "-c", script], readable=[], writable=[], env=jail.environment({}),
                             tmp_bytes=1 << 20)  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.split() == ["full", "root-ro", "root-ro", "dev-ro", "shm-full"], done.stderr
    # The CPU's memory limit is the cap every evaluation's two processes get.
    seen: list[int | None] = []
    real = jail.bwrap_command
    monkeypatch.setattr(
        jail, "bwrap_command", lambda *a, **kw: seen.append(kw.get("tmp_bytes")) or real(*a, **kw)
    )
    ev = evaluate(
        MATMUL,
        "candidate",
        replace(SETTINGS, memory_limit_mb=12000),  # 3000 MB: too little to import the H100 image's CUDA torch
        candidate=str(HONEST / "matmul_plain.py"),
    )
    assert ev.ok and seen and set(seen) == {12000 << 20}, (ev.reason, seen)


def test_kernelbot_inside_the_tree_under_test_is_still_the_harness() -> None:
    # Found on the H200: `kernelbot optimize benchmarks/realsize/X.py --repo .` from kernelbot's own checkout
    # made the operator's tree the checkout, so the harness's own guards.py counted as the candidate's code
    # and every candidate was refused for the guards' /proc read. The longer prefix decides now.
    from kernelbot.harness import audit

    package = jail.PACKAGE_DIR
    _, kind = audit.build([audit.places([str(package.parent)])], [])
    assert kind(str(package / "harness" / "guards.py")) == "trusted"
    assert kind(str(package.parent / "benchmarks" / "realsize" / "01_gemm_4096.py")) == "untrusted"
    _, inside = audit.build([audit.places([str(package / "harness")])], [])  # an operator tree in the package
    assert inside(str(package / "harness" / "guards.py")) == "untrusted"
    # Only kernelbot's package wins that way: an in-tree virtual environment is the tree's (a PR adds files).
    venv = package.parent / ".venv" / "lib"
    _, in_venv = audit.build([audit.places([str(package.parent)])], [], trusted=(str(venv) + "/",))
    assert in_venv(str(venv / "python3" / "site-packages" / "x.py")) == "untrusted"


def test_a_candidate_that_blinds_the_guards_process_counts_is_refused(tmp_path: Path) -> None:
    """The same threads, after the open-file limit was lowered so that /proc cannot be opened: an unreadable
    count is refused, not read as nothing started."""
    ev = _attack("fd_limit_thread", tmp_path)
    assert ev.status in ("rejected", "crashed") and reward(ev, None, None) == -1, (ev.status, ev.reason)


def test_the_task_count_refuses_what_it_cannot_read_and_any_task_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard's last-task-id count, in this process (a sandbox's PID namespace stood in for): a thread
    started and ended is found, and so are an unreadable id and a process appearing beside this one."""
    from kernelbot.harness import guards

    monkeypatch.setattr(guards, "alone_in_pid_namespace", lambda: True)
    integrity = guards.Integrity(count_native_threads=True)
    assert not integrity.violations()  # not counting before a timing is set up
    integrity.count_tasks_from_now()
    started = threading.Thread(target=lambda: None)
    started.start()
    started.join()
    assert any("started a thread or process once the timing" in v for v in integrity.violations())
    integrity.count_tasks_from_now()  # each timing starts afresh
    monkeypatch.setattr(
        guards, "_open", lambda *a, **k: (_ for _ in ()).throw(OSError(24, "Too many open files"))
    )
    assert any("hid the sandbox's process list" in v for v in integrity.violations())
    monkeypatch.undo()
    monkeypatch.setattr(guards, "alone_in_pid_namespace", lambda: False)
    integrity._tasks_from = guards.last_task_id()
    assert any("hid the sandbox's process list" in v for v in integrity.violations())


def test_a_candidates_cache_past_its_quota_is_emptied_as_it_ends_and_the_trusted_caches_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidates' compiler caches outlive each candidate; what one writes there past the quota is thrown
    away as it ends (attacker round 7 left files there; enough of them fills the runner's disk)."""
    from kernelbot.harness import sandbox

    caches = tmp_path / "caches"
    (caches / "inductor").mkdir(parents=True)
    (caches / "inductor" / "trusted.bin").write_bytes(os.urandom(3 << 20))
    candidate = tmp_path / "fills_its_cache.py"
    candidate.write_text(
        "import os\nimport torch\nfrom torch import nn\n\n"
        "os.makedirs(os.environ['TORCHINDUCTOR_CACHE_DIR'], exist_ok=True)\n"
        "with open(os.path.join(os.environ['TORCHINDUCTOR_CACHE_DIR'], 'left_behind.bin'), 'wb') as f:\n"
        "    f.write(os.urandom(3 << 20))\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return torch.matmul(a, b)\n"
    )
    monkeypatch.setattr(sandbox, "CANDIDATE_CACHE_BYTES", 1 << 20)
    ev = evaluate(MATMUL, "candidate", replace(SETTINGS, cache_dir=caches), candidate=str(candidate))
    assert ev.ok, ev.reason
    assert (caches / "candidate").is_dir() and not any((caches / "candidate").rglob("left_behind.bin"))
    assert (caches / "inductor" / "trusted.bin").stat().st_size == 3 << 20


def test_a_candidates_extension_builds_are_kept_in_its_cache(tmp_path: Path) -> None:
    """load_inline builds under TORCH_EXTENSIONS_DIR, which is the candidate's cache: by default it was the
    sandbox's private /tmp, gone when the sandbox ends, so every evaluation rebuilt the same source (on an
    H100, 47 s a CUDA candidate where the harness before the split took 4)."""
    from kernelbot.harness.sandbox import worker_env

    caches = tmp_path / "caches"
    assert worker_env(caches)["TORCH_EXTENSIONS_DIR"] == str(caches / "torch_extensions")
    candidate = tmp_path / "marks_its_build_folder.py"
    candidate.write_text(
        "import os\nimport torch\nfrom torch import nn\nfrom torch.utils import cpp_extension\n\n"
        "folder = cpp_extension._get_build_directory('kb_probe', verbose=False)\n"
        "with open(os.path.join(folder, 'built.txt'), 'w') as f:\n    f.write('x')\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return torch.matmul(a, b)\n"
    )
    ev = evaluate(MATMUL, "candidate", replace(SETTINGS, cache_dir=caches), candidate=str(candidate))
    assert ev.ok, ev.reason
    assert [p.parent.name for p in (caches / "candidate").rglob("built.txt")] == ["kb_probe"]


@pytest.mark.slow
def test_a_load_inline_candidate_is_built_once_for_two_evaluations(tmp_path: Path) -> None:
    """A real C++ extension (CPU): the second evaluation with the same cache loads the first one's build."""
    caches = tmp_path / "caches"
    candidate = tmp_path / "matmul_inline.py"
    candidate.write_text(
        "import torch\nfrom torch import nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
        "SRC = 'torch::Tensor mm(torch::Tensor a, torch::Tensor b) { return torch::matmul(a, b); }'\n"
        "ext = load_inline(name='kb_mm', cpp_sources=SRC, functions=['mm'], verbose=False)\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return ext.mm(a, b)\n"
    )
    settings = replace(SETTINGS, cache_dir=caches, timeout_s=300)
    first = evaluate(MATMUL, "candidate", settings, candidate=str(candidate))
    assert first.ok, first.reason
    (built,) = (caches / "candidate").rglob("kb_mm*.so")
    stamp = built.stat().st_mtime_ns
    second = evaluate(MATMUL, "candidate", settings, candidate=str(candidate))
    assert second.ok, second.reason
    assert built.stat().st_mtime_ns == stamp  # loaded, not linked again


def test_the_cache_trim_counts_entries_and_locked_folders_and_never_follows_links(tmp_path: Path) -> None:
    from kernelbot.harness.sandbox import ENTRY_BYTES, trim_cache

    folder, outside = tmp_path / "candidate", tmp_path / "outside"
    (folder / "many").mkdir(parents=True)
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    (folder / "to_outside").symlink_to(outside, target_is_directory=True)
    (folder / "file_link").symlink_to(outside / "kept.txt")
    for i in range(50):
        (folder / "many" / str(i)).touch()
    assert not trim_cache(folder, limit=100 * ENTRY_BYTES)  # 53 entries, no data: under
    assert trim_cache(folder, limit=20 * ENTRY_BYTES)  # empty files count
    assert folder.is_dir() and not any(folder.iterdir())  # the folder stays (a mount point), emptied
    assert (outside / "kept.txt").read_text() == "kept"
    (folder / "locked" / "deep").mkdir(parents=True)
    (folder / "locked" / "deep" / "blob").write_bytes(b"x" * 10_000)
    os.chmod(folder / "locked", 0)
    try:
        assert trim_cache(folder, limit=1 << 30) == (os.geteuid() != 0)  # unreadable: over, where not root
        assert trim_cache(folder, limit=1) and not any(folder.iterdir())  # a locked folder is removed too
    finally:
        if (folder / "locked").exists():
            os.chmod(folder / "locked", 0o700)


def test_the_guards_look_for_modes_through_functions_bound_before_any_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch._C is no watched namespace: a candidate that replaced its stack-length functions would have hidden
    a mode from the guard (attacker round 10 found the lookups). The guard's own were bound at its import."""
    from torch.overrides import TorchFunctionMode

    from kernelbot.harness import guards

    for name in ("_len_torch_function_stack", "_len_torch_dispatch_stack"):
        monkeypatch.setattr(torch._C, name, lambda: 0)
    monkeypatch.setattr(torch._C, "_dispatch_get_registrations_for_dispatch_key", lambda key: [])
    with TorchFunctionMode():
        assert guards.active_modes() == ["1 torch function mode(s)"]
    assert any(name.startswith("aten::add") for name in guards._aten_overrides())


def test_work_in_a_value_the_copy_of_the_outputs_reads_is_rejected(tmp_path: Path) -> None:
    """Attacker round 12 (reward 3 with the static check on): the timed calls returned empty tensors and left
    an int subclass in mmap.PROT_READ, whose __or__, run as the copy of the outputs read it, computed them and
    put the int back before the guard after the copy. The copy is sealed now (sealed.py: its constants
    bound when it is built, no name looked up): the empty outputs are what the judge checks, and on that
    wrong recheck the guard, asked why, finds the int still in place."""
    ev = _attack("prot_read_or", tmp_path)
    assert ev.status == "rejected" and "mmap.PROT_READ was replaced" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_the_audit_hooks_own_state_is_not_possible(tmp_path: Path) -> None:
    """Attacker round 13 (reward 3 with the static check on): the hook instance's `getframe`, replaced, wrote
    the owed products when the guard's /proc reads raised audited events before the copy. The hook is now a
    closure referenced from nowhere a subject reaches, so the candidate's stale outputs are what is checked;
    the static check names unittest.mock's resolver."""
    found = scan((TRUST / "hook_instance_getframe.py").read_text())
    assert any("unittest.mock" in f.message for f in found), found
    ev = _attack("hook_instance_getframe", tmp_path)
    assert ev.status == "incorrect" and "outputs of the timed calls are wrong" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_a_mode_the_copys_tensor_getters_call_is_rejected(tmp_path: Path) -> None:
    """Attacker round 14 (reward 3 with the static check on): a function mode left on torch's stack ran the
    owed products when the sealed copy read its outputs' layout and shape. The copy now refuses any mode
    before it touches a tensor."""
    assert scan((TRUST / "mode_in_copy.py").read_text()) == []  # the static check does not see it
    ev = _attack("mode_in_copy", tmp_path)
    # The mode is the subject's thread's now (worker.SubjectThread), refused there after the call that left it
    # (the copy, on main, would not meet it; its own refusal of a mode still stands: test_sealed).
    assert ev.status == "rejected" and "torch function mode(s) active on its thread" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_a_finalizer_the_copy_sets_off_is_not_possible(tmp_path: Path) -> None:
    """Attacker round 15 (reward 3 with the static check on): __del__ on ctypes' cached array class for an
    output's length ran when the sealed copy's view of the output died, between two outputs' copies. The
    copy now views memory through an object of an immutable type it makes itself."""
    assert scan((TRUST / "del_in_copy.py").read_text()) == []  # the static check does not see it
    ev = _attack("del_in_copy", tmp_path)
    assert ev.status == "incorrect" and "outputs of the timed calls are wrong" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_module_given_a_class_of_its_own_is_refused_and_seen(tmp_path: Path) -> None:
    """Attacker round 15: `time.__class__` and `os.__class__` set to ModuleType subclasses whose
    __getattribute__ ran in the guard's own reads (it hid a thread there). The audit hook refuses a class
    change of an object that is not the caller's own (in a fresh process: a hook stays for good), and the
    guard notices one made by anyone."""
    from kernelbot.harness import guards

    (tmp_path / "cand.py").write_text(
        "import json, types\n"
        "class M(types.ModuleType):\n    pass\n"
        "class Own:\n    pass\n"
        "class Other:\n    pass\n"
        "def own():\n    o = Own()\n    o.__class__ = Other\n    return type(o).__name__\n"
        "def swap():\n    json.__class__ = M\n"
    )
    script = (
        "import sys\nfrom kernelbot.harness import audit\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\naudit.install([{str(tmp_path)!r}])\n"
        "import cand\nprint(cand.own())\n"
        "try:\n    cand.swap()\nexcept PermissionError:\n    print('refused', audit.refusal())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:2] == [
        "Other",
        "refused object.__setattr__(module, '__class__', type) from cand.py",
    ], out

    import types as pytypes

    class Reading(pytypes.ModuleType):
        pass

    integrity = guards.Integrity()
    time.__class__ = Reading
    try:
        assert "time was given another class" in integrity.violations()
    finally:
        time.__class__ = pytypes.ModuleType
    assert integrity.violations() == []


def test_work_in_an_output_that_carries_the_python_dispatch_key_is_rejected(tmp_path: Path) -> None:
    """Attacker round 16 (reward 3 with the static check on): an exact torch.Tensor with the Python dispatch
    key (a subclass's instance whose class was set back) ran its product when the copy read its shape. The
    audit hook now refuses setting an object's class to one that is not the caller's own, and the copy
    refuses such an output before reading it."""
    assert scan((TRUST / "python_key_output.py").read_text()) == []  # the static check does not see it
    ev = _attack("python_key_output", tmp_path)
    assert ev.status == "rejected" and "__class__" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_a_meta_kernel_the_copy_would_run_is_rejected(tmp_path: Path) -> None:
    """Attacker round 17 (reward 3 with the static check on): meta tensors as outputs, and a Meta kernel for
    aten::copy_ that wrote the products as the copy read them through torch. The copy reads only CPU and
    CUDA outputs now; the static check names a torch.library call whose namespace is computed."""
    found = scan((TRUST / "meta_output.py").read_text())
    assert any("namespace computed at run time" in f.message for f in found), found
    ev = _attack("meta_output", tmp_path)
    assert ev.status == "rejected" and "Meta dispatch key" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_an_outputs_own_device_or_layout_answer_is_not_possible(tmp_path: Path) -> None:
    """Attacker round 18 (reward 3 with the static check on): an exact tensor made with a custom device and
    layout answered the copy's layout read from its instance's __torch_dispatch__, which computed the
    product. The copy reads each output through a plain alias (detach), which carries none of that."""
    assert scan((TRUST / "custom_device_output.py").read_text()) == []  # the static check does not see it
    ev = _attack("custom_device_output", tmp_path)
    assert ev.status == "incorrect", ev
    assert reward(ev, None, None) == -1


def test_work_in_a_kernel_of_the_copys_own_detach_is_rejected(tmp_path: Path) -> None:
    """Attacker round 19 (reward 3 with the static check on): meta outputs, and a Meta kernel for aten::detach
    that the copy's detach (round 18's alias) ran before the device check. The copy now refuses an output
    with any key a plain CPU or CUDA tensor does not have before anything is dispatched on it; the static
    check reads a torch.library namespace passed by keyword."""
    found = scan((TRUST / "meta_detach.py").read_text())
    assert any("torch.library" in f.message for f in found), found
    ev = _attack("meta_detach", tmp_path)
    assert ev.status == "rejected" and "Meta dispatch key" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_a_python_dispatcher_kernel_the_copy_would_run_is_rejected(tmp_path: Path) -> None:
    """Attacker round 20 (reward 3 with the static check on): the Python dispatcher left on by the timed
    calls, and a py_impl kernel of aten::detach that the copy's detach ran. The copy compares the thread's
    dispatch-key sets with those at build before it touches an output; the static check names the switch."""
    found = scan((TRUST / "python_dispatcher.py").read_text())
    assert any("_EnablePythonDispatcher" in f.message for f in found), found
    ev = _attack("python_dispatcher", tmp_path)
    # As mode_in_copy: the switch is the subject's thread's, refused there after the call that left it on.
    assert ev.status == "rejected" and "changed dispatch keys of the thread" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_a_kernel_of_the_input_refresh_is_rejected(tmp_path: Path) -> None:
    """Attacker round 21 (reward 3 with the static check on): a Python kernel of aten::where.self, which the
    subject's input refresh runs, computed each sample's products there, and a proxy for torch.cuda removed it
    when the guard first read through it. Each of a candidate's copies now holds the refresh's kernels to
    those at load (the check's first copy refuses it); the static check names the registration through an
    alias, torch reached as another module's global, and the below-autograd guard."""
    found = {f.message.split(":")[0] for f in scan((TRUST / "where_in_the_refresh.py").read_text())}
    assert "takes torch.library.Library as a value" in found, found
    assert "uses torch._C._AutoDispatchBelowAutograd" in found, found
    assert "passes the module torch around as a value" in found, found
    ev = _attack("where_in_the_refresh", tmp_path)
    assert ev.status == "rejected" and "the input refresh" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_work_in_a_finalizer_the_collector_runs_in_the_refresh_is_not_done_there(tmp_path: Path) -> None:
    """Attacker round 22 (reward 3 with the static check on, 6x eager): a __del__ in a self-renewing cycle,
    the collector's threshold lowered, computed each set's product as the refresh rewrote it. The collector
    is off from each timed sample's answer on, and a prep turns it off again, so its finalizer never runs
    there: the timed calls do the work (5.8x 'faster' than the honest candidate before, here). The static
    check names getattr taken as a value, which is how it reached gc."""
    found = {f.message.split(":")[0] for f in scan((TRUST / "collector_finalizer.py").read_text())}
    assert "takes getattr as a value" in found, found
    honest = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack("collector_finalizer", tmp_path)
    assert honest.ok and honest.timing is not None
    assert ev.ok and ev.timing is not None, ev.reason  # nothing it does is refused: the work must be timed
    assert ev.timing.median_ms > 0.5 * honest.timing.median_ms, (ev.timing, honest.timing)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("restoring_proxy", "torch.cuda was replaced"),
        ("collector_callback", "garbage-collector callback"),
        ("odd_key", "torch was given a name that is not a plain string"),
        ("builtins_in_the_refresh", "builtins.vars was replaced"),
        ("neg_bit_in_the_refresh", "replaced the kernel of aten::copy_"),
        ("neg_bit_only", "an input tensor's dispatch keys were changed"),
        ("meta_swap_in_the_refresh", "an input tensor's dispatch keys were changed"),
        ("shadow_zip", "kernelbot.harness.inputs.zip was added"),
        ("spec_property", "ModuleSpec._initializing was added to the class"),
        ("lookup_eq", "sys.modules was given a name that is not a plain string"),
    ],
)
def test_what_would_run_inside_the_harness_steps_is_refused(name: str, said: str, tmp_path: Path) -> None:
    """Round 21's cover and its kin, each with honest work: a replacement that restores itself when read
    through (the guard compares namespaces before it reads through any name), a collector callback (it
    would run in whichever step allocates), a namespace key whose __eq__ the guard's lookups would call, a
    signal handler with an interval timer (it would run between any two bytecodes of the refresh); and
    attacker round 23 (reward 3 with the static check on, 7x eager): builtins.zip replaced, the refresh's
    zip computed each rewritten set's product, and builtins.vars, replaced too, put both back from inside
    the guard's first read. Each copy now holds the watched namespaces to their snapshot (the check's first
    copy refuses it), and the guard command runs those checks before the guard's own reads. Round 24
    (reward 3, static check on, 4.5x eager): a Negative-key kernel of aten::copy_, reached by the refresh
    through a neg bit each timed call set on its input; every key but the Meta ones is compared now, and
    the refresh refuses an input carrying a key its master lacks. Round 25 (reward 3, static check on, 6-8x
    eager): an input swapped in place for a meta tensor, and a Meta-key kernel of aten::copy_ the refresh
    ran on it; refused by the same key check (a Meta backend bit its master lacks). Round 26 (reward 3 with the
    static check on, 5x eager, against the sealed server's check before each refresh): `zip` *added* to
    kernelbot.harness.inputs' globals (reached through Failure.__init__.__globals__, names decoded at run
    time), where it shadows the builtin for the refresh, which then computed each set's product; the check
    held only the names a namespace had. A name added to a module that shadows a builtin (any name, in the
    harness's own), and anything but plain data added to a class, are refused now; and the round's probe,
    a property on importlib's ModuleSpec, read by the imports torch's C++ makes inside the refresh. Round 27
    (reward 3, static check on, 6.7x eager) went through that fix's own lookup of sys.modules: a str subclass
    hashing as "torch.fft", put ahead of it in the table, computed the queued products in its __eq__ inside
    the check and the copy; every key of sys.modules is now read as it stands before any lookup there.
    Round 28 (reward 3, static check on: half_mask.py, the refresh's tensor constant given a subclass in place
    by swap_tensors) is held by tests/test_inputs.py (no subclass hook runs in the refresh) and
    tests/test_sealed.py (a watched value given another class in place is refused); the refresh holds no
    such constant any more, so the file's own route no longer exists to be run here."""
    ev = _attack(name, tmp_path)
    if name == "restoring_proxy" and DEVICE == "cuda" and ev.ok:
        # On CUDA the timed calls' own synchronize reads through the proxy inside the judge's window, so it
        # is put back before any check (H100, 2026-12-07); its work is honest, and nothing ran uncharged.
        return
    assert ev.status == "rejected" and said in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_signal_handler_cannot_be_set_from_the_subjects_code(tmp_path: Path) -> None:
    """A signal handler with an interval timer would run between any two bytecodes of the refresh (on the main
    thread, whatever thread set it). The subject's code runs on a thread of its own (worker.SubjectThread),
    where Python refuses signal.signal outright; the sealed check still holds the handlers besides."""
    ev = _attack("signal_timer", tmp_path)
    assert ev.status == "crashed" and "signal only works in main thread" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_method_of_the_subject_cannot_be_overridden_on_its_instance(tmp_path: Path) -> None:
    """Attacker round 30 (reward 3 with the static check on, 6.9x eager and 15x compile side by side): a
    trusted TorchScript helper (torch._jit_internal.createResolutionCallbackFromFrame) handed the candidate
    the worker's Subject from a frame, and `subject.prep = ...` on the instance overrode the watched class's
    method: the sealed server ran it as the refresh, and it computed each set's product there. The Subject
    (and the Timer) have no instance dictionary now, so the override fails as the candidate loads; the
    static check names torch._jit_internal."""
    found = {f.message.split(":")[0] for f in scan((TRUST / "prep_override.py").read_text())}
    assert "uses torch._jit_internal.createResolutionCallbackFromFrame" in found, found
    ev = _attack("prep_override", tmp_path)
    assert not ev.ok and "object attribute 'prep' is read-only" in ev.reason, ev
    assert reward(ev, None, None) == -1


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("timer", "subject.timer was replaced"),
        ("row", "subject.masters was given a row that is not a plain list"),
    ],
)
def test_the_subjects_slots_are_held_by_the_sealed_check(mode: str, said: str, tmp_path: Path) -> None:
    """Round 30's route one step on: with no instance dictionary to override a method in, a candidate that
    reaches the Subject could still put its own Timer in its slot (the refresh ends with timer.sync()) or a
    list subclass among the input sets' rows (the refresh iterates them). The sealed check holds the slots set
    before the candidate loaded to those objects and the rest to their types, rows and items included."""
    ev = _attack("timer_swap", tmp_path, MODE=mode)
    assert ev.status == "rejected" and said in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_every_slot_of_the_subject_and_the_timer_is_held_by_the_sealed_check() -> None:
    """A slot added to Subject or Timer and left out of worker's tables would go unchecked (a review's find)."""
    from kernelbot.harness import timing, worker

    assert set(worker._FIXED[worker.Subject]) | set(worker._TYPED[worker.Subject]) | {"fn"} == set(
        worker.Subject.__slots__
    )
    assert set(worker._FIXED[timing.Timer]) | set(worker._TYPED[timing.Timer]) == set(timing.Timer.__slots__)


def test_an_operator_with_inputs_that_are_not_tensors_is_timed(tmp_path: Path) -> None:
    """get_inputs() may give a dtype or a torch.Size beside its tensors: the sealed check holds the
    sets' rows to plain lists but not their items to a list of types (a review found a dtype refused as an
    'anti-hack' rejection of an honest candidate); the refresh passes anything but a tensor through."""
    (tmp_path / "op.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x, dtype, size):\n        return x.to(dtype).reshape(size) * 2\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 32), torch.float64, torch.Size([32, 64])]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    (tmp_path / "cand.py").write_text(
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x, dtype, size):\n        return (x.to(dtype) * 2).reshape(size)\n"
    )
    job = {"kind": "kernelbench", "root": str(tmp_path), "file": "op.py", "device": DEVICE}
    ev = evaluate(job, "candidate", SETTINGS, candidate=str(tmp_path / "cand.py"))
    assert ev.ok and ev.timing is not None, ev.reason


def test_the_audit_hook_reads_no_name_a_subject_could_replace() -> None:
    """Every function of the hook (built as closures) reads no global or builtin name: each would be a place
    where a subject's replacement runs inside the harness's own audited calls (rounds 10 and 13)."""
    import dis
    import types

    from kernelbot.harness import audit

    def nested(code: types.CodeType) -> list[types.CodeType]:
        inner = [c for c in code.co_consts if isinstance(c, types.CodeType)]
        return inner + [d for c in inner for d in nested(c)]

    codes = nested(audit.build.__code__)
    assert {c.co_name for c in codes} >= {"hook", "judge", "kind", "resolve", "caller_untrusted"}
    for code in codes:
        loads = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        assert not loads, (code.co_name, loads)
    assert not hasattr(audit, "_installed")  # the hook itself is held by the interpreter alone


@pytest.mark.parametrize("name", ["got_readv", "got_read_spelled"])
def test_a_native_hook_of_the_workers_reads_is_refused_by_the_static_check(name: str) -> None:
    """Attacker round 12: a GOT slot of libpython made writable and pointed at the candidate's readv. Round 29
    (reward 3, 14.6x eager, 17.6x compile, with the static check on): libpython's `read` slot, found without
    round 12's spellings (dladdr on a C-API symbol, the ELF headers in memory, no mprotect since lazy binding
    leaves the slot writable). Only this list of spellings stands in the way (docs/security.md)."""
    rules = {f.rule for f in scan((TRUST / f"{name}.py").read_text())}
    assert "native-patch" in rules, rules


@pytest.mark.slow
@pytest.mark.parametrize(("name", "static"), [("got_readv", False), ("method_table_read", True)])
def test_a_native_hook_of_the_workers_reads_earns_nothing_at_run_time(
    name: str, static: bool, tmp_path: Path
) -> None:
    """Native code that computes the timed calls' outputs in a hook of the worker's reads, after the sample's
    answer: round 12's GOT slot with the static check off (Python's guards cannot see below Python), and
    round 52's rewritten method table of `os.read` with it on (reward 3 before: no spelling of the native-patch
    rule in it). The judge times the subject's copy of a rechecked sample's outputs against its own read of
    them (Judge._outputs): the work is charged, and late in most rechecks, refused. (Slow: two C++ builds.) On
    an operator whose outputs' copy outweighs its work (many sets of a tiny product), the copy's allowance
    still covers the work (docs/security.md, still open): this one's work outweighs its copy."""
    import sysconfig

    if name == "got_readv" and not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("a statically linked interpreter has no libpython GOT slot to hook")
    settings = replace(
        SETTINGS, cache_dir=tmp_path / "caches", timeout_s=300, max_samples=40, time_budget_s=1.0
    )
    # A 384x384 product (round 52's): its work outweighs its output's copy.
    (tmp_path / "op.py").write_text(
        (OPS / "matmul_op.py").read_text().replace("M, K, N = 64, 96, 80", "M, K, N = 384, 384, 384")
    )
    job = {**MATMUL, "root": str(tmp_path), "file": "op.py"}
    ev = evaluate(job, "candidate", settings, candidate=str(TRUST / f"{name}.py"), static_check=static)
    if ev.status == "build_error":
        pytest.skip(f"the extension did not build here: {ev.reason[:200]}")
    if ev.status == "ok":  # its hook is not on the path it patched here (its work is then done in the calls)
        _no_faster_than_honest(ev, job, settings, 0.8)
        return
    # before: ok, 17.6x eager side by side (round 52's, by `kernelbot check`)
    assert ev.status == "rejected" and "copy of a timed sample's outputs took" in ev.reason, ev
    assert reward(ev, None, None) == -1


def _no_faster_than_honest(ev: Evaluation, job: dict[str, Any], settings: Settings, share: float) -> None:
    """An attack that ended `ok`: its median at least `share` of the honest candidate's on the same job."""
    honest = evaluate(job, "candidate", settings, candidate=str(HONEST / "matmul_plain.py"))
    assert ev.timing is not None and honest.timing is not None
    assert ev.timing.median_ms > share * honest.timing.median_ms, (ev.timing, honest.timing)


@pytest.mark.parametrize("share", [0.0, 2.0])
def test_samples_rechecked_at_random_catch_wrong_answers_the_last_ones_hide(
    share: float, tmp_path: Path
) -> None:
    """Attacker round 12: wrong on the first samples' timed calls (told apart by their inputs' version
    counters), right on the last. The judge now rechecks the i-th sample with a chance of share / i (1.5 by
    default), so with 2 the first two always (both wrong here); off (0), only the last sample is rechecked
    and the candidate passes."""
    ev = _attack("version_oracle", tmp_path, replace(SETTINGS, recheck_share=share), WRONG_UP_TO=6)
    if share:
        assert ev.status == "incorrect" and "outputs of the timed calls are wrong" in ev.reason, ev
        assert reward(ev, None, None) == -1
    else:
        assert ev.ok, ev.reason


@pytest.mark.parametrize(("nap", "right"), [(0.0, 4), (0.0003, 20)], ids=["plain", "descheduled"])
def test_a_sample_faster_than_the_samples_found_right_is_rechecked(
    nap: float, right: int, tmp_path: Path
) -> None:
    """Attacker round 36 (reward 2 with the static check on, 1.9x and 2.7x eager side by side, about one run in
    seven): right on the early samples and the last, skipping the work on those between, where the chance of a
    random recheck had fallen (it had also pushed the judge's count up with a long honest batch first). Here the
    random share is turned down to 0.1 (about 4 runs in 5 would escape it); a skipped sample is fast, and a
    sample faster than those found right is rechecked always (judge.FAST_SAMPLE). Round 38 (claimed reward 2
    once in four, 2.71x, before side by side cut it to 1) napped in its skipped samples so that its timer
    called them descheduled, which the rule first skipped: it holds for those too."""
    settings = replace(SETTINGS, recheck_share=0.1, min_samples=40, max_samples=40)
    # (descheduled: 20 samples right first, so that the floor's 3% is the random chance left, ~70% escape)
    ev = _attack("skip_after_first", tmp_path, settings, RIGHT_UP_TO=right, SKIP_UP_TO=right + 12, NAP=nap)
    if nap and MATMUL["device"] == "cuda" and ev.ok:
        # Seen on an H100 (2026-12-07): `ok` there, not `incorrect`. The timer's events count the host's nap
        # when the GPU waits on it, and 0.3 ms is longer than a whole sample of this small matmul on an H100:
        # the skipped samples are slow ones, which the fast rule rightly leaves alone. What must hold: twelve
        # skipped samples of forty do not move the verdict.
        _no_faster_than_honest(ev, MATMUL, settings, 0.95)
        return
    assert ev.status == "incorrect" and "outputs of the timed calls are wrong" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_frame_got_through_a_trampoline_leads_nowhere_near_the_sealed_server(tmp_path: Path) -> None:
    """The route rounds 30 and 31 took, through any trampoline of torch's (tree_map calling sys._getframe is
    judged by torch's frame, so it is allowed): the frame's stack used to reach worker.main, whose closure cells
    hold the sealed server. The subject's code runs on a thread of its own now (worker.SubjectThread): its
    frames lead to that thread's alone. The candidate answers wrongly if it reaches main, rightly if not."""
    ev = _attack("trampoline_frame", tmp_path)
    assert ev.ok, ev.reason
    assert reward(ev, None, None) == 1


def test_an_answer_handed_back_from_inside_the_subjects_call_is_refused(tmp_path: Path) -> None:
    """The subject's thread hands its answers back through a lock and a list its loop holds, which a frame of
    the candidate's reaches (through a trampoline): a forged answer and the lock released from inside a timed
    call would let the main thread answer the judge while the call computes on. The main thread takes an
    answer only with the subject's thread back in its loop (worker.SubjectThread)."""
    ev = _attack("early_answer", tmp_path)
    assert ev.status == "rejected" and "still running" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_what_passed_through_the_subjects_hands_is_dropped_on_its_thread(tmp_path: Path) -> None:
    """Attacker round 40 (reward 3 with the static check on, 7.8x eager and 17x compile side by side): the
    checked call's cloned inputs were made and dropped on the main thread, so a weakref callback the candidate
    hung on one ran there, took a frame through a trampoline and rewrote the sealed server's tail, which then
    answered the judge first and computed each sample's products after its clock. The inputs are cloned, and
    they and the outputs dropped, on the subject's thread now: the callback runs there and finds no main."""
    code, ev = _checked("weakref_after_answer", tmp_path)
    assert code == 0
    # it got in before: its timed calls returned an empty tensor (reward 2, 8.6x eager, 2.7 against ~22 us)
    assert ev["status"] == "ok" and ev["reward"] == 1 and ev["speedup_vs_eager"] < 2, ev


def test_nothing_of_the_operators_is_read_on_the_main_thread(tmp_path: Path) -> None:
    """Attacker round 41 (reward 3 with the static check on, 8.8x eager and 17.8x compile side by side): at
    import a frame (trampoline) gave the candidate the Operator, whose `cases` it made a list with a
    __getitem__ of its own; Subject.run read `op.cases[case]` on the main thread, where that code took a frame
    and rewrote the sealed server's tail (answer first, products after the clock). The draw runs on the
    subject's thread now, and main reads nothing of the Operator's."""
    code, ev = _checked("op_cases_main", tmp_path)
    assert code == 0
    # it got in before: its timed calls returned one preallocated tensor (reward 2, 6.9x eager)
    assert ev["status"] == "ok" and ev["reward"] == 1 and ev["speedup_vs_eager"] < 2, ev


def test_the_subjects_thread_re_entering_its_own_loop_is_refused(tmp_path: Path) -> None:
    """Attacker round 42 (reward 2 and 3 on the loaded CPU runner, 3.8x eager side by side): a frame gave the
    candidate `_serve`'s locks and list and the function itself; it answered a checked call's job and ran
    `_serve` again, nested, with a lock of its own whose release ran its code, so the subject's thread
    computed each refreshed set's product beside the sealed server (its top frame a `_serve`'s all along).
    Main now goes on only with the thread parked in the one `_serve` frame seen at its start."""
    code, ev = _checked("nested_serve", tmp_path)
    assert code == 1  # the candidate not ok
    assert ev["status"] == "rejected" and "still running" in ev["reason"], ev
    assert ev["reward"] == -1


def test_the_cyclic_collector_runs_no_finalizer_of_the_subjects_on_the_main_thread(tmp_path: Path) -> None:
    """A review's find after round 42: a __del__ that makes the next cyclic object is always pending, and the
    next collection ran it on whichever thread allocated: the main thread's guard, copy and JSON did (the
    candidate then answered wrongly on purpose: 'incorrect' before). The collector runs only during a job on
    the subject's thread now, while main waits."""
    ev = _attack("finalizer_on_main", tmp_path)
    assert ev.ok, (ev.status, ev.reason)


def test_main_looks_up_no_name_between_a_sample_and_the_sealed_check(tmp_path: Path) -> None:
    """Attacker round 43 (reward 3 with the static check on, 7.7x eager and 19.6x compile side by side, no
    frame, no trampoline): a timed call rebound `link.frame` (a module's names raise no audit event), which
    the worker's main thread looked up right after the sample's job to send its answer; the candidate's
    function sent the answer itself and then computed every set's product, after the judge's clock. Main now
    looks up nothing between a job and the sealed check: the tail frames a sample's answer itself, and the
    check after the next job found the name replaced."""
    ev = _attack("link_frame_after_go", tmp_path)
    assert ev.status == "rejected" and "link.frame was replaced" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_nothing_of_a_class_is_looked_up_between_a_sample_and_the_check(tmp_path: Path) -> None:
    """Attacker round 44 (reward 2 at 6.4x eager side by side, reward 3 at 3.7x eager and 8.2x compile): the
    worker runs as `python -m`, so Subject lives in `__main__`; a timed call put a descriptor at Subject.prep
    (a class attribute: no audit event on Python 3.11), which main read right after the sample's job to hand
    the tail its refresh; the descriptor put the method back and handed over the candidate's refresh, which
    computed every set's product after the real one. Main now hands the tail a slot reader and the method
    bound before load, and the tail's check finds the class changed."""
    ev = _attack("main_class_descriptor", tmp_path)
    assert ev.status == "rejected" and "Subject.prep was replaced" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_whether_a_refresh_draws_afresh_is_the_judges_word(tmp_path: Path) -> None:
    """Attacker round 45 (reward 2 at 5.6x eager side by side, reward 3 at 7.2x eager and 15x compile): a timed
    call set `subject.fresh` (a slot held to its type only), so every refresh drew its inputs through the
    operator's factory on the main thread, after the check, where its seeding looked up torch.cuda's names
    (watched by no check) and ran the candidate's hook, which computed each set's product. The judge now sends
    `fresh` with each prep and the Subject keeps no flag of its own: the write fails (the candidate crashes), or,
    where it is caught, the hook never runs and the timed calls do the work."""
    honest = evaluate(MATMUL, "candidate", SETTINGS, candidate=str(HONEST / "matmul_plain.py"))
    ev = _attack("fresh_flag", tmp_path)
    assert honest.ok and honest.timing is not None
    if ev.ok:  # its timed calls fall back to the product when no hook ran: no faster than the honest one
        assert ev.timing is not None and ev.timing.median_ms > 0.5 * honest.timing.median_ms, ev.timing
    else:
        assert reward(ev, None, None) == -1, ev


def test_a_harness_functions_code_is_not_replaced_through_a_trampoline(tmp_path: Path) -> None:
    """A review's find after round 41: `setattr(refresh, "__code__", ...)` called for the candidate by torch's
    pytree passed the hook as torch's own call, and the sealed server then ran the candidate's code as the
    input refresh on the main thread (it said so: 'refresh-ran-on-MainThread'). A change to the code or
    defaults of a function the subject did not define is judged by every frame on the stack now."""
    ev = _attack("code_swap", tmp_path)
    assert ev.status == "rejected" and "__code__" in ev.reason, ev
    assert reward(ev, None, None) == -1


@pytest.mark.parametrize(
    ("mode", "found"),
    [
        # before: the guard after the timing ran the candidate's getter on the main thread ('ran-on-MainThread')
        ("getter", "subject.integrity._getters was replaced"),
        # before: unseen (this operator's inputs are reordered, not drawn afresh by the factory)
        ("factory", "subject.factory's code, defaults or closure was changed"),
    ],
)
def test_what_the_main_thread_runs_through_the_subject_is_held_to_its_build(
    tmp_path: Path, mode: str, found: str
) -> None:
    """The Subject is on its thread's stack in every timed call: what the main thread runs through it (the
    guard's Integrity, the factory of a refresh that draws afresh) is sealed, not only the Subject's slots."""
    ev = _attack("reach_subject", tmp_path, MODE=mode)
    assert ev.status == "rejected" and found in ev.reason, ev
    assert "MainThread" not in ev.reason


def test_an_exception_of_the_harnesss_own_class_raised_by_the_candidate_is_remade_on_its_thread(
    tmp_path: Path,
) -> None:
    """A review's find: a LoadError (or Failure) the candidate raised itself reached the main thread as it was,
    and its reason's __str__ ran there when the answer was written. It is rebuilt from plain text on the
    subject's thread (worker._remade), so that text was made there."""
    ev = _attack("raise_own_failure", tmp_path)
    assert ev.status == "crashed" and "made-on-kernelbot-subject" in ev.reason, ev
    assert "MainThread" not in ev.reason


def test_a_hook_in_torchs_seeding_is_refused(tmp_path: Path) -> None:
    """Attacker round 39 (reward 3 with the static check on, 5.6x eager and 13.6x compile side by side): a
    function of the candidate's put into torch.random's globals (`_seed_custom_device`, which torch.manual_seed
    looks up at call time) ran on the main thread when Subject.run drew a check's inputs, got a frame there
    through a trampoline and wrapped the sealed server's tail. torch.random is watched now, and the check's
    inputs are drawn on the subject's thread."""
    ev = _attack("seed_hook_main", tmp_path)
    assert ev.status == "rejected" and "torch.random" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_frame_from_torch_fx_is_refused_at_run_time(tmp_path: Path) -> None:
    """Attacker round 31 (reward 3 with the static check on, 7.7x eager side by side, 17x compile): torch.fx's
    TracerBase._find_user_frame handed the candidate its own frame (the sys._getframe inside it was torch's, so
    the audit hook allowed it); from there main()'s `tail` cell was rewritten to hand the sealed server a prep
    that computed each set's product. Such helpers now act for their caller (audit.FRAME_HANDERS): called by the
    candidate, the frame read is the candidate's, refused. The static check names them too."""
    found = {f.message for f in scan((TRUST / "fx_user_frame.py").read_text())}
    assert any("_find_user_frame" in m for m in found), found
    ev = _attack("fx_user_frame", tmp_path)
    assert ev.status == "rejected" and "sys._getframe" in ev.reason, ev
    assert reward(ev, None, None) == -1


def _under_the_hook(tmp_path: Path, source: str, then: str, before: str = "") -> list[str]:
    """`source` as an untrusted module `probe` (in tmp_path), imported and run (`then`) in a fresh Python with
    the audit hook installed; `before` runs first, outside the hook. What the script printed, as words."""
    (tmp_path / "probe.py").write_text(source)
    script = (
        "import sys\n"
        + before
        + f"sys.path[:0] = [{str(Path(__file__).parent.parent)!r}, {str(tmp_path)!r}]\n"
        "from kernelbot.harness import audit\n"
        f"audit.install([{str(tmp_path)!r}])\n"
        "import probe\n" + then
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_torchs_own_frame_reads_still_pass_for_a_compiled_candidate(tmp_path: Path) -> None:
    """The other side of FRAME_HANDERS: torch.compile with dynamic shapes reads frames through
    symbolic_shapes._get_user_frame on an untrusted caller's behalf, called by torch's own code, which still
    decides (allowed); the count shows the helper did run."""
    said = _under_the_hook(
        tmp_path,
        "import torch\n"
        "def run():\n"
        "    m = torch.compile(lambda x: torch.relu(x).sum(0), dynamic=True)\n"
        "    return float(m(torch.ones(8, 4)).sum()), float(m(torch.ones(5, 4)).sum())\n",
        "print(*probe.run(), audit.refusal(), len(calls) > 0)\n",
        before="import torch.fx.experimental.symbolic_shapes as s\n"
        "calls = []\n"
        "real = s.ShapeEnv._get_user_frame\n"
        "s.ShapeEnv._get_user_frame = lambda *a: calls.append(1) or real(*a)\n",
    )
    assert said == ["32.0", "20.0", "None", "True"], said


def test_a_frame_evaluation_callback_is_cleared_and_refused(tmp_path: Path) -> None:
    """Found while mending round 31: a PEP 523 callback set through torch._C._dynamo.eval_frame runs at the entry
    of every Python frame the worker evaluates after, the sealed server's and the refresh's included; this one
    computed each set's product at the refresh's end (Timer.sync), 5.4x eager on the separate timings. worker.main
    clears it by a C call right after each call of the subject, before any frame of the harness's is entered,
    and rejects; the sealed check holds it as well. The static check names the setters."""
    found = {f.message for f in scan((TRUST / "eval_frame_refresh.py").read_text())}
    assert any("set_eval_frame" in m for m in found), found
    ev = _attack("eval_frame_refresh", tmp_path)
    assert ev.status == "rejected" and "frame-evaluation callback" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_an_audit_hook_of_the_subjects_own_is_refused_even_through_a_trampoline(tmp_path: Path) -> None:
    """Attacker round 33 (reward 3 with the static check on, 3.5x eager, 7.4x compile side by side): an audit
    hook of the candidate's, added by handing sys.addaudithook to torch's tree_map (the innermost caller the
    harness's hook judged was torch's), computed each pending product at the sealed copy's mmap event, after
    the clock. sys.addaudithook is refused whoever calls it now, and the other events that install callbacks
    or hand out objects (audit._STRICT) are judged by every frame on the stack, not the innermost caller."""
    ev = _attack("late_audit_hook", tmp_path)
    assert ev.status == "rejected" and "sys.addaudithook" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_strict_event_through_a_trampoline_is_refused(tmp_path: Path) -> None:
    """gc.get_referrers handed to torch's tree_map: torch's frame is the innermost caller, the candidate's is
    below it; judged by every frame, it is refused (it hands out every object that refers to one)."""
    said = _under_the_hook(
        tmp_path,
        "import gc, torch.utils._pytree as p\n"
        "def run():\n"
        "    try:\n"
        "        p.tree_map(gc.get_referrers, [run])\n"
        "    except PermissionError as exc:\n"
        "        return 'refused' if 'gc.get_referrers' in str(exc) else str(exc)\n"
        "    return 'allowed'\n",
        "print(probe.run(), audit.refusal())\n",
    )
    assert said[0] == "refused" and said[1].startswith("gc.get_referrers"), said


def test_a_warning_filter_of_the_candidates_does_no_work_in_the_refresh(tmp_path: Path) -> None:
    """Attacker round 34 (reward 3 with the static check on, 6.0x eager, 13x compile side by side): every input's
    storage flagged to warn on a write (torch._C._set_warn_deprecated_on_mutable_data_ptr) and torch's
    warn-always on, so each write of the refresh raised a warning; an object of the candidate's first in
    warnings.filters had its .match() called there, and computed each refreshed set's product. The sealed
    check now holds the warnings module (its functions as at build, its filters plain entries, sys's streams)."""
    ev = _attack("warn_filter_match", tmp_path)
    assert ev.status == "rejected" and "warnings.filters" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_warning_in_the_sealed_window_runs_nothing_of_the_subjects(tmp_path: Path) -> None:
    """Round 34's route with the filters left plain: the warning's formatter reads the harness file's source
    through linecache, where the candidate planted lines of its own. While the sealed server serves, a filter
    of the harness's ignores every warning before Python formats it; the registry the warning leaves in the
    harness's module is what the next check then refuses."""
    ev = _attack("warn_linecache", tmp_path)
    assert ev.status == "rejected" and "__warningregistry__" in ev.reason, ev
    assert reward(ev, None, None) == -1


def test_a_kernel_of_an_operator_called_inside_the_refreshs_kernels_is_refused(tmp_path: Path) -> None:
    """Attacker round 35 (reward 3 with the static check on, 7.3x eager, 17x compile side by side): a CPU kernel
    of the candidate's for aten::uniform_, which torch.rand's kernel calls inside the refresh; handed the
    refresh's generator, it replayed the refresh and computed every set's product. Only the operators the
    refresh calls were held; now those their kernels call too, every overload (guards.NESTED_OPS). Its
    Library(**{"ns": "aten", ...}) passed the static check; a spread namespace is now one computed at run time."""
    found = {f.message for f in scan((TRUST / "uniform_kernel.py").read_text())}
    assert any("namespace computed at run time" in m for m in found), found
    ev = _attack("uniform_kernel", tmp_path)
    assert ev.status == "rejected" and "uniform_" in ev.reason, ev
    assert reward(ev, None, None) == -1


@pytest.mark.parametrize("listed", [True, False], ids=["imported-first", "imported-by-the-candidate"])
def test_a_library_that_adds_its_own_audit_hook_is_imported_before_ours(tmp_path: Path, listed: bool) -> None:
    """Seen on an H100 image: its filelock adds an audit hook when imported, and torch.compile imports it at the
    first compile, under the candidate's call, where a hook added is refused (round 33): every honest compiled
    candidate was rejected. Such libraries (audit.HOOKING_LIBRARIES) are imported before the hook goes in."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "hooklib.py").write_text("import sys\nsys.addaudithook(lambda event, args: None)\n")
    said = _under_the_hook(
        tmp_path,
        "def run():\n    import hooklib\n    return 'imported'\n",
        "print(probe.run(), audit.refusal())\n",
        before=f"sys.path.insert(0, {str(lib)!r})\n"
        + ("import kernelbot.harness.audit as a; a.HOOKING_LIBRARIES = ('hooklib',)\n" if listed else ""),
    )
    assert said == (
        ["imported", "None"] if listed else ["imported", "sys.addaudithook()", "from", "the", "subject"]
    )


SORTED_BY_AN_OBJECT = SORTED.replace(
    "def get_inputs():\n    return [torch.sort(torch.randint(0, 1000, (4096,))).values]",
    "class _Maker:\n    def values(self):\n        return torch.sort(torch.randint(0, 1000, (4096,))).values\n\n\n"
    "MAKER = _Maker()\n\n\ndef get_inputs():\n    return [MAKER.values()]",
)


def test_inputs_drawn_afresh_are_drawn_on_the_subjects_thread(tmp_path: Path) -> None:
    """For an operator whose inputs the judge draws afresh each sample (reordering them changes no output), the
    refresh runs the operator's factory, whose seeding looks up names no check watches (torch.cuda's): a hook
    the candidate set there ran on the worker's main thread after the sealed check (the route round 45 took
    with a forged flag). The draw is a job on the subject's thread now, checked like any other before main
    reads its tensors. The hook hangs on an object the operator's factory calls (no check holds one); the
    candidate answers wrongly unless its hook has run, and only off the main thread."""
    (tmp_path / "op.py").write_text(SORTED_BY_AN_OBJECT)
    job = {**MATMUL, "root": str(tmp_path), "file": "op.py"}
    settings = replace(SETTINGS, min_samples=10, max_samples=10, time_budget_s=10.0)
    operator = evaluate(job, "operator", settings)
    assert operator.timing is not None and "afresh" in (operator.timing.sample_note or ""), operator
    ev = evaluate(
        job, "candidate", settings, candidate=str(TRUST / "fresh_draw_thread.py"), static_check=False
    )
    # before: `incorrect` (its hook ran on main in every refresh)
    assert ev.ok, (ev.status, ev.reason)


def test_a_hook_in_what_the_factory_runs_is_refused(tmp_path: Path) -> None:
    """Attacker round 48 (reward 3 with the static check on: 2.7x eager, 4.7x compile side by side): a hook at
    torch.cuda.is_available ran in every draw of inputs afresh, read the seed and sorted the sample's inputs
    there, inside the slack of the judge's charge on the refresh. Refused by the static check (getattr with a
    constant name is an attribute) and, with it off, by the sealed check (the factory's modules watched)."""
    (tmp_path / "op.py").write_text(SORTED)
    job = {**MATMUL, "root": str(tmp_path), "file": "op.py"}
    settings = replace(SETTINGS, min_samples=10, max_samples=10, time_budget_s=10.0)
    static = evaluate(job, "candidate", settings, candidate=str(TRUST / "draw_ahead.py"))
    assert static.status == "rejected" and "assigns torch.cuda.is_available" in (static.reason or ""), static
    if DEVICE == "cuda":  # its precomputed answers are CPU tensors: on CUDA it crashes on its own (H100 run)
        return
    ev = evaluate(job, "candidate", settings, candidate=str(TRUST / "draw_ahead.py"), static_check=False)
    assert ev.status == "rejected" and "torch.cuda.is_available was replaced" in (ev.reason or ""), ev


SORTINT = (
    "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
    "        return torch.sort(x).values\n\n\ndef get_inputs():\n    return [torch.randint(0, 1 << 20, (8192,))]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)


def test_what_runs_after_a_draw_learns_nothing_of_its_seed(tmp_path: Path) -> None:
    """Attacker round 49 (reward 3 with the static check on, 1.20x eager and 1.40x compile side by side): a
    finalizer of the candidate's ran in the collection that ends each job on the subject's thread, read the
    draw's seed from torch.initial_seed() and sorted the next sample's first sets ahead. The draw runs with the
    collector off and ends by seeding afresh; this copy answers wrongly from its precomputed answers."""
    (tmp_path / "op.py").write_text(SORTINT)
    job = {**MATMUL, "root": str(tmp_path), "file": "op.py"}
    settings = replace(SETTINGS, min_samples=20, max_samples=20, time_budget_s=10.0)
    operator = evaluate(job, "operator", settings)
    assert operator.timing is not None and "afresh" in (operator.timing.sample_note or ""), operator
    source = (TRUST / "draw_collect.py").read_text().replace("PROBE = 0", "PROBE = 1")
    (tmp_path / "cand.py").write_text(source)
    ev = evaluate(job, "candidate", settings, candidate=str(tmp_path / "cand.py"), static_check=False)
    # before: `incorrect` ("outputs of the timed calls are wrong": its precomputed answers reached them)
    assert ev.ok, (ev.status, ev.reason)


def test_seeding_a_draw_formats_no_stack(tmp_path: Path) -> None:
    """Attacker round 50 (reward 3 with the static check on, 1.26x eager and 1.48x compile side by side): a
    line of torch/random.py in linecache's cache, with a list of the candidate's class, ran in every seeding of
    a draw (torch.manual_seed formats a stack where CUDA has not started) and sorted the next sample's inputs
    ahead. The generators are seeded directly; this copy answers wrongly from its precomputed answers."""
    (tmp_path / "op.py").write_text(SORTINT)
    job = {**MATMUL, "root": str(tmp_path), "file": "op.py"}
    settings = replace(SETTINGS, min_samples=20, max_samples=20, time_budget_s=10.0)
    source = (TRUST / "lines_hook.py").read_text().replace("PROBE = 0", "PROBE = 1")
    (tmp_path / "cand.py").write_text(source)
    ev = evaluate(job, "candidate", settings, candidate=str(tmp_path / "cand.py"), static_check=False)
    # before: `incorrect` ("outputs of the timed calls are wrong": its precomputed answers reached them)
    assert ev.ok, (ev.status, ev.reason)


NCU = """#!/bin/sh
# Nsight Compute's stand-in: skips its options and runs the program, as ncu does, with the caller's environment.
while [ $# -gt 0 ]; do
  case "$1" in
    --launch-skip|--launch-count|--metrics) shift 2;;
    --*) shift;;
    *) break;;
  esac
done
exec "$@"
"""


def test_the_llm_agents_nsight_compute_run_is_sandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacker round 55: the `profile` tool's Nsight Compute pass ran the operator (PR code, never statically
    checked) and the candidate on the host, with the parent's whole environment: an operator that behaves in
    the sandbox wrote GITHUB_TOKEN and .git/config out and left a daemon. It runs in the OS sandbox now."""
    from kernelbot.agents.base import Task
    from kernelbot.agents.tools import Toolbox
    from kernelbot.config import PrecisionPolicy
    from kernelbot.spec import OperatorSpec

    outside, repo = tmp_path / "outside.txt", tmp_path / "repo"
    (repo / "ops").mkdir(parents=True)
    (repo / "ops" / "op.py").write_text(
        "import os, sys\n"
        f"seen = sorted(k for k in {sorted(SECRETS)!r} if k in os.environ)\n"
        "try:\n"
        f"    open({str(outside)!r}, 'w').write(repr(dict(os.environ)))\n"
        "    wrote = True\n"
        "except OSError:\n"
        "    wrote = False\n"
        "print(f'operator ran: secrets seen {seen}, wrote {wrote}', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    tool = tmp_path / "nsight"
    tool.mkdir()
    (tool / "ncu").write_text(NCU)
    (tool / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool}:{os.environ['PATH']}")
    spec = OperatorSpec(name="ops/op", kind="kernelbench", path="ops/op.py")
    settings = replace(SETTINGS, cache_dir=tmp_path / "cache")
    task = Task(spec=spec, root=repo, device="cuda", source="", policy=PrecisionPolicy(), settings=settings)
    toolbox = Toolbox(task, spec.job(repo, "cpu"), settings, tmp_path / "work", eager_ms=1.0, compiled=None)
    toolbox.call("write_candidate", {"source": (HONEST / "matmul_plain.py").read_text()})
    assert toolbox.current is not None
    said = toolbox._ncu_summary(toolbox.current)
    assert said is not None and "operator ran: secrets seen []" in said, said
    assert not outside.exists()  # its write (if any) went to the sandbox's private /tmp
    assert not any(value in said for value in SECRETS.values())


def test_the_tracers_answer_is_read_only_from_a_plain_file(tmp_path: Path) -> None:
    """Attacker round 55's reading: the operator's trace (PR code) writes its answer into a folder it owns; a
    link there to a file of the runner's was followed by the parent, and a FIFO would have hung it."""
    from kernelbot.analysis.analyze import _read_answer

    secret, answer = tmp_path / "runner.json", tmp_path / "out.json"
    secret.write_text('{"ok": true, "facts": {"token": "ghs_x"}}')
    answer.symlink_to(secret)
    with pytest.raises(OSError):
        _read_answer(answer)
    answer.unlink()
    os.mkfifo(answer)
    with pytest.raises(OSError, match="not a plain file"):
        _read_answer(answer)
    answer.unlink()
    answer.write_text('{"ok": true}')
    assert _read_answer(answer) == '{"ok": true}'
