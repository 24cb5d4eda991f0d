"""`kernelbot check`: exit codes, JSON fields, table, and each status on the CPU."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main
from kernelbot.config import load_config
from kernelbot.errors import KernelbotError
from tests.ops import LINEAR_RELU, LINEAR_RELU_HONEST, LINEAR_RELU_WRONG, write_repo


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELBOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return write_repo(
        tmp_path,
        {"ops/lin.py": LINEAR_RELU, "cand/good.py": LINEAR_RELU_HONEST, "cand/bad.py": LINEAR_RELU_WRONG},
    )


def run_json(args: list[str], tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = main([*args, "--json", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_operator_alone_is_checked_and_timed(repo: Path) -> None:
    code, data = run_json(["check", "ops/lin.py", "--device", "cpu", "--no-compile"], repo)
    assert code == 0
    assert data["operator"] == "ops/lin"
    assert data["device"]["device"] == "cpu" and data["device"]["torch"]
    timing = data["reference"]["timing"]
    assert timing["samples"] >= 10
    assert timing["ci95_ms"][0] <= timing["median_ms"] <= timing["ci95_ms"][1]
    assert "candidate" not in data


def test_honest_candidate_passes_with_reward_at_least_one(repo: Path) -> None:
    code, data = run_json(
        ["check", "ops/lin.py", "--candidate", "cand/good.py", "--device", "cpu", "--no-compile"], repo
    )
    cand = data["candidate"]
    assert code == 0
    assert cand["status"] == "ok"
    assert cand["reward"] in (1, 2)  # no compile baseline: level 3 is out of reach
    assert cand["speedup_vs_eager"] > 0
    assert cand["speedup_vs_compile"] is None
    assert set(cand["timing"]) >= {"median_ms", "mean_ms", "std_ms", "samples", "ci95_ms"}


def test_a_check_reward_comes_from_timing_side_by_side(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unchanged copy of the operator against an eager timing taken at a slow moment (here: made 3x
    slower than measured) claims reward 2; timed in the same rounds as a live eager it keeps 1. (An attacker
    helper saw an identical candidate get reward 2 from `check`'s separate timings alone.)"""
    import kernelbot.pipeline.check as check_module

    real = check_module.evaluate

    def slow_moment(job: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
        ev = real(job, subject, *args, **kwargs)
        if subject == "operator" and ev.timing is not None:
            ev.timing.median_ms *= 3
        return ev

    monkeypatch.setattr(check_module, "evaluate", slow_moment)
    (repo / "cand" / "copy.py").write_text(LINEAR_RELU.replace("class Model(", "class ModelNew("))
    args = ["check", "ops/lin.py", "--candidate", "cand/copy.py", "--device", "cpu", "--no-compile"]
    code, data = run_json(args, repo)
    cand = data["candidate"]
    assert code == 0 and cand["claimed_reward"] == 2 and cand["reward"] == 1, cand
    evidence = cand["side_by_side"]
    assert evidence is not None and evidence["rounds"] >= 8, cand
    # Not near 1 on this CPU: a known bias against candidates, not yet explained. An unchanged copy of this
    # 16 us operator timed 0.67-0.90x eager side by side (CI and this machine, 2026-12-08), and the copy's
    # own clock, not the judge's bound, read its calls slower (docs/measurement.md, "Known limit").
    assert 0.5 < cand["speedup_vs_eager"] == evidence["speedup_vs_eager"] < 1.25, evidence
    assert "timed side by side in" in capsys.readouterr().err
    from kernelbot.pipeline.results import CheckReport

    rebuilt = CheckReport.from_json(data)  # as stored: the claim, the confirmed reward and the evidence
    assert (rebuilt.claimed_reward, rebuilt.reward, rebuilt.side_by_side) == (2, 1, evidence)


def test_wrong_candidate_exits_one_and_says_where(repo: Path) -> None:
    code, data = run_json(
        ["check", "ops/lin.py", "--candidate", "cand/bad.py", "--device", "cpu", "--no-compile"], repo
    )
    cand = data["candidate"]
    assert code == 1
    assert cand["status"] == "incorrect"
    assert cand["reward"] == -1
    assert "outside atol=0.0001" in cand["reason"] and "first at" in cand["reason"]
    assert cand["max_abs_err"] > 1e-4


def test_missing_candidate_file_is_a_usage_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "ops/lin.py", "--candidate", "nope.py", "--device", "cpu"]) == 2
    assert "nope.py: no such candidate file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("import torch\nclass Model2(torch.nn.Module):\n    pass\n", "defines no ModelNew at top level"),
        ("import torch\nclass ModelNew(torch.nn.Module:\n", ":2: "),  # a syntax error, with its line
    ],
)
def test_a_candidate_that_cannot_load_is_refused_before_any_timing(
    repo: Path, capsys: pytest.CaptureFixture[str], source: str, said: str
) -> None:
    """A newcomer's find: a candidate without ModelNew was reported after the operator had been timed (17 s)."""
    bad = repo / "bad.py"
    bad.write_text(source)
    started = time.monotonic()
    assert main(["check", "ops/lin.py", "--candidate", str(bad), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}" in err and said in err and "Traceback" not in err, err
    assert time.monotonic() - started < 10  # no sandbox, no baseline was started


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "import torch\nraise RuntimeError('boom')\nclass Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n",
            "RuntimeError: boom",
        ),
        (
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return 3\ndef get_inputs(): return [torch.randn(4)]\ndef get_init_inputs(): return []\n",
            "not a torch.Tensor",
        ),
        (
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x.sum() * 0\ndef get_inputs(): return [torch.randn(4)]\ndef get_init_inputs(): return []\n",
            "does not depend on its inputs",
        ),
        (
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x.relu().to_sparse_csr()\ndef get_inputs(): return [torch.randn(8, 8)]\ndef get_init_inputs(): return []\n",
            "the reference returned a torch.sparse_csr tensor: outputs are compared as dense tensors, so return .to_dense()",
        ),
        (
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x * 2\ndef get_inputs(): return torch.randn(8, 4)\ndef get_init_inputs(): return []\n",
            "get_inputs() returned a Tensor, not a list: return a list of the forward's arguments",
        ),
    ],
    ids=["unimportable", "non-tensor-output", "degenerate", "sparse-output", "bare-tensor-inputs"],
)
def test_broken_operator_is_a_config_error(
    repo: Path, source: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "ops" / "broken.py").write_text(source)
    assert main(["check", "ops/broken.py", "--device", "cpu", "--no-compile"]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") <= 30  # one error line after the progress lines, no traceback
    assert "Traceback" not in err


def test_not_kernelbench_form_names_the_fix(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "ops" / "half.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    assert main(["check", "ops/half.py", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "it lacks get_inputs(), get_init_inputs() at top level" in err, err  # what is missing, by name
    assert "defines class Model(nn.Module), get_inputs() and get_init_inputs()" in err
    (repo / "ops" / "half.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n"
    )
    assert main(["check", "ops/half.py", "--device", "cpu"]) == 2
    assert "it lacks get_init_inputs() at top level" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text("import torch\nclass Model(torch.nn.Module:\n    pass\n"), "x.py:2: "),
        (lambda p: p.write_bytes(b"\xfe\xff\x00torch"), "x.py: not UTF-8 text (byte 0)"),
        (lambda p: p.mkdir(), "x.py: is a directory, not a file"),
        (lambda p: p.write_bytes(b"\x00\x01\x02"), "x.py: source code string cannot contain null bytes"),
    ],
    ids=["syntax-error", "binary", "directory", "null-bytes"],
)
def test_a_file_that_is_no_python_source_is_one_line(
    repo: Path, make: Any, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make(repo / "ops" / "x.py")
    assert main(["check", "ops/x.py", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kernelbot: error: ops/{message}") and "\n" not in err and "Traceback" not in err


def test_config_error_is_one_line_with_file_and_key(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".github" / "kernelbot.yml").write_text("harness:\n  time_budgt_s: 1\n")
    assert main(["check", "ops/lin.py", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "kernelbot: error: .github/kernelbot.yml: unknown key 'harness.time_budgt_s': did you mean 'time_budget_s'?"
    )


def test_every_bad_config_key_is_named_in_the_one_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".github" / "kernelbot.yml").write_text("harness:\n  time_budgt_s: 1\n  seeds: many\nagnet: {}\n")
    assert main(["check", "ops/lin.py", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("kernelbot: error: .github/kernelbot.yml: ")
    assert err.count("; also ") == 2 and err.count("fix the value") <= 1
    assert "unknown key 'harness.time_budgt_s': did you mean 'time_budget_s'?" in err
    assert "key 'harness.seeds': Input should be a valid integer" in err
    assert "unknown key 'agnet': did you mean 'agent'?" in err


@pytest.mark.slow
def test_compile_baseline_is_measured_once_then_cached(repo: Path) -> None:
    code, first = run_json(["check", "ops/lin.py", "--candidate", "cand/good.py", "--device", "cpu"], repo)
    assert code == 0 and first["baselines"]["compile"]["status"] == "ok"
    assert first["baselines"]["compile"]["cached"] is False
    assert first["candidate"]["speedup_vs_compile"] is not None
    code, second = run_json(["check", "ops/lin.py", "--device", "cpu"], repo)
    assert second["baselines"]["compile"]["cached"] is True
    assert second["baselines"]["compile"]["timing"] == first["baselines"]["compile"]["timing"]


def _run(ms: float | None, status: str = "ok", subject: str = "compile") -> Any:
    from kernelbot.harness.results import Evaluation, Timing

    timing = Timing.from_samples([ms, ms * 1.01] * 5, 1, "rse") if ms is not None else None
    return Evaluation(subject, status, timing=timing)


def test_the_compile_baseline_is_the_fastest_of_its_runs_and_a_failed_run_decides() -> None:
    from kernelbot.pipeline.check import fastest

    slow, quick = _run(0.22), _run(0.085)
    assert fastest([slow, quick]) is quick and fastest([quick, slow]) is quick
    assert quick.timing is not None and quick.timing.other_runs_ms == [pytest.approx(0.22, rel=0.01)]
    broken = _run(None, "crashed")
    assert fastest([quick, broken]) is broken  # a baseline that failed once is reported, not hidden


@pytest.mark.parametrize(
    ("draws", "kept", "runs"), [([0.22, 0.085], 0.085, 2), ([None, 0.085], None, 1)], ids=["faster", "failed"]
)
def test_check_operator_times_the_compile_baseline_in_several_sandboxes_and_caches_the_fastest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, draws: list[float | None], kept: float | None, runs: int
) -> None:
    import kernelbot.pipeline.check as check
    from kernelbot.config import load_config
    from kernelbot.fingerprint import collect
    from kernelbot.spec import kernelbench_spec

    repo = write_repo(tmp_path / "repo", {"ops/linear_relu.py": LINEAR_RELU})
    monkeypatch.setenv("KERNELBOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(check.COMPILE_RUNS, "cpu", 2)
    compile_draws = iter(draws)
    subjects: list[str] = []

    def fake_evaluate(job: dict, subject: str, settings: Any, **_: Any) -> Any:
        subjects.append(subject)
        if subject == "compile":
            ms = next(compile_draws)
            return _run(ms, "ok" if ms is not None else "crashed")
        return _run(0.1, subject=subject)

    monkeypatch.setattr(check, "evaluate", fake_evaluate)
    spec, config = kernelbench_spec("ops/linear_relu.py"), load_config(repo)
    report = check.check_operator(spec, repo, config, collect("cpu"))
    assert subjects.count("compile") == runs
    assert report.compiled is not None
    assert (report.compiled.timing.median_ms if report.compiled.timing else None) == pytest.approx(
        kept, rel=0.01
    )
    cached = check.check_operator(spec, repo, config, collect("cpu"))  # the kept one is what the cache holds
    assert subjects.count("compile") == runs and cached.compiled is not None
    assert cached.compiled.status == report.compiled.status
    if kept is not None:  # the discarded draw is on record, in the cache too
        assert cached.compiled.timing is not None
        assert cached.compiled.timing.other_runs_ms == [pytest.approx(0.22, rel=0.01)]


def test_a_cached_baseline_of_another_timing_protocol_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelbot.harness import results
    from kernelbot.pipeline import baselines

    baselines.store(tmp_path, "spec", _run(0.1))
    assert baselines.load(tmp_path, "spec", "compile") is not None
    monkeypatch.setattr(results, "TIMING_PROTOCOL", results.TIMING_PROTOCOL + 1)
    assert baselines.load(tmp_path, "spec", "compile") is None  # timed another way: not this baseline


def test_an_operator_timed_past_its_gpu_time_is_one_line_that_names_the_likely_cause(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a shared GPU the operator's own samples trip the hidden-work check (run 6's warm stage: 19 of 42):
    the error says so and what to do, where the anti-hack wording alone reads like an accusation."""
    import kernelbot.pipeline.check as check
    from kernelbot.harness.protocol import HIDDEN_WORK
    from kernelbot.harness.results import Evaluation

    reasons = {
        "hidden": f"anti-hack check: in 9 of 10 samples {HIDDEN_WORK} (work on another stream or thread)",
        "other": "anti-hack check: torch.cuda.synchronize was replaced",
    }
    for kind, reason in reasons.items():
        monkeypatch.setattr(
            check, "evaluate", lambda *a, r=reason, **k: Evaluation("operator", "rejected", r)
        )
        assert main(["check", "ops/lin.py", "--device", "cpu", "--no-compile"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress line: the error, one line
        assert err.startswith(
            "kernelbot: error: ops/lin.py: the operator itself failed (rejected): anti-hack"
        )
        assert ("give kernelbot one of its own (CUDA_VISIBLE_DEVICES)" in err) == (kind == "hidden"), err


def test_an_operator_that_keeps_state_between_calls_is_told_to_be_a_pure_function(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A forward that counts its calls in a buffer is wrong against itself (the judge's reference has been
    called fewer times): the one line says what makes an operator differ from itself, not only the numbers."""
    (repo / "ops" / "counter.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        '        self.register_buffer("calls", torch.zeros(()))\n\n    def forward(self, x):\n'
        "        self.calls.add_(1)\n        return x * self.calls\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 64)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    assert main(["check", "ops/counter.py", "--device", "cpu", "--no-compile"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("kernelbot: error: ops/counter.py: the operator itself failed (incorrect)"), err
    assert "make forward a pure function of its inputs" in err and "call counter" in err, err


def test_the_compile_baseline_gets_a_third_of_the_time_left_and_no_second_run_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A time-bounded run keeps two thirds of what is left after eager for the candidates (seen on the H200:
    two compile runs used 40-120 s of a 120 s --time). A timed-out baseline is not cached."""
    import time

    import kernelbot.pipeline.check as check
    from kernelbot.config import load_config
    from kernelbot.fingerprint import collect
    from kernelbot.harness.evaluate import OUT_OF_TIME
    from kernelbot.spec import kernelbench_spec

    repo = write_repo(tmp_path / "repo", {"ops/linear_relu.py": LINEAR_RELU})
    monkeypatch.setenv("KERNELBOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(check.COMPILE_RUNS, "cpu", 2)
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    deadlines: list[float | None] = []

    def fake_evaluate(job: dict, subject: str, settings: Any, **_: Any) -> Any:
        if subject != "compile":
            return _run(0.1, subject=subject)
        deadlines.append(settings.deadline)
        clock[0] += 25.0  # one compile run takes 25 s: the share (30 s of 90) has room for one
        return _run(0.085)

    monkeypatch.setattr(check, "evaluate", fake_evaluate)
    spec, config = kernelbench_spec("ops/linear_relu.py"), load_config(repo)
    report = check.check_operator(spec, repo, config, collect("cpu"), deadline=1090.0)
    assert deadlines == [pytest.approx(1030.0)]  # a second 25 s run would end past 1030: not started
    assert report.compiled is not None and report.compiled.ok
    # One run of the two stands for this run only: a run without a time limit makes both, and caches them.
    check.check_operator(spec, repo, config, collect("cpu"))
    assert deadlines == [pytest.approx(1030.0), None, None]
    check.check_operator(spec, repo, config, collect("cpu"))
    assert len(deadlines) == 3  # cached now

    def second_cut_short(job: dict, subject: str, settings: Any, **_: Any) -> Any:
        if subject != "compile":
            return _run(0.1, subject=subject)
        from kernelbot.harness.results import Evaluation

        deadlines.append(settings.deadline)
        return _run(0.085) if len(deadlines) % 2 == 1 else Evaluation("compile", "timeout", OUT_OF_TIME)

    monkeypatch.setattr(check, "evaluate", second_cut_short)
    monkeypatch.setenv("KERNELBOT_CACHE_DIR", str(tmp_path / "cache3"))
    deadlines.clear()
    report = check.check_operator(spec, repo, config, collect("cpu"), deadline=clock[0] + 600)
    assert len(deadlines) == 2 and report.compiled is not None and report.compiled.ok  # the first run stands

    def out_of_time(job: dict, subject: str, settings: Any, **_: Any) -> Any:
        if subject != "compile":
            return _run(0.1, subject=subject)
        from kernelbot.harness.results import Evaluation

        return Evaluation("compile", "timeout", OUT_OF_TIME)

    monkeypatch.setattr(check, "evaluate", out_of_time)
    monkeypatch.setenv("KERNELBOT_CACHE_DIR", str(tmp_path / "cache2"))
    report = check.check_operator(spec, repo, config, collect("cpu"), deadline=clock[0] + 60)
    assert report.compiled is not None and report.compiled.status == "timeout"
    again = check.check_operator(spec, repo, config, collect("cpu"))  # nothing cached: built again, unbounded
    assert again.compiled is not None and again.compiled.status == "timeout" and not again.compiled.cached


@pytest.mark.parametrize(("value", "ok"), [(0, True), (2, False), (16, True)])
def test_process_pairs_is_off_or_at_least_three(tmp_path: Path, value: int, ok: bool) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "kernelbot.yml").write_text(f"thresholds:\n  process_pairs: {value}\n")
    if ok:
        assert load_config(tmp_path).thresholds.process_pairs == value
    else:
        with pytest.raises(
            KernelbotError, match=r"kernelbot.yml: .*process_pairs must be 0 \(off\) or at least 3"
        ):
            load_config(tmp_path)


def test_noisy_timings_are_named_under_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's trial on a loaded runner: eager's 95% interval was 22.5-56.5 ms and the table printed 1.62x
    with no flag. A timing whose interval is wider than +-10% of its median is named under the table."""
    import types

    from rich.console import Console

    from kernelbot import console
    from kernelbot.commands.check import render

    def subject(median: float, low: float, high: float) -> types.SimpleNamespace:
        timing = types.SimpleNamespace(median_ms=median, ci95_ms=(low, high), samples=10)
        return types.SimpleNamespace(timing=timing, status="ok", max_abs_err=0.0, ok=True, cached=False)

    def shown(eager: types.SimpleNamespace) -> str:
        report = types.SimpleNamespace(
            reference=eager,
            eager=eager,
            compiled=subject(20.0, 19.5, 20.6),
            candidate=None,
            spec=types.SimpleNamespace(name="x2"),
            fingerprint=types.SimpleNamespace(device="cpu", gpu=None, cpu="cpu", torch="2"),
        )
        term = Console(width=200, record=True, color_system=None)
        monkeypatch.setattr(console, "err", term)
        render(report)  # type: ignore[arg-type]
        return " ".join(term.export_text().split())

    loaded = shown(subject(32.4, 22.5, 56.5))
    assert "noisy timings: operator (95% CI wider than ±10% of the median)" in loaded, loaded
    assert "noisy timings" not in shown(subject(32.4, 31.0, 33.9))
