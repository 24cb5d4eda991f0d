"""The search policy's training rows, read from one or more history databases (a runner's SQLite file, the
fleet's PostgreSQL): every stored candidate with its operator's facts and its evaluation's seconds, but those
its run's time limit cut (under a learned order the late rules are the ones cut: counting them as losses
would push them further down)."""

from __future__ import annotations

from collections.abc import Sequence

from kernelbot.agents.learning import TrainingRow
from kernelbot.harness.evaluate import out_of_time
from kernelbot.history import History
from kernelbot.history.outcomes import candidate_outcomes


def training_rows(urls: Sequence[str]) -> list[TrainingRow]:
    """Every candidate of every database, oldest run first; an operator is the same operator in each
    database (its repository and name), so cross-validation holds all of its runs out together."""
    rows: list[TrainingRow] = []
    for index, url in enumerate(urls):
        history = History.open(url, read_only=True)
        try:
            outcomes = candidate_outcomes(history)
        finally:
            history.close()
        for o in outcomes:
            if out_of_time(
                o.status, o.reason
            ):  # cut by its run's deadline, not judged: neither a loss nor a cost
                continue
            facts = dict(o.facts or {})
            facts.setdefault("gpu", o.gpu or "cpu")  # runs stored before the facts named their GPU
            rows.append(
                TrainingRow(
                    episode=f"{index}:{o.run_id}:{o.operator}",
                    operator=f"{o.repository}:{o.operator}",
                    rule=o.origin,
                    facts=facts,
                    reward=o.reward,
                    speedup=o.speedup_vs_eager,
                    wall_s=o.wall_s,
                )
            )
    return rows
