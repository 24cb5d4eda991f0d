"""The learned search policy: per rule, P(reward >= 2), the speedup when it wins and the seconds its
evaluation takes, from an operator's facts; the order the search agent tries rules in (docs/policy.md).

The file is data, not code: per-rule Beta counts and gradient-boosted trees dumped as arrays, evaluated here
without scikit-learn (agents/learning.py fits them), so loading a policy never runs anything from the file.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelbot.agents.rules import Rule

FORMAT = "kernelbot.policy"
FORMAT_VERSION = 1  # bump when a field or a feature changes meaning; an older file is stale (fixed order)
EXPLORE_EVERY = 4  # exploration share 1/4: every 4th slot goes to the rule with the least data
EXPLORE_BELOW = 5  # ... among rules seen fewer times than this (a rule with no data is never starved)
PRIOR_STRENGTH = 4.0  # pseudo-observations of the pooled Beta prior, blended with the trees by a rule's rows
DEFAULT_COST_S = 30.0  # an evaluation's seconds where nothing was ever timed
MIN_SPEEDUP = 1.05  # a reward of 2 means more than 5% faster: the least a win is worth
MAX_FILE_BYTES = 32 << 20  # a policy is data read from a checkout: bounded before it is parsed
MAX_NODES = 1_000_000  # over all trees of a model
LOG_BOUND = 20.0  # ln(speedup) and ln(seconds) are clamped to +-this before exp (a file cannot overflow it)

log = logging.getLogger("kernelbot.policy")

# Numeric features of an operator, in this order, then one indicator per op, module and GPU of the
# policy's vocabulary, then the rule's one-hot. Missing values are -1 (every real value here is >= 0).
NUMERIC = (
    "cuda",  # 1 on a GPU
    "log_eager_ms",  # log10 of eager's median, +3 (so 1 us is 0)
    "compile_ratio",  # torch.compile's median / eager's: < 1 where compile already wins
    "gpu_busy",  # share of eager's wall time the GPU ran kernels (launch-bound: low)
    "log_kernels",  # log10(1 + kernels one forward launches)
    "log_ms_per_kernel",  # log10 of eager ms per kernel, +3
    "traceable",  # forward is fx-traceable
    "pointwise_tail",  # pointwise ops ending the graph
    "log_numel",  # log10 of the inputs' elements
    "n_ops",  # distinct op names in the graph
    "float32",
    "float16",
    "bfloat16",
    "sparse",  # takes a sparse matrix
    "sparse_density",
    "sparse_row_cv",  # std / mean of nonzeros per row
    "sparse_bandwidth",
    "sparse_diagonal",
    "sparse_block8",
)


def numeric_features(facts: Mapping[str, Any]) -> list[float]:
    def num(key: str) -> float:
        value = facts.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else -1.0

    eager, compile_ms, kernels = num("eager_ms"), num("compile_ms"), num("kernels")
    dtypes = set(facts.get("input_dtypes") or [])
    numel = sum(math.prod(s) for s in facts.get("input_shapes") or [] if isinstance(s, list))
    sparse = facts.get("sparse") if isinstance(facts.get("sparse"), dict) else None

    def sp(key: str) -> float:
        return float(sparse.get(key, -1.0)) if sparse else -1.0

    row_cv = sp("row_nnz_std") / sp("row_nnz_mean") if sparse and sp("row_nnz_mean") > 0 else -1.0
    return [
        1.0 if facts.get("device") == "cuda" or (facts.get("gpu") not in (None, "cpu")) else 0.0,
        math.log10(eager) + 3 if eager > 0 else -1.0,
        compile_ms / eager if eager > 0 and compile_ms > 0 else -1.0,
        num("gpu_busy"),
        math.log10(1 + kernels) if kernels >= 0 else -1.0,
        math.log10(eager / kernels) + 3 if eager > 0 and kernels > 0 else -1.0,
        1.0 if facts.get("traceable") else 0.0,
        num("pointwise_tail"),
        math.log10(numel) if numel > 0 else -1.0,
        float(len(facts.get("ops") or [])),
        *(1.0 if d in dtypes else 0.0 for d in ("torch.float32", "torch.float16", "torch.bfloat16")),
        1.0 if sparse else 0.0,
        sp("density"),
        row_cv,
        sp("bandwidth_share"),
        sp("diagonal_share"),
        sp("block_density_8"),
    ]


@dataclass
class Vocabulary:
    """The categorical features a policy was trained with (names seen in its training rows)."""

    ops: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        """Every feature's name, in vector order (for reports and tree dumps)."""
        return [*NUMERIC, *(f"op:{o}" for o in self.ops), *(f"module:{m}" for m in self.modules),
                *(f"gpu:{g}" for g in self.gpus), *(f"rule:{r}" for r in self.rules)]  # fmt: skip

    def vector(self, facts: Mapping[str, Any], rule: str) -> list[float]:
        ops, modules = set(facts.get("ops") or []), set(facts.get("modules") or [])
        gpu = facts.get("gpu") or "cpu"
        return [
            *numeric_features(facts),
            *(1.0 if o in ops else 0.0 for o in self.ops),
            *(1.0 if m in modules else 0.0 for m in self.modules),
            *(1.0 if g == gpu else 0.0 for g in self.gpus),
            *(1.0 if r == rule else 0.0 for r in self.rules),
        ]


