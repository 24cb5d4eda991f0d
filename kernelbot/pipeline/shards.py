"""A review split over a fleet: the plan (which operators each shard measures, balanced by recorded cost),
a shard's artifact (its typed results), and merging the artifacts back into one review.

GitHub Actions is the distributed engine: `kernelbot plan` writes the job matrix, each matrix job runs
`kernelbot review --shard K/N` on its runner and uploads its artifact, `kernelbot merge` gathers them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelbot.errors import StorageError, UsageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.pipeline.detect import Change
from kernelbot.pipeline.results import OperatorResult, ReviewResult

PLAN_VERSION = 1  # of the plan file and the shard artifact's envelope (the review inside has its own)
SHARD_KIND = "kernelbot-shard"
DEFAULT_COST_S = 60.0  # an operator never measured before, when no other one has been either


@dataclass(frozen=True)
class Planned:
    """One operator as the plan hands it to a shard."""

    name: str
    path: str
    change: str  # added / modified / removed / cosmetic
    cost_s: float  # expected wall time: recorded (median of past runs) or estimated
    recorded: bool  # whether cost_s came from the history


@dataclass
class Plan:
    """Which operators each shard measures; what `merge` checks the artifacts against."""

    repository: str
    base: str  # full SHA
    head: str
    shards: list[list[Planned]]  # shard K (1-based) is shards[K - 1]

    @property
    def count(self) -> int:
        return len(self.shards)

    def shard(self, k: int) -> list[Planned]:
        if not 1 <= k <= self.count:
            raise UsageError(f"shard {k} is not in this plan's 1..{self.count}")
        return self.shards[k - 1]

    def matrix(self) -> dict[str, Any]:
        """The value for `strategy.matrix` (through fromJSON): one entry per shard. Operator names are the
        PR's text: a workflow passes them on through `env:`, never into a script."""
        return {
            "include": [
                {
                    "shard": k,
                    "of": self.count,
                    "operators": ",".join(op.name for op in ops),
                    "cost_s": round(sum(op.cost_s for op in ops), 1),
                }
                for k, ops in enumerate(self.shards, 1)
            ]
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": PLAN_VERSION,
            "repository": self.repository,
            "base": self.base,
            "head": self.head,
            "shards": [[vars(op) for op in ops] for ops in self.shards],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        if data.get("schema_version") != PLAN_VERSION:
            raise UsageError(
                f"not a kernelbot plan of schema {PLAN_VERSION} (write it with `kernelbot plan`)"
            )
        shards = [[Planned(**op) for op in ops] for ops in data["shards"]]
        return cls(data["repository"], data["base"], data["head"], shards)


def parse_shard(text: str) -> tuple[int, int]:
    """ "K/N" → (K, N), 1 <= K <= N."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard takes K/N (e.g. 2/3), not {text!r}") from None
    if not 1 <= k <= n:
        raise UsageError(f"--shard {text}: K must be between 1 and N")
    return k, n


def balance(costs: Mapping[str, float], shards: int) -> list[list[str]]:
    """Names split into at most `shards` non-empty groups of near-equal total cost: the most expensive
    first, each to the group with the least so far (ties: the lower group). Deterministic for one input."""
    groups: list[list[str]] = [[] for _ in range(max(1, min(shards, len(costs))))]
    totals = [0.0] * len(groups)
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        k = min(range(len(groups)), key=lambda i: (totals[i], len(groups[i]), i))
        groups[k].append(name)
        totals[k] += costs[name]
    return [sorted(group) for group in groups if group]


def estimate(changes: Iterable[Change], recorded: Mapping[str, float]) -> dict[str, tuple[float, bool]]:
    """Each operator's expected cost: its recorded one, else the mean of those recorded (else a default);
    a cosmetic change is not timed and costs nothing. With nothing recorded, shards get equal counts."""
    known = [v for v in recorded.values() if v > 0]
    guess = sum(known) / len(known) if known else DEFAULT_COST_S
    out: dict[str, tuple[float, bool]] = {}
    for change in changes:
        if change.change == "cosmetic":
            out[change.name] = (0.0, False)
        elif recorded.get(change.name, 0) > 0:
            out[change.name] = (recorded[change.name], True)
        else:
            out[change.name] = (guess, False)
    return out


def make_plan(
    repository: str, base: str, head: str, changes: list[Change], recorded: Mapping[str, float], shards: int
) -> Plan:
    costs = estimate(changes, recorded)
    by_name = {c.name: c for c in changes}
    # Cosmetic operators cost nothing: spread by count so that no shard is a list of them alone.
    groups = balance({n: c or 1e-6 for n, (c, _) in costs.items()}, shards)
    return Plan(
        repository,
        base,
        head,
        [
            [
                Planned(n, by_name[n].spec.path, by_name[n].change, round(costs[n][0], 2), costs[n][1])
                for n in g
            ]
            for g in groups
        ],
    )


@dataclass
class ShardResult:
    """What one matrix job uploads: which shard it was and its typed review of those operators."""

    shard: int  # K of K/N
    of: int  # N
    operators: list[str]  # the names the plan gave it
    review: ReviewResult

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": PLAN_VERSION,
            "kind": SHARD_KIND,
            "shard": self.shard,
            "of": self.of,
            "operators": self.operators,
            "review": self.review.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShardResult:
        if data.get("kind") != SHARD_KIND or data.get("schema_version") != PLAN_VERSION:
            raise UsageError("not a kernelbot shard artifact (write it with `kernelbot review --shard`)")
        review = ReviewResult.from_json(data["review"])
        return cls(int(data["shard"]), int(data["of"]), list(data["operators"]), review)

    def filename(self) -> str:
        return f"kernelbot-shard-{self.shard}-of-{self.of}.json"


ARTIFACT_NAME = re.compile(r"kernelbot-shard-(\d+)-of-(\d+)\.json")


def read_artifacts(dirs: Iterable[Path]) -> list[ShardResult]:
    """Every shard artifact under `dirs` (searched recursively, as download-artifact lays them out).

    An artifact is data made by a runner that ran the PR's code: a file whose name and content disagree on
    the shard, or whose content does not rebuild and render as a review, is refused in one line naming it
    (never a traceback, never half-used)."""
    found = []
    for d in dirs:
        paths = [d] if d.is_file() else sorted(d.rglob("kernelbot-shard-*.json"))
        for path in paths:
            try:
                result = ShardResult.from_json(json.loads(path.read_text()))
                named = ARTIFACT_NAME.fullmatch(path.name)
                if named is None or (int(named[1]), int(named[2])) != (result.shard, result.of):
                    raise ValueError(
                        f"its name says one shard and its content another ({result.shard}/{result.of})"
                    )
                _check_types(result.review)
                result.review.markdown()  # everything the comment will show renders
            except UsageError:
                raise
            except Exception as exc:  # untrusted data: any fault is one line naming the file
                why = str(exc).splitlines()[0][:200] if str(exc) else ""
                raise UsageError(
                    f"cannot read shard artifact {path}: {type(exc).__name__}{': ' + why if why else ''}"
                ) from None
            found.append(result)
    return found


def _check_types(review: ReviewResult) -> None:
    """The numbers merge and the comment compute with are numbers (JSON lets an artifact say "9")."""
    numbers = [("wall_s", review.wall_s), ("time_budget_s", review.time_budget_s)]
    for op in review.operators:
        numbers += [(f"{op.name}.{k}", getattr(op, k)) for k in ("ratio", "p_value", "threshold", "wall_s")]
        if not all(isinstance(x, str) for x in (op.name, op.path, op.change)):
            raise TypeError(f"operator {op.name!r}: name, path and change must be text")
    for name, value in numbers:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TypeError(f"{name} is {type(value).__name__}, not a number")


@dataclass
class Merged:
    review: ReviewResult  # one review of every shard's operators (the missing ones as unmeasured rows)
    missing: dict[int, list[str]] = field(default_factory=dict)  # shard K -> its operators (when planned)


def _label(review: ReviewResult) -> str:
    fp = review.fingerprint
    return fp.gpu or fp.cpu or fp.device


def merge(results: list[ShardResult], plan: Plan | None = None) -> Merged:
    """The shards' reviews as one. Every shard must review the same repository, base and head (the plan's
    when given); a shard planned but absent is named in the warnings, and its operators (when the plan
    says which) appear as not measured. Each operator's base and head were timed on one runner's GPU, so
    merging compares nothing across GPU models; where shards ran on different ones, each row says where."""
    if not results and plan is None:
        raise UsageError("no shard artifacts found (kernelbot-shard-*.json) and no --plan to name the shards")
    first = results[0].review if results else None
    source: Plan | ReviewResult = plan if plan is not None else results[0].review
    repository, base, head = source.repository, source.base, source.head
    total = plan.count if plan else max(r.of for r in results)
    by_shard: dict[int, ShardResult] = {}
    for r in results:
        if not 1 <= r.shard <= total:
            raise UsageError(f"an artifact for shard {r.shard}, not one of the 1..{total} being merged")
        if (r.review.base, r.review.head) != (base, head) or r.of != total:
            raise UsageError(
                f"shard {r.shard}/{r.of} reviewed {r.review.base[:10]}..{r.review.head[:10]}, not the "
                f"{base[:10]}..{head[:10]} of {total} shards being merged"
            )
        if r.shard in by_shard:
            raise UsageError(f"two artifacts for shard {r.shard}/{total}")
        by_shard[r.shard] = r
    if first is None:
        fingerprint = Fingerprint(device="unknown", gpu=None, driver=None, cuda=None, torch="", cupy=None,
                                  triton=None, kernelbot="", python="", cpu="no shard reported", host="")  # fmt: skip
    else:
        fingerprint = first.fingerprint
    merged = ReviewResult(repository, base, head, fingerprint)
    labels = {_label(r.review) for r in by_shard.values()}
    missing: dict[int, list[str]] = {}
    for k in range(1, total + 1):
        shard = by_shard.get(k)
        if shard is None:
            planned = plan.shard(k) if plan else []
            missing[k] = [op.name for op in planned]
            for planned_op in planned:
                row = OperatorResult(planned_op.name, planned_op.path, planned_op.change, [], 0.0)
                row.error = (
                    f"not measured: shard {k}/{total} did not report (its runner failed or was cancelled)"
                )
                merged.operators.append(row)
            continue
        reported = shard.review.operators
        if plan is not None:  # a shard speaks for its own operators only, and for each of them
            given = {op.name: op for op in plan.shard(k)}
            extra = sorted(op.name for op in reported if op.name not in given)
            if extra:
                merged.warnings.append(
                    f"shard {k}/{total} reported operators the plan did not give it, left out: {', '.join(extra)}"
                )
            reported = [op for op in reported if op.name in given]
            for name in sorted(set(given) - {op.name for op in reported}):
                row = OperatorResult(name, given[name].path, given[name].change, [], 0.0)
                row.error = f"not reported: shard {k}/{total} did not include this operator in its results"
                reported.append(row)
        for op in reported:
            if len(labels) > 1:
                op.notes.append(f"base and head timed on {_label(shard.review)} (shard {k}/{total})")
            merged.operators.append(op)
        merged.warnings += [f"shard {k}/{total}: {w}" for w in shard.review.warnings]
        merged.interrupted = merged.interrupted or shard.review.interrupted
        merged.wall_s = max(merged.wall_s, shard.review.wall_s)
        budget = shard.review.time_budget_s
        merged.time_budget_s = max(merged.time_budget_s or 0.0, budget or 0.0) or None
    for k, names in sorted(missing.items(), reverse=True):  # inserted first: shard 1 ends up on top
        which = f" ({', '.join(names)})" if names else ""
        merged.warnings.insert(
            0, f"shard {k}/{total} did not report{which}: its operators were not measured; re-run that job"
        )
    if len(labels) > 1:
        merged.warnings.append(
            f"shards ran on different machines ({', '.join(sorted(labels))}): each operator's base and head "
            "were timed on the same one, and no measurement is compared across them"
        )
    merged.operators.sort(key=lambda op: op.name)
    return Merged(merged, missing)


def recorded_costs(url: str | None, repository: str, names: list[str]) -> tuple[dict[str, float], str | None]:
    """(median past wall time per operator, None), or ({}, why) when the history cannot be read: the plan
    then falls back to equal counts, which is never wrong, only less balanced."""
    from kernelbot.history import History
    from kernelbot.history.queries import operator_costs

    try:
        history = History.open(url, read_only=url is not None)
        try:
            return operator_costs(history, repository, names), None
        finally:
            history.close()
    except StorageError as exc:
        return {}, f"no recorded costs ({exc}); shards get equal numbers of operators"


def record_missing(merged: Merged, url: str | None, pr: int | None) -> list[str]:
    """A failed run in the history for each shard that did not report, naming its operators: a runner
    that crashed leaves a failed run, never a half-written one (a shard stores its run in one transaction
    once it has finished, or not at all). Returns problems, one line each."""
    from kernelbot.history import History, RunRecord

    review, problems = merged.review, []
    for k, names in sorted(merged.missing.items()):
        what = ", ".join(names) if names else "its operators"
        record = RunRecord(
            repository=review.repository,
            trigger="pull_request" if pr else "local",
            head_sha=review.head,
            base_sha=review.base,
            pr_number=pr,
            runner=f"shard {k}",
            status="failed",
            error=f"shard {k} did not report: {what} not measured (its runner failed or was cancelled)",
            finished_at=datetime.now(UTC),
        )
        try:
            history = History.open(url)
            try:
                history.record_run(record)
            finally:
                history.close()
        except StorageError as exc:
            problems.append(f"shard {k}: its failed run was not recorded: {exc}")
    return problems
