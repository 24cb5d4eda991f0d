"""Optimization rules: one YAML file per idea in rules/, typed at load, matched against operator facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kernelbot.agents.base import Precision, precision_allowed
from kernelbot.analysis.rewrites import all_rewrites
from kernelbot.assets import asset_dir
from kernelbot.errors import ConfigError

RULES_DIR = asset_dir("rules")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparseMatch(_Strict):
    """Bounds on the structure features of the operator's sparse matrix input (analysis/sparse.py); a rule
    with this section matches only operators that take one."""

    min_density: float | None = None
    max_density: float | None = None
    min_row_nnz_mean: float | None = None
    max_row_nnz_mean: float | None = None
    max_row_nnz_cv: float | None = None  # std / mean of the nonzeros per row: regular rows are low
    min_row_nnz_cv: float | None = None  # power-law rows are high
    # banded: every nonzero within this share of the columns of the diagonal
    max_bandwidth_share: float | None = None
    min_diagonal_share: float | None = None
    # block-sparse: the 8 x 8 blocks that hold nonzeros are at least this full
    min_block_density_8: float | None = None
    # padded formats: the share of their stored slots that hold a nonzero (1 = no padding at all)
    min_ell_fill: float | None = None
    min_sell_fill: float | None = None
    min_dia_fill: float | None = None
    # the dense operand's columns (1: SpMV, a vector)
    min_rhs_cols: int | None = None
    max_rhs_cols: int | None = None
    # the format's conversion is worth paying only once per matrix: not for an operator that is given a new
    # matrix every call (SPARSE_MATRIX = "per_call"), where every timed call would pay it
    static_only: bool = False

    def why_not(self, f: dict[str, Any] | None) -> str | None:
        if f is None:
            return "needs a sparse matrix input"
        if self.static_only and f.get("matrix") == "per_call":
            return (
                "a new matrix every call (SPARSE_MATRIX = 'per_call'): the conversion would be paid per call"
            )
        cv = f["row_nnz_std"] / f["row_nnz_mean"] if f["row_nnz_mean"] else 0.0
        bounds = [
            ("density", f["density"], self.min_density, self.max_density),
            ("nonzeros per row", f["row_nnz_mean"], self.min_row_nnz_mean, self.max_row_nnz_mean),
            ("row-length variation", cv, self.min_row_nnz_cv, self.max_row_nnz_cv),
            ("bandwidth share", f["bandwidth_share"], None, self.max_bandwidth_share),
            ("diagonal share", f["diagonal_share"], self.min_diagonal_share, None),
            ("8x8 block density", f["block_density_8"], self.min_block_density_8, None),
            ("ELL fill", f.get("ell_fill", 0.0), self.min_ell_fill, None),
            ("SELL fill", f.get("sell_fill", 0.0), self.min_sell_fill, None),
            ("DIA fill", f.get("dia_fill", 0.0), self.min_dia_fill, None),
        ]
        if (self.min_rhs_cols is not None or self.max_rhs_cols is not None) and f.get("rhs_cols") is None:
            return "no dense operand of the matrix's width among the inputs"
        bounds.append(("dense operand columns", f.get("rhs_cols"), self.min_rhs_cols, self.max_rhs_cols))
        for name, value, low, high in bounds:
            if low is not None and value < low:
                return f"{name} {value:.3g} < {low}"
            if high is not None and value > high:
                return f"{name} {value:.3g} > {high}"
        return None


class Match(_Strict):
    devices: list[Literal["cpu", "cuda"]] = ["cpu", "cuda"]
    kinds: list[Literal["kernelbench", "declared"]] = ["kernelbench"]
    ops_all: list[str] = []  # every one of these op names appears in the traced graph
    ops_any: list[str] = []  # at least one appears
    ops_none: list[str] = []  # none appears
    modules_all: list[str] = []  # module class names (Conv2d, BatchNorm2d, ...) that must all be present
    modules_any: list[str] = []
    dtypes: list[str] = []  # input floating dtypes allowed; empty means any
    # Launch-bound operators only. Measured where the analysis could (CUDA): the GPU ran kernels for at most
    # max_gpu_busy of eager's wall time (tracer.gpu_busy_share). Elsewhere guessed: eager time at most
    # max_eager_ms, or at most max_ms_per_kernel for each kernel one forward launches (either suffices).
    max_gpu_busy: float | None = None
    max_eager_ms: float | None = None
    max_ms_per_kernel: float | None = None
    min_eager_ms: float | None = None
    traceable: bool = False  # needs a torch.fx trace of forward
    rewrite_applies: bool = False  # the rewrite named in `produces` must find its pattern (dry run)
    # At least this many pointwise ops end the graph, fusable as one kernel (epilogue.describe).
    pointwise_tail: int = 0
    sparse: SparseMatch | None = None  # the operator takes a sparse matrix with this structure
    dense_only: bool = False  # the template copies inputs as strided tensors: no sparse matrix input


class Produces(_Strict):
    rewrite: str | None = None  # an fx rewrite registered in kernelbot/analysis/rewrites.py
    template: str | None = None  # a Jinja2 template under templates/kernels/
    params: dict[str, Any] = {}  # passed to the template (and shown in the report)

    @model_validator(mode="after")
    def _one_kind(self) -> Produces:
        if (self.rewrite is None) == (self.template is None):
            raise ValueError("set exactly one of 'rewrite' or 'template'")
        return self


class Rule(_Strict):
    id: str
    description: str  # one line, shown with every candidate the rule makes
    rationale: str  # why it helps, for the LLM agent's skills and the report
    match: Match = Match()
    produces: Produces
    precision: Precision = "exact"
    expected_gain: float = Field(default=1.1, gt=0)  # ordering among matching rules (largest first)
    require_kernel: bool = False  # candidates promise a custom kernel (fallbacks are rejected)
    # Its template wraps any ModelNew, so it may also go on top of the best verified candidate.
    stacks: bool = False
    conflicts: list[str] = []  # rule ids it is never stacked with (two compile modes, two precisions)
    path: str = ""  # the file it came from (filled at load)

    @model_validator(mode="after")
    def _stacks_wrap(self) -> Rule:
        if self.stacks and self.produces.template is None:
            raise ValueError("only a template rule can stack (its template must subclass {{ base }})")
        return self

    def matches(self, facts: dict[str, Any], device: str, kind: str, policy: dict[str, bool]) -> str | None:
        """None when the rule applies; otherwise the first reason it does not (for the report)."""
        m = self.match
        ops, modules = set(facts.get("ops", [])), set(facts.get("modules", []))
        sparse_why = m.sparse.why_not(facts.get("sparse")) if m.sparse is not None else None
        checks = [
            (device in m.devices, f"not for {device}"),
            (kind in m.kinds, f"not for {kind} operators"),
            (not m.traceable or facts.get("traceable", False), "forward is not fx-traceable"),
            (all(o in ops for o in m.ops_all), f"needs ops {m.ops_all}"),
            (not m.ops_any or bool(ops & set(m.ops_any)), f"needs one of ops {m.ops_any}"),
            (not ops & set(m.ops_none), f"excluded by ops {sorted(ops & set(m.ops_none))}"),
            (all(x in modules for x in m.modules_all), f"needs modules {m.modules_all}"),
            (
                not m.modules_any or bool(modules & set(m.modules_any)),
                f"needs one of modules {m.modules_any}",
            ),
            (not m.dtypes or set(facts.get("input_dtypes", [])) <= set(m.dtypes), f"needs dtypes {m.dtypes}"),
            (_launch_bound(m, facts), _launch_bound_why(m, facts)),
            (
                m.min_eager_ms is None or facts.get("eager_ms", 0) >= m.min_eager_ms,
                f"too short (< {m.min_eager_ms} ms)",
            ),
            (
                facts.get("pointwise_tail", 0) >= m.pointwise_tail,
                f"needs a fusable tail of {m.pointwise_tail} pointwise ops",
            ),
            (sparse_why is None, f"matrix structure: {sparse_why}"),
            (not m.dense_only or not facts.get("sparse"), "not for a sparse matrix input"),
            (
                precision_allowed(self.precision, policy),
                f"{self.precision} not allowed by the precision policy",
            ),
        ]
        rewrite = self.produces.rewrite or self.produces.params.get("rewrite")
        if m.rewrite_applies and rewrite:
            applied = facts.get("rewrites", {}).get(rewrite, {}).get("applied", False)
            checks.append((applied, "pattern not found in the graph"))
        return next((why for ok, why in checks if not ok), None)


def _launch_bound(m: Match, facts: dict[str, Any]) -> bool:
    if m.max_gpu_busy is not None and facts.get("gpu_busy") is not None:
        return bool(facts["gpu_busy"] <= m.max_gpu_busy)  # measured: the guesses below do not overrule it
    if m.max_eager_ms is None and m.max_ms_per_kernel is None:
        return True
    eager, kernels = facts.get("eager_ms"), facts.get("kernels")
    if eager is None:
        return False
    short = m.max_eager_ms is not None and eager <= m.max_eager_ms
    many_small = m.max_ms_per_kernel is not None and bool(kernels) and eager / kernels <= m.max_ms_per_kernel
    return short or many_small


def _launch_bound_why(m: Match, facts: dict[str, Any]) -> str:
    if m.max_gpu_busy is not None and facts.get("gpu_busy") is not None:
        return f"not launch-bound (GPU busy {facts['gpu_busy']:.0%} of eager's time > {m.max_gpu_busy:.0%})"
    limits = [f"> {m.max_eager_ms} ms"] if m.max_eager_ms is not None else []
    limits += [f"> {m.max_ms_per_kernel} ms per kernel"] if m.max_ms_per_kernel is not None else []
    return f"not launch-bound ({', '.join(limits)})"


def load_rules(directory: Path = RULES_DIR) -> list[Rule]:
    """Every rules/*.yaml, validated; an invalid file is a one-line ConfigError naming file and key."""
    rules = []
    for path in sorted(directory.glob("*.yaml")):
        rel = f"rules/{path.name}"
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"{rel}: not valid YAML ({getattr(exc, 'problem', exc)}); fix the syntax"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"{rel}: a rule is a mapping with id, description, rationale, match and produces"
            )
        try:
            rule = Rule.model_validate({**data, "path": rel})
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(p) for p in error["loc"]) or "(top level)"
            raise ConfigError(f"{rel}: key '{key}': {error['msg'].removeprefix('Value error, ')}") from None
        if rule.id != path.stem:
            raise ConfigError(f"{rel}: id '{rule.id}' must equal the file name '{path.stem}'")
        rules.append(rule)
    ids = {r.id for r in rules}
    known = all_rewrites()
    kernels = asset_dir("templates") / "kernels"
    for rule in rules:
        unknown = sorted(set(rule.conflicts) - ids)
        if unknown:
            raise ConfigError(f"{rule.path}: key 'conflicts': no rule named {', '.join(unknown)}")
        for key, name in (
            ("produces.rewrite", rule.produces.rewrite),
            ("produces.params.rewrite", rule.produces.params.get("rewrite")),
        ):
            if name is not None and name not in known:
                raise ConfigError(
                    f"{rule.path}: key '{key}': no rewrite named {name!r} (registered: {', '.join(sorted(known))}); "
                    "add a kernelbot/analysis/rewrites_*.py module that registers it"
                )
        if rule.produces.template is not None and not (kernels / rule.produces.template).is_file():
            raise ConfigError(
                f"{rule.path}: key 'produces.template': no templates/kernels/{rule.produces.template}; add the template"
            )
    return rules


def rewrites_for(rules: list[Rule]) -> list[str]:
    """The fx rewrites the analysis must try for these rules (named directly, or by a template rule's params)."""
    names = {r.produces.rewrite for r in rules if r.produces.rewrite}
    names |= {str(r.produces.params["rewrite"]) for r in rules if "rewrite" in r.produces.params}
    return sorted(names)