@dataclass
class Trees:
    """A gradient-boosted ensemble as arrays: raw = init + rate * sum of each tree's leaf value."""

    init: float
    rate: float
    # Per tree, per node: left and right child (-1 at a leaf), the feature split on, its threshold, the value.
    trees: list[dict[str, list[float]]]

    def raw(self, x: Sequence[float]) -> float:
        total = 0.0
        for t in self.trees:
            node = 0
            left, right = t["left"], t["right"]
            while left[node] != -1:
                go_left = x[int(t["feature"][node])] <= t["threshold"][node]
                node = int(left[node] if go_left else right[node])
            total += t["value"][node]
        return self.init + self.rate * total


@dataclass
class RuleStats:
    """What the training rows say about one rule, whatever the operator."""

    n: int = 0  # single-rule candidates of it in the training rows
    wins: int = 0  # of them with reward >= 2
    log_speedup_win: float | None = None  # mean ln(speedup vs eager) of its wins
    log_cost: float | None = None  # mean ln(seconds) of its evaluations that were timed
    n_cost: int = 0  # evaluations with a time


@dataclass
class Estimate:
    """The policy's guess for one rule on one operator."""

    rule: str
    p_win: float  # P(reward >= 2)
    speedup: float  # vs eager, when it wins
    cost_s: float  # seconds its evaluation takes
    n: int  # training rows of this rule (0: no data; exploration picks it)
    score: float = 0.0  # expected ln(speedup) per second under the budget left (the order)


