"""`python -m benchmarks.sparse`: a problem that does not fit the device is skipped, and each problem's results
are on disk as soon as it is done (a device call cut short keeps them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks import sparse


def test_a_problem_out_of_memory_is_skipped_and_results_are_saved_as_they_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sparse.run_problem
    seen: list[str] = []

    def run(p: sparse.Problem, *args: object) -> list[sparse.Row]:
        seen.append(p.name)
        saved = json.loads((tmp_path / "results.json").read_text())["rows"] if len(seen) > 1 else []
        assert len({r["problem"] for r in saved}) == len(seen) - 1  # every earlier problem is on disk already
        if p.name == "banded/small/k4":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 24.00 GiB. GPU 0 has ...")
        return real(p, *args)

    monkeypatch.setattr(sparse, "run_problem", run)
    monkeypatch.setattr(sparse, "CLASSES", dict(list(sparse.CLASSES.items())[:2]))  # diagonal, banded
    assert sparse.main(["--quick", "--device", "cpu", "--out", str(tmp_path), "--widths", "1", "4",
                        "--budget-s", "0.01"]) == 0  # fmt: skip
    data = json.loads((tmp_path / "results.json").read_text())
    skipped = [r for r in data["rows"] if r["problem"] == "banded/small/k4"]
    assert [(r["status"], r["error"]) for r in skipped] == [
        ("error", "out of memory: CUDA out of memory. Tried to allocate 24.00 GiB")
    ]
    assert len(seen) == 8 and [s["problem"] for s in data["summary"]] == [
        n for n in seen if n != "banded/small/k4"
    ]
    assert "banded/small/k4 | torch (cuSPARSE) | error out of memory" in (tmp_path / "results.md").read_text()
