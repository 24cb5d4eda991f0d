"""The review pipeline: detect -> measure base vs head -> (optimize) -> verdicts -> store -> render."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelbot import baselines, gitrepo
from kernelbot.check import settings_for
from kernelbot.config import Config, load_config
from kernelbot.detect import Change, detect
from kernelbot.errors import ConfigError, KernelbotError, StorageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.harness.results import SCHEMA_VERSION, Evaluation
from kernelbot.measure import measure_pair
from kernelbot.optimize import OptimizeResult
from kernelbot.render import render
from kernelbot.spec import OperatorSpec, discover

Progress = Callable[[str], None]


@dataclass
class OperatorResult:
    name: str
    path: str
    change: str  # added / modified / removed / cosmetic / unchanged (measured with --all)
    reasons: list[str]  # what in the diff touched it
    threshold: float  # the practical threshold it was judged with
    spec_hash: str | None = None  # head version (base version for removed operators)
    base_spec_hash: str | None = None
    base: Evaluation | None = None
    head: Evaluation | None = None
    ratio: float | None = None  # head median / base median
    p_value: float | None = None
    ratio_ci99: tuple[float, float] | None = None
    verdict: str | None = None  # regression / improvement / no_change / ambiguous / error; None: not compared
    error: str | None = None
    rounds: int = 0  # interleaved timing rounds taken
    best_candidate: dict[str, Any] | None = None  # filled by an optimization agent
    optimization: OptimizeResult | None = None  # every candidate the agent tried, when one ran

    def to_json(self) -> dict[str, Any]:
        def side(ev: Evaluation | None) -> dict[str, Any] | None:
            return None if ev is None else ev.public()

        return {
            "name": self.name,
            "path": self.path,
            "change": self.change,
            "reasons": self.reasons,
            "base": side(self.base),
            "head": side(self.head),
            "ratio": self.ratio,
            "p_value": self.p_value,
            "ratio_ci99": list(self.ratio_ci99) if self.ratio_ci99 else None,
            "threshold": self.threshold,
            "verdict": self.verdict,
            "error": self.error,
            "best_candidate": self.best_candidate,
        }


@dataclass
class ReviewResult:
    repository: str
    base: str  # full SHA
    head: str
    fingerprint: Fingerprint
    operators: list[OperatorResult] = field(default_factory=list)
    run_id: int | None = None  # None when the history database could not be written
    warnings: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[OperatorResult]:
        return [op for op in self.operators if op.verdict == "regression"]

    @property
    def broken_at_head(self) -> list[OperatorResult]:
        return [op for op in self.operators if op.head is not None and not op.head.ok]

    def summary(self) -> str:
        counts = Counter(op.verdict or op.change for op in self.operators)
        if not self.operators:
            return "no operator changed"
        order = [
            "regression",
            "error",
            "ambiguous",
            "improvement",
            "no_change",
            "added",
            "removed",
            "cosmetic",
            "unchanged",
        ]
        words = {
            "no_change": "unchanged",
            "regression": "regression",
            "improvement": "improvement",
            "error": "error",
        }
        parts = []
        for key in order:
            if counts.get(key):
                label = words.get(key, key)
                plural = "s" if counts[key] > 1 and key in ("regression", "improvement", "error") else ""
                parts.append(f"{counts[key]} {label}{plural}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "repository": self.repository,
            "base": self.base,
            "head": self.head,
            "device": self.fingerprint.to_dict(),
            "summary": self.summary(),
            "warnings": self.warnings,
            "operators": [op.to_json() for op in self.operators],
        }

    def markdown(self) -> str:
        return render("comment.md.j2", review=self.to_json(), summary=self.summary())


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


def _measure(
    target: Target,
    base_root: Path,
    head_root: Path,
    base_cfg: Config,
    head_cfg: Config,
    fingerprint: Fingerprint,
    measure_cosmetic: bool,
) -> OperatorResult:
    spec, base_spec = target.spec, target.base
    head_spec = spec if target.change != "removed" else None
    result = OperatorResult(spec.name, spec.path, target.change, target.reasons, _threshold(spec, head_cfg))
    result.spec_hash = spec.spec_hash(head_root if head_spec else base_root)
    if base_spec is not None:
        result.base_spec_hash = base_spec.spec_hash(base_root)
    if target.change == "cosmetic" and not measure_cosmetic:
        return result
    device = fingerprint.device
    if not spec.supports(device):
        result.error = (
            f"declared for {', '.join(spec.decl.devices if spec.decl else [])} only; not measured on {device}"
        )
        return result
    settings = settings_for(head_cfg, baselines.cache_root(fingerprint.key))
    base_job = base_spec.job(base_root, device) if base_spec is not None else None
    head_job = head_spec.job(head_root, device) if head_spec is not None else None
    pair = measure_pair(
        base_job,
        head_job,
        settings,
        threshold=result.threshold,
        alpha=head_cfg.thresholds.p_value,
        max_extra_rounds=head_cfg.thresholds.max_rounds,
    )
    result.base, result.head, result.verdict, result.error, result.rounds = (
        pair.base,
        pair.head,
        pair.verdict,
        pair.error,
        pair.rounds,
    )
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


Optimizer = Callable[[OperatorSpec, Path, Config], OptimizeResult]


def run_review(
    repo: Path,
    base: str,
    head: str,
    fingerprint: Fingerprint,
    *,
    measure_cosmetic: bool = False,
    all_operators: bool = False,
    optimizer: Optimizer | None = None,
    progress: Progress = lambda _: None,
) -> ReviewResult:
    """Detect and measure; storing and rendering are the caller's next steps (store first)."""
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
    if not targets and not all_operators:
        return review
    with gitrepo.worktree(root, base_sha) as base_root, gitrepo.worktree(root, head_sha) as head_root:
        base_cfg, base_warn = _config_at(base_root, "base")
        head_cfg, head_warn = _config_at(head_root, "head")
        review.warnings += [w for w in (base_warn, head_warn) if w]
        if all_operators:
            targets += _unchanged(targets, base_root, head_root, base_cfg, head_cfg)
            targets.sort(key=lambda t: t.spec.name)
        for index, target in enumerate(targets, 1):
            progress(f"[{index}/{len(targets)}] {target.spec.name} ({target.change}): timing base and head")
            result = _measure(target, base_root, head_root, base_cfg, head_cfg, fingerprint, measure_cosmetic)
            review.operators.append(result)
            if (
                optimizer is not None
                and result.change in ("added", "modified")
                and result.head
                and result.head.ok
            ):
                progress(f"[{index}/{len(targets)}] {target.spec.name}: optimizing")
                _optimize(result, optimizer, target.spec, head_root, head_cfg)
    return review


def _optimize(
    result: OperatorResult, optimizer: Optimizer, spec: OperatorSpec, root: Path, config: Config
) -> None:
    """A failing agent costs the operator its suggestion, never the review."""
    try:
        result.optimization = optimizer(spec, root, config)
    except KernelbotError as exc:
        result.error = f"optimization: {exc}"
        return
    best = result.optimization.best
    if best is not None:
        result.best_candidate = {**best.to_json(), "source": best.source}


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
