"""benchmarks/gpu_optimize.py's table: the shares, geometric means and levels behind the published H200 figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.gpu_optimize import POLICIES, best_of, level_of, main, summarize, targets

DEFAULT, IEEE, TF32 = POLICIES  # the table's three policies, strictest last but one


def cand(origin: str, precision: str, reward: int, vs_eager: float, vs_compile: float) -> dict[str, Any]:
    return {
        "origin": origin,
        "precision": precision,
        "status": "ok" if reward > 0 else "incorrect",
        "reward": reward,
        "speedup_vs_eager": vs_eager,
        "speedup_vs_compile": vs_compile,
        "median_ms": 1.0 / vs_eager if vs_eager else None,
        "max_abs_err": 0.0,
        "reason": "",
    }


def test_the_best_suggestion_respects_the_policy_and_the_reward() -> None:
    row = {
        "candidates": [
            cand("tf32-matmul", "tf32", 3, 3.0, 3.5),
            cand("tf32x3-matmul", "tf32x3", 3, 1.8, 2.0),
            cand("compile-max-autotune", "exact", 2, 1.2, 0.9),
            cand("cuda-graph-capture", "exact", 1, 1.01, 0.8),
            cand("bf16-autocast", "bf16", -1, 0.0, 0.0),
        ]
    }
    assert best_of(row, POLICIES[TF32])["origin"] == "tf32-matmul"  # type: ignore[index]
    assert best_of(row, POLICIES[DEFAULT])["origin"] == "tf32x3-matmul"  # type: ignore[index]
    assert best_of(row, POLICIES[IEEE])["origin"] == "compile-max-autotune"  # type: ignore[index]
    assert best_of({"candidates": [row["candidates"][3]]}, POLICIES[TF32]) is None  # reward 1: no suggestion


def test_problem_levels_come_from_the_docstring() -> None:
    labels = {t.label: t.level for t in targets()}
    assert labels["problems/01_square_matmul"] == 1 and labels["problems/29_matmul_divide_mean"] == 2
    assert labels["problems/35_tiny_cnn"] == 3 and labels["examples/ops/rowmean_linear"] == 0
    assert level_of(Path(__file__)) == 1  # no "Level N:" opening: a single operator


def test_summary_counts_shares_and_geometric_means(tmp_path: Path) -> None:
    rows = [
        {"label": "problems/29_matmul_divide_mean", "group": "problem", "eager_ms": 0.8, "compile_ms": 0.8,
         "candidates": [cand("reduce-before-matmul", "exact", 3, 4.0, 4.0)], "wall_s": 1.0},
        {"label": "problems/01_square_matmul", "group": "problem", "eager_ms": 1.3, "compile_ms": 1.3,
         "candidates": [cand("tf32-matmul", "tf32", 3, 9.0, 9.0), cand("tf32x3-matmul", "tf32x3", 2, 2.0, 1.02)],
         "wall_s": 1.0},
        {"label": "problems/16_relu", "group": "problem", "eager_ms": 0.26, "compile_ms": 0.52,
         "candidates": [cand("compile-max-autotune", "exact", 1, 1.0, 2.0)], "wall_s": 1.0},
    ]  # fmt: skip
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = summarize([path], tmp_path / "out")
    default, exact, tf32 = (result["summaries"][name] for name in (DEFAULT, IEEE, TF32))
    assert (exact["operators"], exact["reward_ge2"], exact["reward_3"]) == (3, 1, 1)
    assert (default["reward_ge2"], default["reward_3"]) == (2, 1)
    assert default["winning_rules"] == {"reduce-before-matmul": 1, "tf32x3-matmul": 1}
    assert (tf32["reward_ge2"], tf32["reward_3"]) == (2, 2)
    # No suggestion: the user keeps eager (1.0x), which against compile is eager's own ratio (2.0 for relu).
    assert math.isclose(exact["geomean_vs_eager"], (4.0 * 1.0 * 1.0) ** (1 / 3))
    assert math.isclose(exact["geomean_vs_compile"], (4.0 * 1.0 * 2.0) ** (1 / 3))
    assert exact["winning_rules"] == {"reduce-before-matmul": 1}
    level2 = result["summaries"]["problems, level 2, IEEE only"]
    assert (level2["operators"], level2["reward_3"]) == (1, 1)
    assert "examples/ops/rowmean_linear" in result["missing"]
    assert (tmp_path / "out" / "optimize_results.md").read_text().count("| problems/") == 3


def test_an_earlier_runs_rows_fill_only_the_operators_this_run_lacks_and_are_marked(tmp_path: Path) -> None:
    now = {
        "label": "problems/06_softmax",
        "group": "problem",
        "eager_ms": 0.28,
        "compile_ms": 0.17,
        "candidates": [cand("row-softmax-kernel", "exact", 3, 1.9, 1.14)],
        "wall_s": 1.0,
    }
    before = [
        {**now, "candidates": [cand("compile-max-autotune", "exact", 2, 1.7, 0.97)]},  # superseded by this run
        {"label": "problems/16_relu", "group": "problem", "eager_ms": 0.26, "compile_ms": 0.27,
         "candidates": [cand("compile-max-autotune", "exact", 1, 0.95, 1.0)], "wall_s": 1.0},
    ]  # fmt: skip
    (tmp_path / "rows.jsonl").write_text(json.dumps(now) + "\n")
    earlier = tmp_path / "run7" / "optimize_results.json"
    earlier.parent.mkdir()
    earlier.write_text(json.dumps({"rows": before}))
    result = summarize([tmp_path / "rows.jsonl"], tmp_path / "out", carried=earlier)
    by_label = {r["label"]: r for r in result["rows"]}
    assert by_label["problems/06_softmax"]["candidates"][0]["origin"] == "row-softmax-kernel"
    assert (
        by_label["problems/16_relu"]["carried_from"] == "run7"
        and "carried_from" not in by_label["problems/06_softmax"]
    )
    assert result["summaries"][DEFAULT]["operators"] == 2 and result["summaries"][DEFAULT]["reward_3"] == 1
    table = (tmp_path / "out" / "optimize_results.md").read_text()
    assert "| problems/16_relu (run7) |" in table and "| problems/06_softmax |" in table
    assert "Operators measured: 1; not measured: examples/" in table  # 16_relu is not counted as measured
    assert (
        "Besides, 1 rows carried from run7, an earlier run (marked), not measured with this run's rules: "
        "problems/16_relu." in table
    )


def test_first_and_last_order_a_shard_and_keep_the_rest_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["list", "--out", str(tmp_path), "--shard", "1/2"])
    plain = capsys.readouterr().out.split()
    assert len(plain) >= 6
    first, last = plain[3], plain[1]
    main(["list", "--out", str(tmp_path), "--shard", "1/2", "--first", first, "--last", f"{last},no-such-op"])
    ordered = capsys.readouterr().out.split()
    assert ordered == [first] + [t for t in plain if t not in (first, last)] + [last]


def test_roofline_counts_compulsory_traffic_and_flops_on_the_meta_device(tmp_path: Path) -> None:
    from benchmarks.roofline import count

    (tmp_path / "lin.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = torch.nn.Linear(64, 32)\n\n    def forward(self, x):\n"
        "        return torch.relu(self.lin(x))\n\n"
        "def get_inputs():\n    return [torch.randn(128, 64)]\n\ndef get_init_inputs():\n    return []\n"
    )
    counted = count(tmp_path / "lin.py")
    # x (128x64), weight (32x64), bias (32) read once; the 128x32 output written once; 2*128*64*32 FLOPs
    assert counted == {"bytes": 4.0 * (128 * 64 + 32 * 64 + 32 + 128 * 32), "flops": 2.0 * 128 * 64 * 32}


def test_forget_drops_what_a_shared_gpu_measured_and_keeps_compiled_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelbot.fingerprint import collect
    from kernelbot.pipeline import baselines

    monkeypatch.setenv("KERNELBOT_CACHE_DIR", str(tmp_path / "cache"))
    root = baselines.cache_root(collect("cpu").key)
    kept = root / "inductor" / "ab" / "kernel.py"
    for path in (
        root / "baselines" / "x-compile.json",
        root / "inductor" / "ab" / "kernel.best_config",
        kept,
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    assert main(["forget", "--out", str(tmp_path / "out"), "--device", "cpu"]) == 0
    assert sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file()) == [kept.relative_to(root)]
