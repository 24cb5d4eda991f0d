"""Fitting the search policy from recorded candidates, its cross-validated ranking quality, and the offline
replay of recorded runs in the learned order against the fixed one (leave-one-operator-out)."""

# NOTE: scikit-learn (the `train` extra) is imported only while fitting; a policy file is evaluated by
# agents/policy.py without it. Without it, training keeps the per-rule Beta counts alone.

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kernelbot.agents.policy import Policy, RuleStats, Trees, Vocabulary
from kernelbot.agents.rules import Rule

MIN_TREE_ROWS = 30  # fewer rows than this (or one class only): no trees, the Beta counts alone
MAX_VOCABULARY = 48  # op and module names kept as features, the most frequent first
BUDGET = 4  # the offline evaluation's fixed candidate budget (reward >= 2 within the first 4)


@dataclass
class TrainingRow:
    """One single-rule candidate as it was recorded."""

    episode: str  # source database, run and operator: one search
    operator: str  # repository and operator name (cross-validation holds out all of an operator's rows)
    rule: str  # the rule id
    facts: dict[str, Any]  # the operator's analysis facts (with eager_ms, compile_ms, gpu)
    reward: int  # -1 / 1 / 2 / 3
    speedup: float | None  # vs eager
    wall_s: float | None  # its evaluation's seconds (None: not recorded)

    @property
    def win(self) -> bool:
        return self.reward >= 2


def single_rule_rows(rows: Sequence[TrainingRow], rules: Sequence[Rule]) -> list[TrainingRow]:
    """The rows of rules that exist now (stacks, replays and model candidates left out)."""
    ids = {r.id for r in rules}
    return [r for r in rows if r.rule in ids]


def _vocabulary(rows: Sequence[TrainingRow]) -> Vocabulary:
    ops = Counter(o for r in rows for o in set(r.facts.get("ops") or []))
    modules = Counter(m for r in rows for m in set(r.facts.get("modules") or []))
    return Vocabulary(
        ops=sorted(o for o, _ in ops.most_common(MAX_VOCABULARY)),
        modules=sorted(m for m, _ in modules.most_common(MAX_VOCABULARY)),
        gpus=sorted({str(r.facts.get("gpu") or "cpu") for r in rows}),
        rules=sorted({r.rule for r in rows}),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _stats(rows: Sequence[TrainingRow]) -> RuleStats:
    wins = [math.log(r.speedup) for r in rows if r.win and r.speedup]
    costs = [math.log(r.wall_s) for r in rows if r.wall_s]
    return RuleStats(len(rows), sum(r.win for r in rows), _mean(wins), _mean(costs), len(costs))


def _trees(model: Any, X: Any) -> Trees:
    """A fitted GradientBoosting model as arrays; init is whatever the model adds to its trees' sum."""
    dumps = []
    for est in model.estimators_[:, 0]:
        t = est.tree_
        dumps.append({"left": t.children_left.tolist(), "right": t.children_right.tolist(),
                      "feature": t.feature.tolist(), "threshold": t.threshold.tolist(),
                      "value": t.value[:, 0, 0].tolist()})  # fmt: skip
    raw = (
        model.decision_function(X[:1])[0] if hasattr(model, "decision_function") else model.predict(X[:1])[0]
    )
    tree_sum = sum(float(est.predict(X[:1])[0]) for est in model.estimators_[:, 0])
    return Trees(float(raw) - model.learning_rate * tree_sum, float(model.learning_rate), dumps)


def _fit_trees(kind: str, X: list[list[float]], y: list[float]) -> Trees | None:
    try:
        import numpy as np
        from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
    except ImportError:
        return None
    params: dict[str, Any] = {"n_estimators": 60, "max_depth": 3, "learning_rate": 0.1,
                              "min_samples_leaf": 3, "random_state": 0}  # fmt: skip
    Xa = np.asarray(X, dtype=np.float64)
    if kind == "classifier":
        model: Any = GradientBoostingClassifier(**params).fit(Xa, np.asarray(y, dtype=int))
    else:
        model = GradientBoostingRegressor(**params).fit(Xa, np.asarray(y, dtype=np.float64))
    return _trees(model, Xa)


def fit(rows: Sequence[TrainingRow], rules: Sequence[Rule], *, trees: bool = True) -> Policy:
    """The policy from recorded candidates: Beta counts per rule, and where there are enough rows, boosted
    trees over the operator's features and the rule (P(win), ln speedup of wins, ln seconds)."""
    rows = single_rule_rows(rows, rules)
    vocab = _vocabulary(rows)
    by_rule: dict[str, list[TrainingRow]] = defaultdict(list)
    for r in rows:
        by_rule[r.rule].append(r)
    pooled = _stats(rows)
    policy = Policy(
        vocab,
        {rule: _stats(rs) for rule, rs in sorted(by_rule.items())},
        prior_win=(pooled.wins + 1) / (pooled.n + 2),
        prior_log_speedup=pooled.log_speedup_win if pooled.log_speedup_win is not None else math.log(1.5),
        prior_log_cost=pooled.log_cost if pooled.log_cost is not None else math.log(30.0),
    )
    X = [vocab.vector(r.facts, r.rule) for r in rows]
    labels = [int(r.win) for r in rows]
    if trees and len(rows) >= MIN_TREE_ROWS and 0 < sum(labels) < len(labels):
        policy.win = _fit_trees("classifier", X, [float(v) for v in labels])
        wins = [i for i, r in enumerate(rows) if r.win and r.speedup]
        if len(wins) >= MIN_TREE_ROWS // 2:
            policy.speedup = _fit_trees("regressor", [X[i] for i in wins],
                                        [math.log(rows[i].speedup or 1.0) for i in wins])  # fmt: skip
        timed = [i for i, r in enumerate(rows) if r.wall_s]
        if len(timed) >= MIN_TREE_ROWS:
            policy.cost = _fit_trees("regressor", [X[i] for i in timed],
                                     [math.log(rows[i].wall_s or 1.0) for i in timed])  # fmt: skip
    policy.trained = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": len(rows),
        "episodes": len({r.episode for r in rows}),
        "operators": len({r.operator for r in rows}),
        "models": [k for k in ("win", "speedup", "cost") if getattr(policy, k) is not None],
    }
    return policy


