"""The repository's `.github/kernelbot.yml`: typed at load, unknown keys rejected with the closest valid key."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelbot.errors import ConfigError

CONFIG_PATH = ".github/kernelbot.yml"
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tolerance(_Strict):
    atol: float = Field(gt=0)  # absolute tolerance in |out - ref| <= atol + rtol*|ref|
    rtol: float = Field(gt=0)  # relative tolerance


class PrecisionPolicy(_Strict):
    allow_tf32: bool = False  # candidates may use TF32 matmul/conv (reported as a precision change)
    allow_bf16: bool = False  # candidates may autocast to bf16/fp16 (reported as a precision change)
    # Float32 products emulated on TF32 Tensor Cores (3xTF32): no operand rounding, but the Tensor Cores'
    # accumulation error grows with the inner dimension, so checked at the operator's own tolerance (not TF32's)
    # and reported; off for operators that want IEEE float32 products only.
    allow_tf32x3: bool = True


class HarnessSettings(_Strict):
    timeout_s: float = Field(default=300.0, gt=0)  # wall-clock limit of one evaluation process
    seeds: int = Field(default=5, ge=5)  # fresh input sets for the correctness check (>= 5 by protocol)
    min_samples: int = Field(default=10, ge=10)  # timing samples before the adaptive rule may stop
    max_samples: int = Field(default=200, ge=10)
    target_rse: float = Field(default=0.005, gt=0)  # stop when std-error/mean falls under this
    time_budget_s: float = Field(default=5.0, gt=0)  # per timed subject
    # Wall time of one review run (every operator measured, then optimized with what is left): 3 changed
    # operators get their comment within 10 minutes. `kernelbot review --time` overrides it.
    run_time_s: float = Field(default=540.0, gt=0)
    memory_limit_mb: int = Field(default=16384, ge=512)  # address-space cap on CPU evaluations
    # The OS sandbox of every process that runs PR or candidate code (docs/security.md). "none" runs it
    # unjailed: only for a machine that holds no secrets; read from the base revision like every gate.
    # "process" is "bwrap" (the process sandbox); "container" runs the same pair inside a Docker container
    # (docs/scale.md).
    sandbox: Literal["bwrap", "process", "container", "none"] = "bwrap"

    @field_validator("sandbox")
    @classmethod
    def _process_is_bwrap(cls, value: str) -> str:
        return "bwrap" if value == "process" else value


class OperatorDecl(_Strict):
    """An operator declared in config rather than found as a KernelBench-form file."""

    name: str
    callable: str  # "path/to/module.py:function" (relative to the repository root) or "pkg.mod:function"
    inputs: str  # input factory, same form; called with the keyword args it accepts: shape, dtype, device
    reference: str | None = None  # what the callable must match; also the eager baseline when given
    sources: list[str] = []  # CUDA/C++ files it builds from (a change to one marks this operator)
    dtypes: list[str] = ["float32"]
    shapes: list[list[int]] = []  # every shape is checked for correctness; the first one is timed
    devices: list[Literal["cpu", "cuda"]] = ["cpu", "cuda"]
    tolerance: Tolerance | None = None
    precision: PrecisionPolicy | None = None
    threshold: float | None = Field(default=None, gt=0, lt=1)  # practical regression threshold
    # A sparse matrix input: the same matrix (its pattern) on every call, or a new one each call, so that a
    # format conversion is paid once or on every timed call (docs/rules.md, "Sparse operators").
    sparse_matrix: Literal["static", "per_call"] = "static"

    @field_validator("dtypes")
    @classmethod
    def _known_dtypes(cls, value: list[str]) -> list[str]:
        for dtype in value:
            if dtype not in DTYPES:
                raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
        return value

    @field_validator("callable", "inputs", "reference")
    @classmethod
    def _entry_point(cls, value: str | None) -> str | None:
        if value is not None and ":" not in value:
            raise ValueError(f"{value!r} must be 'module_or_file:attribute'")
        return value


class Paths(_Strict):
    watch: list[str] = ["**/*.py"]  # glob patterns of files that may hold KernelBench-form operators
    ignore: list[str] = ["tests/**", "**/test_*.py", ".github/**"]


class AgentSettings(_Strict):
    kind: Literal["search", "llm", "none"] = "none"
    model: str | None = None
    api_base: str | None = None
    max_turns: int = Field(default=12, ge=1)
    max_cost_usd: float = Field(default=2.0, ge=0)  # money per operator (litellm's price of the model)
    max_tokens: int | None = Field(default=None, ge=1)  # prompt + completion tokens per operator
    run_max_cost_usd: float | None = Field(default=None, ge=0)  # money per run, over all its operators
    budget: int = Field(default=8, ge=1)  # candidates per operator
    time_s: float = Field(default=900.0, gt=0)  # wall time per operator
    # The search agent's learned rule order (docs/policy.md): a file `kernelbot train` wrote, relative to the
    # repository root, or "default" for the one shipped with kernelbot; unset: the rules' fixed expected_gain.
    policy: str | None = None


class Thresholds(_Strict):
    # The change that must be caught: a significant change is called from half of it on (stats.CALL_FRACTION),
    # and "no change" needs the interval inside +-regression.
    regression: float = Field(default=0.03, gt=0, lt=1)
    p_value: float = Field(default=0.01, gt=0, lt=1)
    # Extra interleaved rounds while undecided, before "ambiguous": looked at every 4 (measure.looks), each look
    # at p_value / the number of looks. None: the device's default (measure.EXTRA_ROUNDS: 32 CUDA, 8 CPU).
    max_rounds: int | None = Field(default=None, ge=0)
    # 0: two sandbox processes a side, the round as the unit. N >= 3: the process as the unit (a GPU's
    # processes differ by a steady 1-5%): up to N fresh base/head process pairs, two rounds each, judged over
    # pairs (measure.run_pairs). Costs a process start per pair and side.
    process_pairs: int = Field(default=0, ge=0)

    @field_validator("process_pairs")
    @classmethod
    def _enough_pairs(cls, value: int) -> int:
        if value in (1, 2):
            raise ValueError("process_pairs must be 0 (off) or at least 3 (a verdict over pairs needs 3)")
        return value


class Triggers(_Strict):
    min_permission: Literal["write", "maintain", "admin"] = "write"
    fork_label: str = "kernelbot:run"


class Config(_Strict):
    version: Literal[1] = 1
    paths: Paths = Paths()
    operators: list[OperatorDecl] = []
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: PrecisionPolicy = PrecisionPolicy()
    harness: HarnessSettings = HarnessSettings()
    agent: AgentSettings = AgentSettings()
    thresholds: Thresholds = Thresholds()
    triggers: Triggers = Triggers()
    database: str | None = None  # SQLAlchemy URL; SQLite under the user's data directory when unset

    def operator(self, name: str) -> OperatorDecl | None:
        return next((op for op in self.operators if op.name == name), None)


def _valid_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at `loc`, walking nested models and list items."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = (
            current.model_fields.get(part)
            if isinstance(current, type) and issubclass(current, BaseModel)
            else None
        )
        if field is None:
            return []
        annotation = field.annotation
        args = getattr(annotation, "__args__", ())
        candidates = [annotation, *args]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return []
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


FIX_VALUE = "; fix the value and run again"


def _describe(error: Any, path: str) -> str:
    loc = tuple(error["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        valid = _valid_keys(Config, loc)
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(valid)}"
        return f"{path}: unknown key '{key}': {hint}"
    message = error["msg"].removeprefix("Value error, ")
    return f"{path}: key '{key}': {message}{FIX_VALUE}"


def parse_config(data: Any, path: str = CONFIG_PATH) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        # Every bad key in one line, so a user fixes them in one pass rather than one run each.
        first, *rest = (_describe(error, path) for error in exc.errors())
        also = [line.removeprefix(f"{path}: ").removesuffix(FIX_VALUE) for line in rest]
        raise ConfigError("; also ".join([first, *also])) from None


def load_config(repo: Path) -> Config:
    """Load `.github/kernelbot.yml` under `repo`; a repository without one gets the defaults."""
    path = repo / CONFIG_PATH
    if not path.exists():
        return Config()
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(
            f"{CONFIG_PATH}:{where} is not valid YAML ({getattr(exc, 'problem', exc)}); fix the syntax"
        ) from None
    return parse_config(data, CONFIG_PATH)


# -- gates: what a pull request may not set for itself -------------------------------------------------

# A review judges the head with the BASE revision's gates: the head's config may declare operators, but a
# PR that slows an operator must not also loosen the threshold that would catch it (or the precision
# policy, or the harness limits). Per-operator gate fields of an operator the base declares stay the base's.
# The agent's section is a gate too: a pull request must not point the model agent (and the key) at another
# endpoint, or lift its spending caps.
GATES = ("thresholds", "precision", "harness", "agent")
OPERATOR_GATES = ("threshold", "tolerance", "precision")


def _changes(prefix: str, base: Any, head: Any) -> list[str]:
    if isinstance(base, dict) and isinstance(head, dict):
        out: list[str] = []
        for key in sorted(set(base) | set(head)):
            out += _changes(f"{prefix}.{key}", base.get(key), head.get(key))
        return out
    return [] if base == head else [f"{prefix} {base} → {head}"]


def _plain(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value


def gated(base: Config, head: Config) -> tuple[Config, str | None]:
    """The head's config with the base's gates, and one line naming the gates the head tried to change.

    Operators come from the head (it may add or edit declarations); thresholds, precision, harness and agent
    settings, and the threshold/tolerance/precision of operators declared at base, come from the base.
    """
    changed: list[str] = []
    for key in GATES:
        changed += _changes(key, getattr(base, key).model_dump(), getattr(head, key).model_dump())
    at_base = {op.name: op for op in base.operators}
    operators = []
    for op in head.operators:
        was = at_base.get(op.name)
        update = {}
        for key in OPERATOR_GATES if was is not None else ():
            old, new = getattr(was, key), getattr(op, key)
            if old != new:
                changed += _changes(f"operators[{op.name}].{key}", _plain(old), _plain(new))
                update[key] = old
        operators.append(op.model_copy(update=update) if update else op)
    dropped = [name for name in at_base if head.operator(name) is None]
    effective = head.model_copy(update={**{k: getattr(base, k) for k in GATES}, "operators": operators})
    notes = []
    if changed:
        shown = "; ".join(changed[:4]) + (f"; and {len(changed) - 4} more" if len(changed) > 4 else "")
        notes.append(
            f"the head's {CONFIG_PATH} changes gates ({shown}): gates come from the base revision, "
            "so the base's values are used (the change applies once merged)"
        )
    if dropped:
        notes.append(
            f"the head's {CONFIG_PATH} no longer declares {', '.join(dropped[:4])}: reported as removed"
        )
    return effective, " ".join(notes) or None


def load_config_at(repo: Path, sha: str, path: str = CONFIG_PATH) -> Config:
    """The config as committed at `sha` (not the checkout's): the defaults when the file is not there."""
    from kernelbot import gitrepo

    data = gitrepo.read_file(repo, sha, path)
    if data is None:
        return Config()
    try:
        parsed = yaml.safe_load(data.decode("utf-8", errors="replace"))
    except yaml.YAMLError:
        raise ConfigError(f"{path} at {sha[:12]} is not valid YAML; fix the syntax") from None
    return parse_config(parsed, f"{path} at {sha[:12]}")
