"""`kernelbot ingest pytest-benchmark`: a real pytest-benchmark report, stored and reported like a kernel."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kernelbot import cli
from kernelbot.commands import ingest as ingest_command
from kernelbot.errors import UsageError
from kernelbot.history import History
from kernelbot.reports import ingest
from kernelbot.reports import weekly as report

BENCHMARKS = """
import pytest

@pytest.mark.parametrize("n", [10, 1000])
def test_sum(benchmark, n):
    benchmark(sum, range(n))

def test_sorted(benchmark):
    benchmark(sorted, list(range(200, 0, -1)))
"""


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A report written by the installed pytest-benchmark, run on a tiny suite in a fresh process."""
    work = tmp_path_factory.mktemp("bench")
    (work / "test_tiny.py").write_text(BENCHMARKS)
    out = work / "out.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "test_tiny.py",
           f"--benchmark-json={out}", "--benchmark-save-data", "--benchmark-min-rounds=5",
           "--benchmark-max-time=0.02", "--benchmark-disable-gc"]  # fmt: skip
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return str(request.getfixturevalue("postgres_url"))


def write(tmp_path: Path, data: Any, name: str = "bench.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_real_report_is_stored_with_stats_and_samples(
    real_report: dict[str, Any], url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, real_report)
    args = ["ingest", "pytest-benchmark", str(path), "--db", url, "--repository", "acme/cpu"]
    assert cli.main([*args, "--commit", "a" * 40]) == 0
    assert "stored 3 benchmarks of acme/cpu at aaaaaaaaaa as run 1" in capsys.readouterr().out
    store = History.open(url)
    run = store.get_run(1)
    assert run.trigger == "local" and run.head_sha == "a" * 40 and run.fingerprint is not None
    assert run.fingerprint.gpu == "cpu" and run.fingerprint.extra["source"] == "pytest-benchmark"
    names = sorted(op.name for op in run.operators)
    assert names == ["pytest:test_tiny.py::test_sorted", "pytest:test_tiny.py::test_sum[1000]",
                     "pytest:test_tiny.py::test_sum[10]"]  # fmt: skip
    by_name = {b["fullname"]: b["stats"] for b in real_report["benchmarks"]}
    for op in run.operators:
        stats, [m] = by_name[op.name.removeprefix(ingest.PREFIX)], op.measurements
        assert m.median_ms == pytest.approx(stats["median"] * 1e3) and m.std_ms == pytest.approx(
            stats["stddev"] * 1e3
        )
        assert m.samples == stats["rounds"] and m.calls_per_sample == stats["iterations"]
        assert len(m.raw_ms) == len(stats["data"]) == stats["rounds"]  # every round, kept exactly
        assert m.raw_ms[0] == pytest.approx(stats["data"][0] * 1e3)

    # A few more commits of the same suite (times shifted) chart like any kernel, on their own fingerprint.
    started = datetime.fromisoformat(real_report["datetime"])
    for i in range(1, 7):
        later = copy.deepcopy(real_report)
        later["datetime"] = (started + timedelta(days=i)).isoformat()
        ingest_command.ingest_file(
            write(tmp_path, later, f"b{i}.json"), url, commit=f"{i:040x}", repository="acme/cpu"
        )
    since = datetime.combine((started + timedelta(days=1)).date(), datetime.min.time(), tzinfo=started.tzinfo)
    built = report.build(store, since, weeks=2)
    store.close()
    [section] = built.sections
    assert section.repository == "acme/cpu" and section.label.startswith("cpu")
    assert [(s.operator, len(s.values), s.steps) for s in section.series] == [
        (name, 7, []) for name in names
    ]  # no change was planted: identical times
    assert "`pytest:test_tiny.py::test_sorted`" in report.markdown(built)


def test_unknown_version_is_refused_by_name(real_report: dict[str, Any], tmp_path: Path) -> None:
    data = dict(real_report, version="9.0.1")
    with pytest.raises(
        UsageError,
        match=r"written by pytest-benchmark 9\.0\.1; kernelbot reads reports of versions 3\.x, 4\.x, 5\.x",
    ):
        ingest.parse(data, "bench.json")
    del data["version"]
    with pytest.raises(UsageError, match="no version field"):
        ingest.parse(data, "bench.json")


def test_missing_fields_are_named_and_the_rest_stored(real_report: dict[str, Any]) -> None:
    data = copy.deepcopy(real_report)
    del data["benchmarks"][0]["stats"]
    del data["benchmarks"][1]["stats"]["data"]
    for key in ("machine_info", "commit_info", "datetime"):
        del data[key]
    parsed = ingest.parse(data, "bench.json", repository="acme/cpu")
    first = real_report["benchmarks"][0]["fullname"]
    assert parsed.skipped == [f"{first}: no stats.median"]
    assert [len(op.measurements[0].raw_ms) for op in parsed.run.operators] == [
        0,
        real_report["benchmarks"][2]["stats"]["rounds"],
    ]
    assert parsed.run.head_sha is None  # no commit: stored, but never charted as a default-branch commit
    assert any("no commit" in w for w in parsed.warnings) and any(
        "no machine_info" in w for w in parsed.warnings
    )
    assert any("'datetime'" in w for w in parsed.warnings)

    for b in data["benchmarks"]:
        b.pop("stats", None)
    with pytest.raises(UsageError, match=r"holds no usable benchmark .*no stats\.median"):
        ingest.parse(data, "bench.json")


def test_dirty_tree_is_not_a_commit(real_report: dict[str, Any]) -> None:
    data = copy.deepcopy(real_report)
    data["commit_info"] = {"id": "c" * 40, "dirty": True, "project": "tiny"}
    parsed = ingest.parse(data, "bench.json")
    assert parsed.run.head_sha is None and parsed.run.repository == "tiny" and "dirty" in parsed.warnings[0]
    assert ingest.parse(data, "bench.json", commit="d" * 40).run.head_sha == "d" * 40


def test_not_a_report_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    for text, message in (
        ("{not json", "is not JSON"),
        ('{"results": []}', "has no 'benchmarks': not a pytest-benchmark report"),
    ):
        path = tmp_path / "x.json"
        path.write_text(text)
        assert cli.main(["ingest", "pytest-benchmark", str(path), "--db", db]) == 2
        assert message in capsys.readouterr().err
    assert cli.main(["ingest", "pytest-benchmark", str(tmp_path / "missing.json"), "--db", db]) == 2
    assert "cannot read" in capsys.readouterr().err