# -- cross-validation and the offline replay ------------------------------------------------------------


@dataclass
class Episode:
    """One recorded search of one operator: its single-rule candidates in the order they ran."""

    key: str
    operator: str
    facts: dict[str, Any]
    rows: list[TrainingRow]

    @property
    def target(self) -> TrainingRow | None:
        """The final best candidate: reward >= 2, the highest reward, then the fastest."""
        wins = [r for r in self.rows if r.win]
        return max(wins, key=lambda r: (r.reward, r.speedup or 0.0), default=None)


@dataclass
class Replay:
    """How one order would have reached an episode's final best candidate."""

    evaluations: int  # candidates evaluated up to and including it
    wall_s: float  # their recorded seconds
    win_in_budget: bool  # a reward >= 2 among the first BUDGET


@dataclass
class Evaluation:
    """Leave-operators-out: each episode replayed in the order of a policy trained without its operator."""

    folds: int
    episodes: int  # episodes with at least one reward >= 2 (the ones that have a best to reach)
    operators: int
    learned: list[Replay] = field(default_factory=list)
    fixed: list[Replay] = field(default_factory=list)
    # The final best first: what no order can beat, so the ratios above read against what was possible (where
    # the fixed order already has the winner first, every order's ratio is 1).
    best_possible: list[Replay] = field(default_factory=list)
    learned_first_wins: int = 0  # the first candidate in the learned order earned reward >= 2
    fixed_first_wins: int = 0
    # Per replayed search: its operator, the final best's rule, and the recorded rules in each order (for a
    # report to show where the orders differ; not part of the summary a policy file keeps).
    details: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        def med(values: list[float]) -> float | None:
            return statistics.median(values) if values else None

        def ratios(of: list[Replay]) -> tuple[float | None, float | None]:
            pairs = list(zip(of, self.fixed, strict=True))
            evaluations = med([a.evaluations / b.evaluations for a, b in pairs])
            return evaluations, med([a.wall_s / b.wall_s for a, b in pairs if b.wall_s > 0])

        (eval_ratio, time_ratio), (eval_bound, time_bound) = ratios(self.learned), ratios(self.best_possible)
        return {
            "folds": self.folds,
            "episodes": self.episodes,
            "operators": self.operators,
            "top1_learned": self.learned_first_wins / self.episodes if self.episodes else None,
            "top1_fixed": self.fixed_first_wins / self.episodes if self.episodes else None,
            "mrr_learned": _mean([1 / r.evaluations for r in self.learned]),
            "mrr_fixed": _mean([1 / r.evaluations for r in self.fixed]),
            "median_evaluations_ratio": eval_ratio,  # learned / fixed, to the final best
            "median_wall_s_ratio": time_ratio,
            "median_evaluations_ratio_best_possible": eval_bound,  # the final best first / fixed
            "median_wall_s_ratio_best_possible": time_bound,
            f"wins_within_{BUDGET}_learned": sum(r.win_in_budget for r in self.learned),
            f"wins_within_{BUDGET}_fixed": sum(r.win_in_budget for r in self.fixed),
        }