@dataclass
class Policy:
    vocabulary: Vocabulary
    rules: dict[str, RuleStats]  # by rule id
    prior_win: float  # pooled share of wins: the Beta prior's mean
    prior_log_speedup: float  # pooled mean ln(speedup) of wins
    prior_log_cost: float  # pooled mean ln(seconds)
    win: Trees | None = None  # logit of P(reward >= 2); None: too few rows, the Beta posteriors alone
    speedup: Trees | None = None  # ln(speedup vs eager) of a win
    cost: Trees | None = None  # ln(seconds) of an evaluation
    trained: dict[str, Any] = field(default_factory=dict)  # rows, sources, when, cross-validated quality

    # -- estimates and the order -------------------------------------------------------------------

    def estimate(self, rule: str, facts: Mapping[str, Any]) -> Estimate:
        stats = self.rules.get(rule, RuleStats())
        x = self.vocabulary.vector(facts, rule) if rule in self.vocabulary.rules else None
        # Beta(a0 + wins, b0 + losses) with a pooled prior of PRIOR_STRENGTH rows; the trees where they know
        # the rule, weighted by its rows against the prior's.
        p = (stats.wins + PRIOR_STRENGTH * self.prior_win) / (stats.n + PRIOR_STRENGTH)
        if self.win is not None and x is not None and stats.n:
            p_tree = 1 / (1 + math.exp(-max(-30.0, min(30.0, self.win.raw(x)))))
            p = (stats.n * p_tree + PRIOR_STRENGTH * p) / (stats.n + PRIOR_STRENGTH)
        if self.speedup is not None and x is not None and stats.wins:
            log_s = self.speedup.raw(x)
        else:
            log_s = stats.log_speedup_win if stats.log_speedup_win is not None else self.prior_log_speedup
        if self.cost is not None and x is not None and stats.n_cost:
            log_c = self.cost.raw(x)
        else:
            log_c = stats.log_cost if stats.log_cost is not None else self.prior_log_cost
        speedup = max(MIN_SPEEDUP, math.exp(_clamp(log_s)))
        return Estimate(rule, p, speedup, max(0.1, math.exp(_clamp(log_c))), stats.n)

    def order(
        self,
        rules: Sequence[Rule],
        facts: Mapping[str, Any],
        *,
        time_left_s: float | None = None,
        candidates_left: int | None = None,
    ) -> list[tuple[Rule, Estimate]]:
        """The rules best expected gain per second first, every EXPLORE_EVERY-th slot the least-known rule.

        Gain: P(win) * ln(speedup). A candidate costs its seconds, or its share of the time left per
        candidate left when that is more (a fast rule still uses up one of the budget's candidates); one
        that would not finish in the time left counts only the chance that it does."""
        estimates = []
        for rule in rules:
            e = self.estimate(rule.id, facts)
            slot = e.cost_s
            if time_left_s is not None and candidates_left:
                slot = max(slot, time_left_s / candidates_left)
            finish = 1.0 if time_left_s is None else min(1.0, max(time_left_s, 0.0) / e.cost_s)
            e.score = e.p_win * math.log(e.speedup) * finish / slot
            estimates.append((rule, e))
        ranked = sorted(estimates, key=lambda re: (-re[1].score, -re[0].expected_gain))
        out: list[tuple[Rule, Estimate]] = []
        while ranked:
            pick = 0
            if len(out) % EXPLORE_EVERY == EXPLORE_EVERY - 1:
                cold = [i for i, (_, e) in enumerate(ranked) if e.n < EXPLORE_BELOW]
                if cold:  # the least data first; among equals, the better score
                    pick = min(cold, key=lambda i: (ranked[i][1].n, i))
            out.append(ranked.pop(pick))
        return out

    # -- the file ------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "features": list(NUMERIC),
            "vocabulary": asdict(self.vocabulary),
            "rules": {k: asdict(v) for k, v in sorted(self.rules.items())},
            "prior": {"win": self.prior_win, "log_speedup": self.prior_log_speedup, "log_cost": self.prior_log_cost},
            "models": {k: None if t is None else asdict(t) for k, t in
                       (("win", self.win), ("speedup", self.speedup), ("cost", self.cost))},
            "trained": self.trained,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policy:
        """The policy in `data`; ValueError naming what is wrong when it is not this version's format."""
        if data.get("format") != FORMAT:
            raise ValueError(f"not a kernelbot policy (format {data.get('format')!r})")
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"format version {data.get('format_version')}, this kernelbot reads {FORMAT_VERSION}"
            )
        if data.get("features") != list(NUMERIC):
            raise ValueError("trained on other operator features than this kernelbot computes")
        models = data["models"]
        trees = {k: None if models.get(k) is None else Trees(**models[k]) for k in ("win", "speedup", "cost")}
        prior = data["prior"]
        policy = cls(
            Vocabulary(**data["vocabulary"]),
            {str(k): RuleStats(**v) for k, v in data["rules"].items()},
            float(prior["win"]),
            float(prior["log_speedup"]),
            float(prior["log_cost"]),
            **trees,
            trained=dict(data.get("trained", {})),
        )
        _validate(policy)
        return policy

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")


