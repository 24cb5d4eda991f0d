"""The review pipeline: detect -> measure base vs head -> (optimize) -> verdicts -> store -> render."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kernelbot import gitrepo
from kernelbot.config import Config, gated, load_config
from kernelbot.errors import ConfigError, KernelbotError, StorageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.harness import stop
from kernelbot.harness.evaluate import out_of_time
from kernelbot.pipeline import baselines
from kernelbot.pipeline.check import settings_for
from kernelbot.pipeline.detect import Change, detect, near_misses
from kernelbot.pipeline.measure import measure_pair
from kernelbot.pipeline.optimize import why_nothing_suggested
from kernelbot.pipeline.optimizers import Optimizer
from kernelbot.pipeline.pool import GpuPool
from kernelbot.pipeline.results import OperatorResult, ReviewResult, Suggested
from kernelbot.spec import OperatorSpec, discover

Progress = Callable[[str], None]


def _threshold(spec: OperatorSpec, config: Config) -> float:
    return spec.decl.threshold if spec.decl and spec.decl.threshold else config.thresholds.regression


@dataclass
class Target:
    """One operator to measure: what detection found, or an unchanged one measured on request (--all)."""

    spec: OperatorSpec  # at head (at base when removed)
    base: OperatorSpec | None  # at base; None when added
    change: str  # added / modified / removed / cosmetic / unchanged
    reasons: list[str]

    @classmethod
    def from_change(cls, change: Change) -> Target:
        base = change.base if change.base is not None else (change.spec if change.change != "added" else None)
        return cls(change.spec, base, change.change, change.reasons)


def _result(target: Target, base_root: Path, head_root: Path, config: Config) -> OperatorResult:
    spec = target.spec
    result = OperatorResult(spec.name, spec.path, target.change, target.reasons, _threshold(spec, config))
    result.spec_hash = spec.spec_hash(head_root if target.change != "removed" else base_root)
    if target.base is not None:
        result.base_spec_hash = target.base.spec_hash(base_root)
    return result


def _timed(target: Target, measure_cosmetic: bool, device: str) -> bool:
    """Whether measuring this target runs sandboxes (else it returns at once and costs no budget)."""
    return (target.change != "cosmetic" or measure_cosmetic) and target.spec.supports(device)


def _measure(
    target: Target,
    base_root: Path,
    head_root: Path,
    base_cfg: Config,
    head_cfg: Config,
    fingerprint: Fingerprint,
    measure_cosmetic: bool,
    deadline: float,
    gpu: str | None = None,
) -> OperatorResult:
    spec, base_spec = target.spec, target.base
    head_spec = spec if target.change != "removed" else None
    result = _result(target, base_root, head_root, head_cfg)
    if target.change == "cosmetic" and not measure_cosmetic:
        return result
    device = fingerprint.device
    if not spec.supports(device):
        result.error = (
            f"declared for {', '.join(spec.decl.devices if spec.decl else [])} only; not measured on {device}"
        )
        return result
    settings = replace(
        settings_for(head_cfg, baselines.cache_root(fingerprint.key)), deadline=deadline, gpu=gpu
    )
    base_job = base_spec.job(base_root, device) if base_spec is not None else None
    head_job = head_spec.job(head_root, device) if head_spec is not None else None
    pair = measure_pair(
        base_job,
        head_job,
        settings,
        threshold=result.threshold,
        alpha=head_cfg.thresholds.p_value,
        max_extra_rounds=head_cfg.thresholds.max_rounds,
        process_pairs=head_cfg.thresholds.process_pairs,
    )
    result.base, result.head, result.verdict, result.error, result.rounds = (
        pair.base,
        pair.head,
        pair.verdict,
        pair.error,
        pair.rounds,
    )
    result.notes.extend(pair.notes)
    if any(ev is not None and out_of_time(ev.status, ev.reason) for ev in (pair.base, pair.head)):
        # Cut by the run's budget, not broken: no verdict, and not counted against the head.
        result.verdict, result.stopped_by = None, "time"
        result.error = (
            "not finished: the run's time budget ran out while it was being measured (raise --time)"
        )
        return result
    if pair.comparison is not None:
        result.ratio, result.p_value, result.ratio_ci99 = (
            pair.comparison.ratio,
            pair.comparison.p_value,
            pair.comparison.ratio_ci99,
        )
    elif pair.base and pair.head and pair.base.timing and pair.head.timing:
        result.ratio = pair.head.timing.median_ms / pair.base.timing.median_ms
    return result


def _config_at(root: Path, side: str) -> tuple[Config, str | None]:
    try:
        return load_config(root), None
    except ConfigError as exc:
        return Config(), f"{side}: {exc} (defaults used for this side)"


def _gated_target(target: Target, config: Config) -> Target:
    """The head's operator with the gate fields of `config` (the base's, for operators the base declares)."""
    decl = config.operator(target.spec.name) if target.spec.decl is not None else None
    if decl is None or decl == target.spec.decl or target.change == "removed":
        return target
    return replace(target, spec=replace(target.spec, decl=decl))


# The run's budget (--time) is shared: measuring comes first, so each operator still to come keeps an
# estimate of its measuring time (the mean so far, else MEASURE_GUESS_S) and the optimizers share the rest.
MEASURE_GUESS_S = 60.0
MIN_MEASURE_S = 15.0  # less left than this: the operator is not started (its result says so)
MIN_OPTIMIZE_S = 30.0  # less than this for the agent: not optimized (a warning says so)


def _mean(measured_s: list[float], default: float) -> float:
    return sum(measured_s) / len(measured_s) if measured_s else default


def _optimize_time(
    left: float, pending: int, optimizable: int, measured_s: list[float], per_operator_s: float
) -> float:
    """Seconds the agent may spend on this operator: a fair share of what measuring the `pending` operators
    still to measure leaves."""
    spare = left - _mean(measured_s, MEASURE_GUESS_S) * pending
    return min(per_operator_s, spare / max(1, optimizable))


def run_review(
    repo: Path,
    base: str,
    head: str,
    fingerprint: Fingerprint,
    *,
    measure_cosmetic: bool = False,
    all_operators: bool = False,
    optimizer: Optimizer | None = None,
    time_s: float | None = None,
    optimize_only: tuple[str, ...] = (),
    only: tuple[str, ...] = (),
    pool: GpuPool | None = None,
    progress: Progress = lambda _: None,
) -> ReviewResult:
    """Detect and measure within `time_s` (default: the base's harness.run_time_s); storing and rendering
    are the caller's next steps (store first). `optimize_only`: the operators the agent works on (a
    `/kernelbot optimize OP` command's list; empty: every added or modified one); only those share its time.
    `only`: the operators this run reviews (a fleet shard's share, `kernelbot plan`); empty: all of them.
    `pool`: the runner's GPUs: each operator holds one for its base and head (pool.py); with several, the
    operators are measured side by side, one per GPU, before any is optimized."""

    def optimizable(target: Target) -> bool:
        return target.change in ("added", "modified") and (
            not optimize_only or target.spec.name in optimize_only
        )

    started = time.monotonic()
    root = gitrepo.toplevel(repo)
    base_sha, head_sha = gitrepo.resolve(root, base), gitrepo.resolve(root, head)
    review = ReviewResult(gitrepo.repository_name(root), base_sha, head_sha, fingerprint)
    dirty = gitrepo.dirty_paths(root)
    if dirty and head_sha == gitrepo.resolve(root, "HEAD"):
        review.warnings.append(
            f"{len(dirty)} uncommitted change(s) (e.g. {dirty[0]}) are not measured: head is commit {head_sha[:10]}; commit them to include them"
        )
    progress(f"detecting changed operators {base_sha[:10]}..{head_sha[:10]}")
    targets = [Target.from_change(change) for change in detect(root, base_sha, head_sha)]
    review.warnings += near_misses(root, base_sha, head_sha)
    if only:
        targets = [t for t in targets if t.spec.name in only]
    if not targets and not all_operators:
        review.wall_s = time.monotonic() - started
        return review
    with gitrepo.worktree(root, base_sha) as base_root, gitrepo.worktree(root, head_sha) as head_root:
        base_cfg, base_warn = _config_at(base_root, "base")
        head_cfg, head_warn = _config_at(head_root, "head")
        review.warnings += [w for w in (base_warn, head_warn) if w]
        # The head may declare operators; its gates (thresholds, precision, harness) are the base's.
        head_cfg, gate_note = gated(base_cfg, head_cfg)
        if gate_note and not head_warn:
            review.warnings.append(gate_note)
            progress(gate_note)
        targets = [_gated_target(target, head_cfg) for target in targets]
        if all_operators:
            targets += [
                t
                for t in _unchanged(targets, base_root, head_root, base_cfg, head_cfg)
                if not only or t.spec.name in only
            ]
            targets.sort(key=lambda t: t.spec.name)
        review.time_budget_s = time_s or head_cfg.harness.run_time_s
        deadline = started + review.time_budget_s
        measured_s: list[float] = []
        device = fingerprint.device

        def measure(target: Target, gpu: str | None) -> OperatorResult:
            begun = time.monotonic()
            if deadline - begun < MIN_MEASURE_S:
                result = _result(target, base_root, head_root, head_cfg)
                result.stopped_by = "time"
                result.error = f"not measured: the run's time budget of {review.time_budget_s:.0f} s was spent (raise --time)"
                return result
            result = _measure(
                target, base_root, head_root, base_cfg, head_cfg, fingerprint, measure_cosmetic, deadline, gpu
            )
            result.wall_s = time.monotonic() - begun
            return result

        early: dict[int, OperatorResult] = {}  # measured side by side on the pool's GPUs, by target index
        try:
            if pool is not None and len(pool) > 1:
                on_gpu = [i for i, t in enumerate(targets) if _timed(t, measure_cosmetic, device)]
                progress(f"measuring {len(on_gpu)} operator(s) on {len(pool)} GPUs, one operator per GPU")
                # each result kept as it comes: a Ctrl-C or SIGTERM meanwhile keeps the finished ones
                pool.map(lambda i, gpu: early.setdefault(i, measure(targets[i], gpu)), on_gpu)
            for index, target in enumerate(targets, 1):
                stop.check()
                begun = time.monotonic()
                timed = _timed(target, measure_cosmetic, device)
                if index - 1 in early:
                    result = early[index - 1]
                    begun -= result.wall_s
                # Not started when what is left is less than measuring one has taken so far.
                elif timed and deadline - begun < max(MIN_MEASURE_S, _mean(measured_s, 0.0)):
                    result = _result(target, base_root, head_root, head_cfg)
                    result.stopped_by = "time"
                    result.error = f"not measured: the run's time budget of {review.time_budget_s:.0f} s was spent (raise --time)"
                    review.operators.append(result)
                    continue
                else:
                    doing = (
                        "not timed"
                        if not timed
                        else "timing head"
                        if target.change == "added"
                        else "timing base and head"
                    )
                    progress(f"[{index}/{len(targets)}] {target.spec.name} ({target.change}): {doing}")
                    with pool.acquire() if pool is not None and timed else contextlib.nullcontext() as gpu:
                        result = _measure(
                            target, base_root, head_root, base_cfg, head_cfg, fingerprint, measure_cosmetic,
                            deadline, gpu,
                        )  # fmt: skip
                review.operators.append(result)
                if timed:
                    measured_s.append(time.monotonic() - begun)
                if optimizer is not None and optimizable(target) and result.head and result.head.ok:
                    # still to measure: the operators after this one that were not measured side by side already
                    pending = [
                        t
                        for j, t in enumerate(targets[index:], index)
                        if _timed(t, measure_cosmetic, device) and j not in early
                    ]
                    budget = _optimize_time(
                        deadline - time.monotonic(),
                        len(pending),
                        1 + sum(optimizable(t) for t in pending),
                        measured_s,
                        head_cfg.agent.time_s,
                    )
                    if budget < MIN_OPTIMIZE_S:
                        review.warnings.append(
                            f"{target.spec.name}: not optimized, {budget:.0f} s of the run's "
                            f"{review.time_budget_s:.0f} s left for it (raise --time)"
                        )
                    else:
                        progress(
                            f"[{index}/{len(targets)}] {target.spec.name}: optimizing ({budget:.0f} s at most, "
                            f"of the run's {deadline - time.monotonic():.0f} s left)"
                        )
                        # on one GPU of the pool, held for the agent's whole run (baselines, candidates)
                        with pool.acquire() if pool is not None else contextlib.nullcontext() as gpu:
                            _optimize(result, optimizer, target.spec, head_root, head_cfg, budget, gpu)
                result.wall_s = time.monotonic() - begun
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (harness.stop): keep what was measured
            review.interrupted = stop.acknowledge(exc)
            kept = {op.name for op in review.operators}  # and what the GPUs measured side by side
            review.operators += [early[i] for i in sorted(early) if early[i].name not in kept]
            review.warnings.append(
                f"interrupted ({review.interrupted}) after {len(review.operators)} of {len(targets)} "
                "operators: the rest were not measured"
            )
        skipped = [op.name for op in review.operators if op.stopped_by]
        if skipped:
            review.warnings.append(
                f"the run's time budget ({review.time_budget_s:.0f} s) ended before {len(skipped)} operator(s) "
                f"were measured ({', '.join(skipped[:3])}{', …' if len(skipped) > 3 else ''}): "
                "raise --time or harness.run_time_s"
            )
    review.wall_s = time.monotonic() - started
    return review


def _optimize(
    result: OperatorResult,
    optimizer: Optimizer,
    spec: OperatorSpec,
    root: Path,
    config: Config,
    time_s: float,
    gpu: str | None,
) -> None:
    """A failing agent costs the operator its suggestion, never the review."""
    try:
        result.optimization = optimizer(spec, root, config, time_s, gpu)
    except KernelbotError as exc:
        result.error = f"optimization: {exc}"
        return
    best = result.optimization.best
    if best is not None:
        result.best_candidate = Suggested.from_candidate(best)
        return
    note = why_nothing_suggested(result.optimization)
    if note is not None:
        result.notes.append(note)


def _unchanged(
    found: list[Target], base_root: Path, head_root: Path, base_cfg: Config, head_cfg: Config
) -> list[Target]:
    """Operators present on both sides that the diff did not touch (an A/A check, or a nightly history run)."""
    seen = {t.spec.name for t in found}
    at_base = {spec.name: spec for spec in discover(base_root, base_cfg)}
    return [
        Target(spec, at_base[spec.name], "unchanged", ["measured on request (--all)"])
        for spec in discover(head_root, head_cfg)
        if spec.name not in seen and spec.name in at_base
    ]


__all__ = ["OperatorResult", "ReviewResult", "StorageError", "run_review"]
