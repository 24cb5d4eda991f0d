"""The shipped default search policy (policies/default.json), trained on the project's own benchmark runs.

The runs in benchmarks/results/*/optimize_results.json predate the history's facts column (revision 0004):
each row gives the operator's eager and torch.compile times, the GPU, every candidate's reward and speedup,
and (from its progress lines) when each candidate began, so each evaluation's seconds. The operators' graph
facts (ops, modules) are not in them: the default policy learns from timings, GPU and rule alone. Retrain
from a history database (`kernelbot train --db URL`) for a policy that sees the graph too.

    python -m benchmarks.train_policy [--out policies/default.json] [--report FILE.md]
    python -m benchmarks.train_policy --evaluate-on sqlite:///DIR/history.db --report FILE.md

With --evaluate-on (issue 22's cross-set criterion), the policy trained on these runs is judged on the
searches of another problem set (a `benchmarks.suite` database of problems these runs never saw; an operator
found in both is left out of training) instead of leave-one-operator-out, and the shipped file is left alone.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from kernelbot.agents.learning import TrainingRow, evaluate, evaluate_on, fit, single_rule_rows
from kernelbot.agents.rules import load_rules
from kernelbot.reports.training import training_rows

ROOT = Path(__file__).resolve().parent
STARTED = re.compile(r": candidate \d+ \((?P<origin>[^)]+)\): checking and timing")


def _walls(row: dict[str, Any]) -> dict[int, float]:
    """Each candidate's seconds, by position: from its progress line to the next candidate's (or the end)."""
    starts = [float(t) for t, text in row.get("phases") or [] if STARTED.search(text)]
    if not starts:
        return {}
    ends = [*starts[1:], float(row.get("wall_s") or 0.0)]
    return {i: end - start for i, (start, end) in enumerate(zip(starts, ends, strict=True)) if end > start}


def benchmark_rows(results: Path = ROOT / "results") -> list[TrainingRow]:
    rows = []
    for path in sorted(results.glob("*/optimize_results.json")):
        data = json.loads(path.read_text())
        for row in data["rows"] if isinstance(data, dict) else data:
            env = row.get("env") if isinstance(row.get("env"), dict) else {}
            facts = {"eager_ms": row.get("eager_ms"), "compile_ms": row.get("compile_ms"),
                     "gpu": env.get("gpu") or "cpu"}  # fmt: skip
            walls = _walls(row)
            for i, c in enumerate(row.get("candidates") or []):
                rows.append(TrainingRow(f"{path.parent.name}:{row['label']}", row["label"], c["origin"], facts,
                                        int(c["reward"]), c.get("speedup_vs_eager"), walls.get(i)))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT.parent / "policies" / "default.json")
    parser.add_argument(
        "--report", type=Path, help="write the leave-one-operator-out evaluation here (Markdown)"
    )
    parser.add_argument(
        "--evaluate-on",
        metavar="URL",
        action="append",
        default=[],
        help="judge on this history database's searches (another problem set) instead; writes no policy",
    )
    args = parser.parse_args()
    rules = load_rules()
    rows = single_rule_rows(benchmark_rows(), rules)
    if args.evaluate_on:
        held = single_rule_rows(training_rows(args.evaluate_on), rules)
        evaluation = evaluate_on(rows, held, rules)
        quality = evaluation.summary()
        print(json.dumps({**quality, "searches": evaluation.details}, indent=1))
        _report(args.report, quality, evaluation.details)
        return
    policy = fit(rows, rules)
    quality = evaluate(rows, rules).summary()
    policy.trained.update(databases=0, source="benchmarks/results/*/optimize_results.json", quality=quality)
    policy.trained.pop("at")  # the shipped file changes only when its data or the learner does
    policy.save(args.out)
    print(json.dumps(policy.trained, indent=1))
    _report(args.report, quality)


def _report(path: Path | None, quality: dict[str, Any], searches: list[dict[str, Any]] | None = None) -> None:
    if path:
        lines = ["| measure | value |", "|---|---|", *(f"| {k} | {v if not isinstance(v, float) else f'{v:.3f}'} |"
                                                   for k, v in quality.items())]  # fmt: skip
        if searches:  # each replayed search: where the final best sits in either order
            lines += ["", "| operator | final best | evaluations learned / fixed | s learned / fixed | learned order |",
                      "|---|---|---|---|---|"]  # fmt: skip
            lines += [f"| {d['operator']} | {d['best']} | {d['evaluations'][0]} / {d['evaluations'][1]} | "
                      f"{d['wall_s'][0]} / {d['wall_s'][1]} | {', '.join(d['learned'])} |" for d in searches]  # fmt: skip
        path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
