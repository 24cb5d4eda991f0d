"""Reading other tools' benchmark results into the history: pytest-benchmark JSON reports, as `local` runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelbot.errors import UsageError
from kernelbot.history import FingerprintRecord, MeasurementRecord, OperatorRecord, RunRecord

KNOWN_MAJORS = (3, 4, 5)  # pytest-benchmark versions whose JSON layout this reader knows
PREFIX = "pytest:"  # operator names of ingested benchmarks: "pytest:tests/test_x.py::test_sum[10]"
NOT_A_COMMIT = {"", "unversioned"}  # what pytest-benchmark writes outside a git work tree


@dataclass
class Parsed:
    """A report turned into one run, and what was left out of it."""

    run: RunRecord
    skipped: list[str] = field(default_factory=list)  # "fullname: why", benchmarks not stored
    warnings: list[str] = field(default_factory=list)  # what was stored with less than the file claims


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(
            f"{path} is not JSON ({err}): pass the file `pytest --benchmark-json=FILE` writes"
        ) from err
    if not isinstance(data, dict) or "benchmarks" not in data:
        raise UsageError(
            f"{path} has no 'benchmarks': not a pytest-benchmark report (pytest --benchmark-json=FILE)"
        )
    return data


def parse(
    data: dict[str, Any], source: str, *, commit: str | None = None, repository: str | None = None
) -> Parsed:
    """One `local` run with a `pytest:<fullname>` operator per benchmark; raises UsageError when nothing is usable."""
    version = str(data.get("version") or "")
    major = version.split(".")[0]
    if not major.isdigit() or int(major) not in KNOWN_MAJORS:
        known = ", ".join(f"{m}.x" for m in KNOWN_MAJORS)
        raise UsageError(
            f"{source} was written by pytest-benchmark {version or '(no version field)'}; kernelbot reads "
            f"reports of versions {known}: re-run the benchmarks with one of those, or upgrade kernelbot"
        )
    warnings: list[str] = []
    commit_info = _dict(data.get("commit_info"))
    sha = commit or str(commit_info.get("id") or "")
    if sha in NOT_A_COMMIT:
        sha = ""
        warnings.append("no commit in the report (pass --commit SHA): stored as uncommitted, so not charted")
    elif commit is None and commit_info.get("dirty"):
        warnings.append(
            f"measured on a dirty work tree at {sha[:10]}: stored as uncommitted (pass --commit to override)"
        )
        sha = ""
    machine = _dict(data.get("machine_info"))
    if not machine:
        warnings.append("no machine_info: every such report shares one fingerprint")
    started = _when(data.get("datetime"), warnings)

    operators, skipped = [], []
    for bench in data["benchmarks"] if isinstance(data["benchmarks"], list) else []:
        op, why = _operator(bench)
        if op is None:
            skipped.append(why)
        else:
            operators.append(op)
    if not operators:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        raise UsageError(f"{source} holds no usable benchmark{detail}: nothing was stored")
    run = RunRecord(
        repository=repository or str(commit_info.get("project") or "local"),
        trigger="local",
        head_sha=sha or None,
        runner=str(machine.get("node") or ""),
        started_at=started,
        finished_at=started,
        fingerprint=_fingerprint(machine),
        operators=operators,
    )
    return Parsed(run, skipped, warnings)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _when(value: Any, warnings: list[str]) -> datetime:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        warnings.append("no valid 'datetime' in the report: stored with the time of ingest")
        return datetime.now(UTC)
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _fingerprint(machine: dict[str, Any]) -> FingerprintRecord:
    cpu = _dict(machine.get("cpu"))
    python = " ".join(str(machine.get(k) or "") for k in ("python_implementation", "python_version")).strip()
    extra = {
        "source": "pytest-benchmark",
        "cpu": str(cpu.get("brand_raw") or machine.get("processor") or ""),
        "machine": str(machine.get("machine") or ""),
        "system": f"{machine.get('system') or ''} {machine.get('release') or ''}".strip(),
        "python": python,
    }
    return FingerprintRecord(gpu="cpu", extra=extra)


def _operator(bench: Any) -> tuple[OperatorRecord | None, str]:
    if not isinstance(bench, dict):
        return None, f"entry {bench!r:.40}: not a benchmark object"
    name = str(bench.get("fullname") or bench.get("name") or "")
    if not name:
        return None, "a benchmark without 'fullname' or 'name'"
    stats = bench.get("stats")
    if not isinstance(stats, dict) or not isinstance(stats.get("median"), int | float):
        return None, f"{name}: no stats.median"
    data: list[Any] = stats["data"] if isinstance(stats.get("data"), list) else []

    def ms(key: str) -> float | None:
        value = stats.get(key)
        return float(value) * 1e3 if isinstance(value, int | float) else None

    measurement = MeasurementRecord(
        side="head",
        status="ok",
        median_ms=ms("median"),
        mean_ms=ms("mean"),
        std_ms=ms("stddev"),
        samples=int(stats.get("rounds") or len(data)),
        calls_per_sample=int(stats.get("iterations") or 1),
        stopped_by="pytest-benchmark",
        raw_ms=[float(x) * 1e3 for x in data if isinstance(x, int | float)],
    )
    identity = json.dumps({"fullname": name, "params": bench.get("params")}, sort_keys=True, default=str)
    spec_hash = hashlib.sha256(identity.encode()).hexdigest()[:16]
    path = name.split("::")[0]
    return OperatorRecord(PREFIX + name, path, spec_hash, "unchanged", measurements=[measurement]), ""
