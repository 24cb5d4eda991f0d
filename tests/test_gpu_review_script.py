"""benchmarks/gpu_review.py on the CPU (tiny sizes): it runs, writes every scenario, and A/A stays quiet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_review.py"


@pytest.mark.slow  # ~50 s on a 2-core box: 8 sandboxes, 18 verdict trials, one kernelbot review
def test_cpu_quick_run_writes_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--trials", "3", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "review_results.json").read_text())
    md = (out / "review_results.md").read_text()

    by_name = {s["name"]: s for s in data["scenarios"]}
    expected = {f"{size} {kind}" for size in ("small", "large") for kind in ("A/A", "+3%", "+5%")}
    assert set(by_name) == expected, data["skipped"]
    for s in by_name.values():
        assert s["error"] is None and s["trials"] == 3
        assert sum(s["counts"].values()) == 3
        assert all(
            t["verdict"] in ("regression", "no_change", "improvement", "ambiguous")
            for t in s["trial_results"]
        )
        assert s["realised"] is not None and s["median_p"] is not None
    for size in ("small", "large"):
        aa = by_name[f"{size} A/A"]
        quiet = sum(t["verdict"] not in ("regression", "improvement") for t in aa["trial_results"])
        assert quiet >= 2, aa["trial_results"]
        assert aa["false_alarm_rate"] is not None and by_name[f"{size} +5%"]["detection_rate"] is not None
        assert by_name[f"{size} +3%"]["head_shape"][1] > by_name[f"{size} A/A"]["head_shape"][1]

    e2e = data["e2e"]
    assert e2e is not None and e2e["exit_code"] == 0, e2e
    got = {o["name"]: o for o in e2e["operators"]}
    assert set(got) == {"ops/slowed", "ops/sped_up", "ops/edited", "ops/removed", "ops/added"}
    assert got["ops/removed"]["ok"] and got["ops/added"]["ok"]  # structural, not timing-dependent
    assert got["ops/slowed"]["got"] in ("regression", "ambiguous")  # 2x slower; CPU noise may leave it open

    assert "| size | scenario |" in md and "End to end" in md
    stdout = proc.stdout
    assert stdout.rfind("planted +5%") > max(stdout.rfind("wrote "), stdout.rfind("ops/added"))  # table last