def episodes(rows: Sequence[TrainingRow]) -> list[Episode]:
    grouped: dict[str, list[TrainingRow]] = defaultdict(list)
    for r in rows:
        grouped[r.episode].append(r)
    return [Episode(k, rs[0].operator, rs[0].facts, rs) for k, rs in grouped.items()]


def _replay(order: Sequence[str], episode: Episode) -> Replay:
    target = episode.target
    assert target is not None
    by_rule: dict[str, TrainingRow] = {}  # a rule tried twice in one search (a retry): its best try counts
    for r in episode.rows:
        kept = by_rule.get(r.rule)
        if kept is None or (r.reward, r.speedup or 0.0) > (kept.reward, kept.speedup or 0.0):
            by_rule[r.rule] = r
    ran = [by_rule[rule] for rule in order if rule in by_rule]
    upto = ran[: next(i for i, r in enumerate(ran) if r.rule == target.rule) + 1]
    return Replay(len(upto), sum(r.wall_s or 0.0 for r in upto), any(r.win for r in ran[:BUDGET]))


def fixed_order(rules: Sequence[Rule]) -> list[str]:
    """The search agent's order without a policy: the rules' expected_gain, largest first."""
    return [r.id for r in sorted(rules, key=lambda r: -r.expected_gain)]


def evaluate(
    rows: Sequence[TrainingRow],
    rules: Sequence[Rule],
    *,
    folds: int = 0,
    fitter: Callable[[Sequence[TrainingRow], Sequence[Rule]], Policy] = fit,
) -> Evaluation:
    """Train on all operators but a fold's, replay the fold's episodes in the learned and the fixed order.
    folds 0: leave one operator out (each operator its own fold)."""
    rows = single_rule_rows(rows, rules)
    operators = sorted({r.operator for r in rows})
    k = len(operators) if folds <= 0 else min(folds, len(operators))
    fold_of = {op: i % max(k, 1) for i, op in enumerate(operators)}
    result = Evaluation(folds=k, episodes=0, operators=len(operators))
    all_episodes = [e for e in episodes(rows) if e.target is not None and len(e.rows) > 1]
    for fold in range(k):
        held = [e for e in all_episodes if fold_of[e.operator] == fold]
        if held:
            _replay_held(result, fitter([r for r in rows if fold_of[r.operator] != fold], rules), held, rules)
    return result


def evaluate_on(
    train: Sequence[TrainingRow],
    test: Sequence[TrainingRow],
    rules: Sequence[Rule],
    *,
    fitter: Callable[[Sequence[TrainingRow], Sequence[Rule]], Policy] = fit,
) -> Evaluation:
    """Train on one set of operators and replay the searches of another (a problem set the policy never
    saw): an operator found in both is left out of the training rows, so the two stay disjoint."""
    test = single_rule_rows(test, rules)
    held_out = {r.operator for r in test}
    train = [r for r in single_rule_rows(train, rules) if r.operator not in held_out]
    result = Evaluation(folds=1, episodes=0, operators=len(held_out))
    held = [e for e in episodes(test) if e.target is not None and len(e.rows) > 1]
    if held and train:
        _replay_held(result, fitter(train, rules), held, rules)
    return result


def _replay_held(result: Evaluation, policy: Policy, held: Sequence[Episode], rules: Sequence[Rule]) -> None:
    """Each held-out search replayed in the policy's order and in the fixed one, added to `result`."""
    by_id = {r.id: r for r in rules}
    fixed = fixed_order(rules)
    for e in held:
        present = [by_id[r.rule] for r in e.rows]
        learned = [rule.id for rule, _ in policy.order(present, e.facts)]
        result.learned.append(_replay(learned, e))
        result.fixed.append(_replay(fixed, e))
        assert e.target is not None  # held episodes have one
        result.best_possible.append(_replay([e.target.rule], e))
        recorded = {r.rule for r in e.rows}
        result.details.append(
            {
                "operator": e.operator,
                "best": e.target.rule if e.target else None,
                "learned": learned,
                "fixed": [x for x in fixed if x in recorded],
                "evaluations": [result.learned[-1].evaluations, result.fixed[-1].evaluations],
                "wall_s": [round(result.learned[-1].wall_s, 1), round(result.fixed[-1].wall_s, 1)],
            }
        )
        result.learned_first_wins += _won(e, learned[0])
        result.fixed_first_wins += _won(e, next(x for x in fixed if x in learned))
        result.episodes += 1


def _won(episode: Episode, rule: str) -> bool:
    return any(r.rule == rule and r.win for r in episode.rows)
