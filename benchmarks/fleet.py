"""One GPU against all of a runner's GPUs: the pool and the sharded review (issue "Run: the GPU pool and a
sharded review on a machine with several H200s").

    python -m benchmarks.fleet review   --out DIR [--device cuda|cpu] [--gpus N]
    python -m benchmarks.fleet optimize --out DIR [--gpus N] [--time T] [--only STEM ...]

`review` builds a git repository whose pull request changes nine operators (three slowed 2x, two sped up 2x,
three edited without a change in cost, one added) and reviews it three ways, each a `kernelbot` process of its
own: unsharded on one GPU, unsharded with the pool on all N GPUs, and sharded as a fleet would run it
(`kernelbot plan --shards N`, one `review --shard K/N` process per GPU through CUDA_VISIBLE_DEVICES, then
`kernelbot merge`). It compares every operator's verdict with the expected one and across the three ways.

`optimize` runs `python -m benchmarks.suite table` over real-size problems twice, with `--gpus 1` and with
`--gpus N`, and compares wall time and each operator's reward.

Both write DIR/fleet_<part>.json and .md and print the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import benchlib, suite
from benchmarks.gpu_review import matmul_op

EXPECTED = {  # operator -> (base repeats, head repeats, expected verdict); n grows with the index
    "ops/slowed_a": (1, 2, "regression"),
    "ops/slowed_b": (2, 4, "regression"),
    "ops/slowed_c": (1, 2, "regression"),
    "ops/sped_up_a": (2, 1, "improvement"),
    "ops/sped_up_b": (4, 2, "improvement"),
    "ops/edited_a": (2, 2, "no_change"),
    "ops/edited_b": (3, 3, "no_change"),
    "ops/edited_c": (1, 1, "no_change"),
    "ops/added": (0, 1, "added"),
}
SIZES_CUDA = (1024, 2048, 1536)  # ~40 µs to ~1 ms a call on an H200
SIZES_CPU = (48, 64, 56)
# The NVLink multicast variables the device docs require in every process (harmless elsewhere).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def make_repo(root: Path, device: str) -> tuple[str, str]:
    sizes = SIZES_CUDA if device == "cuda" else SIZES_CPU
    config = "harness:\n  timeout_s: 120\n" + (
        "" if device == "cuda" else "thresholds:\n  regression: 0.25\n"
    )
    base_files: dict[str, str | None] = {".github/kernelbot.yml": config}
    head_files: dict[str, str | None] = {}
    for i, (name, (before, after, _)) in enumerate(EXPECTED.items()):
        n = sizes[i % len(sizes)]
        if before:
            base_files[f"{name}.py"] = matmul_op(before, n, device)
        text = matmul_op(after, n, device)
        if name.startswith("ops/edited"):  # the same kernels written another way
            text = text.replace("y = x @ self.w", "y = torch.matmul(x, self.w)")
        head_files[f"{name}.py"] = text
    base = benchlib.commit(root, base_files, "base")
    head = benchlib.commit(root, head_files, "head")
    return base, head


def kernelbot(args: list[str], log_file: Path, gpus: str | None) -> tuple[int, float]:
    env = {**os.environ, **NO_MULTICAST}
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    began = time.monotonic()
    with open(log_file, "w") as log:
        code = subprocess.run(
            [sys.executable, "-m", "kernelbot.cli", *args], env=env, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    return code, time.monotonic() - began


def verdicts(review_json: Path) -> dict[str, dict[str, Any]]:
    if not review_json.exists():
        return {}
    data = json.loads(review_json.read_text())
    return {
        op["name"]: {
            "verdict": op["verdict"] or op["change"],
            "ratio": op["ratio"],
            "error": op["error"],
        }
        for op in data["operators"]
    }


def sharded(folder: Path, root: Path, common: list[str], device: str, gpus: int, log: benchlib.Log) -> None:
    """The fleet: plan, one shard per GPU as if each were a runner (its own process and database), merge."""
    folder.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    plan = folder / "plan.json"
    code, _ = kernelbot(
        ["plan", "--repo", str(root), *common[2:6], "--shards", str(gpus), "--out", str(plan)],
        folder / "plan.log",
        None,
    )
    shards = json.loads(plan.read_text())["shards"] if code == 0 else []
    procs = []
    env = {**os.environ, **NO_MULTICAST}
    listed = benchlib.cmd(["nvidia-smi", "-L"]) if device == "cuda" else None
    visible = max(1, len(listed.splitlines()) if listed else 1)
    for k in range(1, len(shards) + 1):
        args = ["review", *common, "--shard", f"{k}/{len(shards)}", "--plan", str(plan)]
        args += ["--artifact", str(folder / "artifacts"), "--db", f"sqlite:///{folder / f'runner-{k}.db'}"]
        # one GPU per shard; with fewer GPUs than shards they share (the pool's lock queues their timing)
        shard_env = dict(
            env, **({"CUDA_VISIBLE_DEVICES": str((k - 1) % visible)} if device == "cuda" else {})
        )
        with open(folder / f"shard-{k}.log", "w") as shard_log:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "kernelbot.cli", *args],
                    env=shard_env,
                    stdout=shard_log,
                    stderr=subprocess.STDOUT,
                )
            )
    shard_codes = [p.wait() for p in procs]
    merge_args = ["merge", str(folder / "artifacts"), "--plan", str(plan), "--out", str(folder / "merged")]
    merge_code, _ = kernelbot(
        [*merge_args, "--db", f"sqlite:///{folder / 'fleet.db'}"], folder / "merge.log", None
    )
    wall = time.monotonic() - began
    record = {"exit": merge_code, "shard_exits": shard_codes, "wall_s": round(wall, 1),
              "shards": [[op["name"] for op in s] for s in shards]}  # fmt: skip
    (folder / "wall.json").write_text(json.dumps(record))
    log.line(
        f"sharded over {len(shards)}: shards exit {shard_codes}, merge exit {merge_code} in {wall:.1f} s"
    )


def review_part(
    out: Path, device: str, gpus: int, ways_asked: list[str], log: benchlib.Log
) -> dict[str, Any]:
    """Runs the ways asked for; the table covers every way whose results lie in `out` (a device call's limit
    may split the ways over calls: each way's folder holds its own review.json and wall.json)."""
    root = out / "repo"
    shutil.rmtree(root, ignore_errors=True)  # the same two commits on every call
    base, head = make_repo(root, device)
    common = ["--repo", str(root), "--base", base, "--head", head, "--device", device, "--agent", "none"]
    all_gpus = ",".join(str(g) for g in range(gpus)) if device == "cuda" else None
    one_gpu = "0" if device == "cuda" else None

    def single(name: str, visible: str | None) -> None:
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        args = ["review", *common, "--db", f"sqlite:///{folder / 'history.db'}"]
        args += ["--json", str(folder / "review.json"), "--out", str(folder / "comment.md")]
        code, wall = kernelbot(args, folder / "review.log", visible)
        (folder / "wall.json").write_text(
            json.dumps({"exit": code, "wall_s": round(wall, 1), "gpus": visible})
        )
        log.line(f"{name}: exit {code} in {wall:.1f} s")

    if "one_gpu" in ways_asked:
        single("one_gpu", one_gpu)
    if "pool" in ways_asked:
        single("pool", all_gpus)
    if "sharded" in ways_asked:
        sharded(out / "sharded", root, common, device, gpus, log)
    return {"base": base, "head": head, "gpus": gpus, **collected(out)}


def collected(out: Path) -> dict[str, Any]:
    """The ways whose results lie in `out`, and the table's rows."""
    ways = {}
    for name, review_json in (("one_gpu", out / "one_gpu" / "review.json"), ("pool", out / "pool" / "review.json"),
                              ("sharded", out / "sharded" / "merged" / "review.json")):  # fmt: skip
        wall = review_json.parent / "wall.json" if name != "sharded" else out / "sharded" / "wall.json"
        if wall.exists():
            ways[name] = {**json.loads(wall.read_text()), "ops": verdicts(review_json)}

    rows = []
    for name, (_, _, expected) in EXPECTED.items():
        got = {way: (ways[way]["ops"].get(name) or {}).get("verdict", "missing") for way in ways}
        rows.append(
            {
                "operator": name,
                "expected": expected,
                **got,
                **{f"{way}_ratio": (ways[way]["ops"].get(name) or {}).get("ratio") for way in ways},
                "agree": len(set(got.values())) == 1,
            }
        )
    return {"ways": ways, "rows": rows}


def optimize_part(out: Path, gpus: int, seconds: int, only: list[str], log: benchlib.Log) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    for label, n in (("one_gpu", 1), ("all_gpus", gpus)):
        folder = out / f"suite_{label}"
        args = [
            "-m",
            "benchmarks.suite",
            "table",
            "--set",
            "realsize",
            "--device",
            "cuda",
            "--out",
            str(folder),
        ]
        args += ["--time", str(seconds), "--gpus", str(n), "--only", *only]
        began = time.monotonic()
        with open(out / f"suite_{label}.log", "w") as suite_log:
            code = subprocess.run(
                [sys.executable, *args],
                env={**os.environ, **NO_MULTICAST},
                stdout=suite_log,
                stderr=subprocess.STDOUT,
            ).returncode
        wall = time.monotonic() - began
        done = suite.rows_from(suite.stored_runs(folder)) if (folder / "history.db").exists() else []
        runs[label] = {"exit": code, "wall_s": round(wall, 1), "rows": {r.name: r.__dict__ for r in done}}
        log.line(f"suite on {n} GPU(s): exit {code} in {wall:.1f} s, {len(done)} operators")
    names = sorted(set(runs["one_gpu"]["rows"]) | set(runs["all_gpus"]["rows"]))
    rows = []
    for name in names:
        a, b = runs["one_gpu"]["rows"].get(name, {}), runs["all_gpus"]["rows"].get(name, {})
        rows.append(
            {
                "operator": name,
                "reward_one": a.get("reward"),
                "reward_all": b.get("reward"),
                "best_one": a.get("best"),
                "best_all": b.get("best"),
                "vs_eager_one": a.get("vs_eager"),
                "vs_eager_all": b.get("vs_eager"),
                "same_reward": a.get("reward") == b.get("reward"),
            }
        )
    return {
        "gpus": gpus,
        "time_s": seconds,
        "runs": {k: {**v, "rows": None} for k, v in runs.items()},
        "rows": rows,
    }


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def review_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    ways = list(result["ways"])
    header = ["operator", "expected", *ways, *(f"{w} ratio" for w in ways), "agree"]
    rows = [
        [r["operator"], r["expected"], *(r[w] for w in ways), *(_x(r[f"{w}_ratio"]) for w in ways),
         "yes" if r["agree"] else "NO"]
        for r in result["rows"]
    ]  # fmt: skip
    rows.append(["wall s", "", *(str(result["ways"][w]["wall_s"]) for w in ways), *([""] * len(ways)), ""])
    return header, rows


def optimize_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["operator", "reward 1 GPU", f"reward {result['gpus']} GPUs", "best 1", "best all",
              "vs eager 1", "vs eager all"]  # fmt: skip
    rows = [
        [r["operator"], str(r["reward_one"]), str(r["reward_all"]), r["best_one"] or "—", r["best_all"] or "—",
         _x(r["vs_eager_one"]), _x(r["vs_eager_all"])]
        for r in result["rows"]
    ]  # fmt: skip
    walls = result["runs"]
    rows.append(["wall s", str(walls["one_gpu"]["wall_s"]), str(walls["all_gpus"]["wall_s"]), "", "", "", ""])
    return header, rows


def markdown(title: str, header: list[str], rows: list[list[str]]) -> str:
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "part", choices=["review", "optimize", "render"], help="render: the review table from --out"
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--gpus", type=int, default=2, help="GPUs (shards) to spread over")
    p.add_argument("--time", type=int, default=40, help="optimize: seconds per problem")
    p.add_argument(
        "--ways", default="one_gpu,pool,sharded", help="review: which of one_gpu,pool,sharded to run"
    )
    p.add_argument("--only", nargs="*", default=[], help="optimize: problem stems")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    log = benchlib.Log()
    env = benchlib.environment(args.device) if args.part != "render" else None
    if args.part in ("review", "render"):
        if args.part == "review":
            result = review_part(args.out, args.device, args.gpus, args.ways.split(","), log)
        else:
            result, args.part = collected(args.out), "review"
        header, rows = review_table(result)
        title = f"Review of nine changed operators: one GPU, the pool on {args.gpus}, {args.gpus} shards"
    else:
        result = optimize_part(args.out, args.gpus, args.time, args.only, log)
        header, rows = optimize_table(result)
        title = f"kernelbot optimize over real-size problems (--time {args.time}): 1 GPU vs {args.gpus}"
    if env is not None:
        result["environment"] = env
    (args.out / f"fleet_{args.part}.json").write_text(json.dumps(result, indent=2, default=str))
    (args.out / f"fleet_{args.part}.md").write_text(markdown(title, header, rows))
    benchlib.print_table(title, header, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