def _clamp(x: float) -> float:
    return max(-LOG_BOUND, min(LOG_BOUND, x))


def _finite(what: str, *values: Any) -> None:
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{what}: {v!r} is not a finite number")


def _validate(policy: Policy) -> None:
    """A policy file is data from a checkout: every number finite, every tree a tree (children after their
    node, so a walk always ends at a leaf), every feature one the vocabulary has; ValueError otherwise."""
    voc = policy.vocabulary
    for name in ("ops", "modules", "gpus", "rules"):
        if not all(isinstance(x, str) for x in getattr(voc, name)):
            raise ValueError(f"vocabulary.{name} holds something other than names")
    width = len(voc.names())
    _finite("prior", policy.prior_win, policy.prior_log_speedup, policy.prior_log_cost)
    for rule, st in policy.rules.items():
        _finite(f"rules.{rule}", st.log_speedup_win, st.log_cost)
        if not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (st.n, st.wins, st.n_cost)
        ):
            raise ValueError(f"rules.{rule}: counts must be whole numbers >= 0")
    nodes = 0
    for label, model in (("win", policy.win), ("speedup", policy.speedup), ("cost", policy.cost)):
        if model is None:
            continue
        _finite(f"models.{label}", model.init, model.rate)
        for t in model.trees:
            cols: list[Any] = [t.get(k) for k in ("left", "right", "feature", "threshold", "value")]
            if not all(isinstance(c, list) for c in cols) or len({len(c) for c in cols}) != 1 or not cols[0]:
                raise ValueError(f"models.{label}: a tree's arrays differ in length or are empty")
            left, right, feature, threshold, value = cols
            size = len(left)
            nodes += size
            _finite(f"models.{label}", *threshold, *value)
            for i in range(size):
                leaf = left[i] == -1
                if leaf != (right[i] == -1):
                    raise ValueError(f"models.{label}: node {i} has one child")
                if not leaf and not (
                    isinstance(left[i], int)
                    and isinstance(right[i], int)
                    and i < left[i] < size
                    and i < right[i] < size
                ):
                    raise ValueError(f"models.{label}: node {i}'s children are not nodes after it")
                if not leaf and not (isinstance(feature[i], int) and 0 <= feature[i] < width):
                    raise ValueError(f"models.{label}: node {i} splits on a feature the vocabulary lacks")
    if nodes > MAX_NODES:
        raise ValueError(f"{nodes} tree nodes, more than {MAX_NODES}")


def load_policy(path: Path | None, rules: Sequence[Rule]) -> Policy | None:
    """The policy at `path`, or None (the rules' fixed expected_gain order) with one log line saying why:
    no file, not a policy of this version, or trained on rules that no longer exist."""
    if path is None:
        return None
    why = None
    try:
        if path.is_symlink():  # a checkout's link could point anywhere on the runner
            raise ValueError("a symbolic link; name the file itself")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"over {MAX_FILE_BYTES >> 20} MiB")
        policy = Policy.from_json(json.loads(path.read_text()))
        unknown = sorted(set(policy.rules) - {r.id for r in rules})
        if unknown:  # what it learned of the others still holds: those rules' statistics are dropped
            for rule in unknown:
                del policy.rules[rule]
            log.warning(
                "kernelbot: search policy %s: trained on rules that no longer exist (%s), ignored; retrain "
                "with `kernelbot train`",
                path,
                ", ".join(unknown[:3]),
            )
    except FileNotFoundError:
        why = "no such file"
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        # json.JSONDecodeError is a ValueError; AttributeError: a JSON list or number where a mapping belongs
        why = f"unreadable ({' '.join(str(exc).split())[:200]}); retrain with `kernelbot train`"
    if why is not None:
        log.warning("kernelbot: search policy %s: %s; using the rules' fixed order", path, why)
        return None
    return policy
