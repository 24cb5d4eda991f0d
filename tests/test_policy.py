"""The learned search policy (agents/policy.py, agents/learning.py): trained from a real history database,
saved and loaded, used by the search agent, falling back to the fixed order in one line; search trajectories."""

from __future__ import annotations

import json
import logging
import math
import random
import sys
from pathlib import Path

import pytest

from kernelbot.agents import policy as policy_module
from kernelbot.agents.base import Task
from kernelbot.agents.learning import BUDGET, _trees, evaluate, evaluate_on, fit, fixed_order
from kernelbot.agents.policy import EXPLORE_EVERY, Policy, RuleStats, Vocabulary, load_policy
from kernelbot.agents.rules import Rule, load_rules
from kernelbot.agents.search import SearchAgent
from kernelbot.assets import asset_dir
from kernelbot.cli import main
from kernelbot.config import Config, PrecisionPolicy
from kernelbot.history import CandidateRecord, FingerprintRecord, History, OperatorRecord, RunRecord
from kernelbot.pipeline.optimizers import search_policy
from kernelbot.reports.export import export_trajectories
from kernelbot.reports.training import training_rows
from kernelbot.spec import kernelbench_spec
from tests.ops import TINY_LINEAR_RELU

# The fixed order (expected_gain) tries tf32-matmul, cuda-graph-capture, compile-reduce-overhead, then
# compile-max-autotune; in the synthetic history the third wins on launch-bound operators, the last on the rest.
RULES = ("tf32-matmul", "cuda-graph-capture", "compile-reduce-overhead", "compile-max-autotune")
LAUNCH_BOUND_WINNER, LARGE_WINNER = "compile-reduce-overhead", "compile-max-autotune"
COST_S = {"compile-max-autotune": 60.0, "compile-reduce-overhead": 12.0}


def _facts(launch_bound: bool, jitter: float) -> dict[str, object]:
    eager = 0.05 * (1 + jitter) if launch_bound else 40.0 * (1 + jitter)
    return {
        "traceable": True,
        "ops": ["linear", "relu"] if launch_bound else ["conv2d", "relu"],
        "modules": ["Linear"] if launch_bound else ["Conv2d"],
        "input_dtypes": ["torch.float32"],
        "input_shapes": [[8, 64]] if launch_bound else [[64, 3, 224, 224]],
        "eager_ms": eager,
        "compile_ms": eager * 0.9,
        "kernels": 30 if launch_bound else 3,
        "gpu_busy": 0.1 if launch_bound else 0.95,
        "gpu": "NVIDIA H200",
    }


def _write_history(url: str, operators: int = 40, seed: int = 0, repository: str = "acme/ops") -> None:
    """One optimize run per operator; half are launch-bound. Every rule is tried, the feature's winner wins."""
    rng = random.Random(seed)
    history = History.open(url)
    try:
        for i in range(operators):
            launch_bound = i % 2 == 0
            winner = LAUNCH_BOUND_WINNER if launch_bound else LARGE_WINNER
            candidates = []
            for rule in RULES:
                won = rule == winner
                candidates.append(
                    CandidateRecord(
                        source=f"# {rule} for op {i}\n",
                        origin=rule,
                        status="ok" if rng.random() > 0.1 or won else "incorrect",
                        reward=3 if won else 1,
                        speedup_vs_eager=(2.0 if won else 0.9) * (1 + 0.05 * rng.random()),
                        wall_s=COST_S.get(rule, 8.0) * (1 + 0.2 * rng.random()),
                    )
                )
            op = OperatorRecord(
                name=f"ops/op{i}",
                path=f"ops/op{i}.py",
                spec_hash=f"{i:064x}",
                change="unchanged",
                candidates=candidates,
                facts=_facts(launch_bound, rng.random() * 0.5),
            )
            history.record_run(
                RunRecord(
                    repository=repository,
                    trigger="local",
                    head_sha=None,
                    fingerprint=FingerprintRecord(gpu="NVIDIA H200"),
                    operators=[op],
                )
            )
    finally:
        history.close()


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return load_rules()


@pytest.fixture(scope="module")
def history_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = str(tmp_path_factory.mktemp("policy") / "history.db")
    _write_history(url)
    return url


@pytest.fixture(scope="module")
def trained(history_url: str, rules: list[Rule]) -> Policy:
    return fit(training_rows([history_url]), rules)


def _by_id(rules: list[Rule], ids: tuple[str, ...] = RULES) -> list[Rule]:
    found = {r.id: r for r in rules}
    return [found[i] for i in ids]


def test_the_history_keeps_what_training_needs(history_url: str) -> None:
    rows = training_rows([history_url])
    assert len(rows) == 40 * len(RULES)
    first = rows[0]
    assert first.facts["eager_ms"] == pytest.approx(_facts(True, 0)["eager_ms"], rel=0.6)  # type: ignore[arg-type]
    assert first.facts["gpu"] == "NVIDIA H200" and first.facts["ops"] == ["linear", "relu"]
    assert all(r.wall_s is not None and r.wall_s > 0 for r in rows)
    assert {r.episode for r in rows} == {f"0:{i + 1}:ops/op{i}" for i in range(40)}


def test_training_puts_the_rule_that_wins_on_a_feature_first(trained: Policy, rules: list[Rule]) -> None:
    present = _by_id(rules)
    fixed = fixed_order(present)
    assert fixed[0] not in (LAUNCH_BOUND_WINNER, LARGE_WINNER)  # the test means something
    assert trained.win is not None and trained.cost is not None  # enough rows for the trees
    small = [r.id for r, _ in trained.order(present, _facts(True, 0.2))]
    large = [r.id for r, _ in trained.order(present, _facts(False, 0.2))]
    assert small[0] == LAUNCH_BOUND_WINNER
    assert large[0] == LARGE_WINNER
    small_est = trained.estimate(LAUNCH_BOUND_WINNER, _facts(True, 0.2))
    assert small_est.p_win > 0.8 and small_est.speedup > 1.8
    assert trained.estimate(LAUNCH_BOUND_WINNER, _facts(False, 0.2)).p_win < 0.2
    assert trained.estimate(LARGE_WINNER, _facts(False, 0.2)).cost_s == pytest.approx(66, rel=0.2)


def test_the_dumped_trees_are_the_fitted_model(rules: list[Rule]) -> None:
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

    rng = random.Random(1)
    X = [[rng.random() * 4, rng.random(), float(rng.random() > 0.5)] for _ in range(200)]
    y = [int(a > 2 and c > 0) for a, _, c in X]
    clf = GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    reg = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(
        X, [a * 3 + b for a, b, _ in X]
    )
    import numpy as np

    Xa = np.asarray(X)
    for model, want in ((clf, clf.decision_function(Xa)), (reg, reg.predict(Xa))):
        trees = _trees(model, Xa)
        got = [trees.raw(x) for x in X]
        assert max(abs(g - w) for g, w in zip(got, want, strict=True)) < 1e-6


def test_the_policy_file_round_trips(trained: Policy, rules: list[Rule], tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    trained.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "kernelbot.policy" and data["format_version"] == policy_module.FORMAT_VERSION
    loaded = load_policy(path, rules)
    assert loaded is not None
    assert loaded.to_json() == trained.to_json()
    for facts in (_facts(True, 0.1), _facts(False, 0.3)):
        assert [e.__dict__ for _, e in loaded.order(_by_id(rules), facts)] == [
            e.__dict__ for _, e in trained.order(_by_id(rules), facts)
        ]


def _one_line(caplog: pytest.LogCaptureFixture, path: Path | None, rules: list[Rule]) -> str:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kernelbot.policy"):
        assert load_policy(path, rules) is None
    assert len(caplog.records) == 1, caplog.records
    line = caplog.records[0].getMessage()
    assert "\n" not in line and "fixed order" in line
    return line


def test_a_missing_or_stale_policy_falls_back_with_one_line(
    trained: Policy, rules: list[Rule], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert "no such file" in _one_line(caplog, tmp_path / "nope.json", rules)
    data = trained.to_json()
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**data, "format_version": policy_module.FORMAT_VERSION - 1}))
    assert "format version" in _one_line(caplog, old, rules)
    gone = tmp_path / "gone.json"
    gone.write_text(
        json.dumps({**data, "rules": {**data["rules"], "a-rule-since-removed": data["rules"][RULES[0]]}})
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kernelbot.policy"):
        kept = load_policy(gone, rules)  # one renamed rule costs its own statistics, not the whole order
    assert (
        kept is not None
        and "a-rule-since-removed" not in kept.rules
        and set(kept.rules) == set(data["rules"])
    )
    assert len(caplog.records) == 1 and "a-rule-since-removed" in caplog.records[0].getMessage()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    _one_line(caplog, broken, rules)
    # No policy named: the fixed order, silently.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kernelbot.policy"):
        assert search_policy(Config(), tmp_path, rules) is None
    assert caplog.records == []
    # Named in the config and missing: one line, then the fixed order.
    config = Config.model_validate({"agent": {"policy": "policies/mine.json"}})
    with caplog.at_level(logging.WARNING, logger="kernelbot.policy"):
        assert search_policy(config, tmp_path, rules) is None
    assert len(caplog.records) == 1 and "policies/mine.json" in caplog.records[0].getMessage()


def test_a_hostile_policy_file_is_refused_in_one_line(
    trained: Policy, rules: list[Rule], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A policy is read from the checkout under review: whatever it holds, the run goes on in the fixed
    order (no crash, no endless tree walk, no overflow, no file outside it read)."""
    data = trained.to_json()
    assert data["models"]["win"] is not None, "the fixture trains trees"
    tree = data["models"]["win"]["trees"][0]
    hostile = {
        "list": [data],
        "cycle": {**data, "models": {**data["models"], "win": {**data["models"]["win"], "trees": [
            {**tree, "left": [0, *tree["left"][1:]]}]}}},
        "feature": {**data, "models": {**data["models"], "win": {**data["models"]["win"], "trees": [
            {**tree, "feature": [10**6, *tree["feature"][1:]]}]}}},
        "count": {**data, "rules": {k: {**v, "n": "7"} for k, v in data["rules"].items()}},
        "nan": {**data, "prior": {**data["prior"], "log_speedup": float("nan")}},
        "deep": "[" * 100_000 + "]" * 100_000,
    }  # fmt: skip
    for name, content in hostile.items():
        path = tmp_path / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        assert "unreadable" in _one_line(caplog, path, rules), name
    huge = {**data, "prior": {**data["prior"], "log_speedup": 1e6}}  # finite: clamped, not an overflow
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(huge))
    loaded = load_policy(path, rules)
    assert loaded is not None and loaded.estimate("no-such-rule", {}).speedup == pytest.approx(math.exp(20))
    link = tmp_path / "link.json"
    link.symlink_to("/etc/hostname")
    assert "symbolic link" in _one_line(caplog, link, rules)


def _task(tmp_path: Path) -> Task:
    (tmp_path / "op.py").write_text(TINY_LINEAR_RELU)
    facts = {
        **_facts(True, 0.0),
        "ops": ["linear", "relu"],
        "modules": ["Linear"],
        "input_dtypes": ["float32"],
    }
    return Task(
        kernelbench_spec("op.py"), tmp_path, "cuda", TINY_LINEAR_RELU, PrecisionPolicy(allow_tf32=True), facts
    )


def _hand_policy(stats: dict[str, RuleStats]) -> Policy:
    return Policy(
        Vocabulary(), stats, prior_win=0.2, prior_log_speedup=math.log(1.5), prior_log_cost=math.log(10)
    )


def test_the_search_agent_tries_rules_in_the_policy_order(rules: list[Rule], tmp_path: Path) -> None:
    plain = [p.origin for p in SearchAgent(rules).plan(_task(tmp_path))]
    assert len(plain) >= EXPLORE_EVERY and plain == [
        r for r in fixed_order(rules) if r in plain
    ]  # without a policy: expected_gain, largest first
    last = plain[-1]
    # Every matching rule well known and poor, except the fixed order's last one, which always won.
    stats = {r: RuleStats(n=20, wins=0, log_cost=math.log(10), n_cost=20) for r in plain}
    stats[last] = RuleStats(n=20, wins=20, log_speedup_win=math.log(3), log_cost=math.log(10), n_cost=20)
    agent = SearchAgent(rules, _hand_policy(stats))
    learned = [p.origin for p in agent.plan(_task(tmp_path))]
    assert learned[0] == last and sorted(learned) == sorted(plain)
    assert agent.summary()["policy_order"][0]["rule"] == last


def test_a_rule_without_data_is_explored_not_starved(rules: list[Rule]) -> None:
    present = _by_id(rules)
    stats = {
        r: RuleStats(n=30, wins=10, log_speedup_win=math.log(2), log_cost=math.log(10), n_cost=30)
        for r in RULES
    }
    del stats["tf32-matmul"]  # never tried: its prior is the pooled (poor) one
    policy = _hand_policy(stats)
    order = [r.id for r, _ in policy.order(present, _facts(True, 0))]
    assert order.index("tf32-matmul") == EXPLORE_EVERY - 1  # its exploration slot, not last by score
    scores = {r.id: e.score for r, e in policy.order(present, _facts(True, 0))}
    assert scores["tf32-matmul"] == min(scores.values())


def test_a_rule_that_cannot_finish_in_the_time_left_waits(rules: list[Rule]) -> None:
    present = _by_id(rules, ("compile-max-autotune", "cuda-graph-capture"))
    stats = {
        "compile-max-autotune": RuleStats(
            n=30, wins=24, log_speedup_win=math.log(3), log_cost=math.log(300), n_cost=30
        ),
        "cuda-graph-capture": RuleStats(
            n=30, wins=12, log_speedup_win=math.log(2), log_cost=math.log(10), n_cost=30
        ),
    }
    policy = _hand_policy(stats)
    roomy = [r.id for r, _ in policy.order(present, {}, time_left_s=3000, candidates_left=2)]
    tight = [r.id for r, _ in policy.order(present, {}, time_left_s=60, candidates_left=2)]
    assert roomy[0] == "compile-max-autotune" and tight[0] == "cuda-graph-capture"


def test_offline_replay_reaches_the_best_sooner_than_the_fixed_order(
    history_url: str, rules: list[Rule]
) -> None:
    result = evaluate(training_rows([history_url]), rules, folds=4).summary()
    assert result["episodes"] == 40 and result["folds"] == 4
    assert result["top1_learned"] == 1.0 and result["top1_fixed"] == 0.0
    # First instead of third or fourth; the time saved is what the losers before it took (8 + 8 s of 60 + 28 s).
    assert result["median_evaluations_ratio"] < 0.5 and result["median_wall_s_ratio"] < 0.75
    assert result[f"wins_within_{BUDGET}_learned"] == 40
    # Learned puts the winner first on every search here, so it reaches the bound: the final best first.
    assert result["median_evaluations_ratio_best_possible"] == result["median_evaluations_ratio"]
    assert result["median_wall_s_ratio_best_possible"] == result["median_wall_s_ratio"]


def test_the_best_possible_order_bounds_the_replay(rules: list[Rule]) -> None:
    """Where the fixed order already has the final best first, no order can do better than a ratio of 1: the
    report's bound says so (the held-out set's median could not reach 0.5 on a GPU for that reason)."""
    from kernelbot.agents.learning import TrainingRow

    first, second, third = fixed_order(rules)[:3]

    def row(episode: str, rule: str, reward: int, wall_s: float) -> TrainingRow:
        return TrainingRow(f"db:{episode}", f"repo:{episode}", rule, {"device": "cuda"}, reward, 1.5, wall_s)

    test = [
        row("a", first, 3, 10.0), row("a", second, 1, 10.0),  # the winner first in the fixed order
        row("b", first, 1, 30.0), row("b", second, 1, 30.0), row("b", third, 3, 20.0),
    ]  # fmt: skip
    train = [row("x", first, 1, 5.0), row("x", third, 3, 5.0)]
    result = evaluate_on(train, test, rules)
    summary = result.summary()
    # a: 1/1 whatever the order; b: the winner first takes 1 of the fixed order's 3 evaluations, 20 of its 80 s.
    assert [r.evaluations for r in result.best_possible] == [1, 1] and result.episodes == 2
    assert summary["median_evaluations_ratio_best_possible"] == (1 + 1 / 3) / 2
    assert summary["median_wall_s_ratio_best_possible"] == (1 + 20 / 80) / 2
    assert summary["median_evaluations_ratio"] >= summary["median_evaluations_ratio_best_possible"]


def test_kernelbot_train_writes_a_policy_the_agent_loads(
    history_url: str, rules: list[Rule], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "policy.json"
    assert main(["train", "--db", history_url, "--db", history_url, "--out", str(out), "--folds", "3"]) == 0
    policy = load_policy(out, rules)
    assert policy is not None and policy.trained["databases"] == 2
    assert policy.trained["quality"]["top1_learned"] == 1.0
    assert "evaluations" in capsys.readouterr().err
    empty = tmp_path / "empty.db"
    History.open(str(empty)).close()
    assert main(["train", "--db", str(empty), "--out", str(tmp_path / "x.json")]) == 2
    assert "no candidates" in capsys.readouterr().err


def test_trained_on_one_set_and_judged_on_a_disjoint_one(
    history_url: str, rules: list[Rule], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = str(tmp_path / "other.db")
    _write_history(other, operators=12, seed=1, repository="other/set")  # operators the policy never saw
    out = tmp_path / "policy.json"
    assert main(["train", "--db", history_url, "--evaluate-on", other, "--out", str(out)]) == 0
    quality = json.loads(out.read_text())["trained"]["quality"]
    assert quality["held_out"] == "databases" and quality["operators"] == 12 and quality["episodes"] == 12
    assert quality["top1_learned"] == 1.0 and quality["median_evaluations_ratio"] < 0.5
    assert "none trained on" in capsys.readouterr().err
    # The same database on both sides: nothing left to train on, said in one line.
    assert main(["train", "--db", history_url, "--evaluate-on", history_url, "--out", str(out)]) == 2
    assert "nothing is left to train on" in capsys.readouterr().err
    learned = evaluate_on(training_rows([history_url]), training_rows([other]), rules)
    assert learned.summary()["operators"] == 12 and learned.folds == 1


def test_the_shipped_runs_judged_on_another_sets_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks.train_policy --evaluate-on: the project's recorded runs train, a suite database of other
    problems is replayed, and the shipped policy file is left as it is."""
    from benchmarks import train_policy

    other = str(tmp_path / "heldout.db")
    _write_history(other, operators=6, seed=2, repository="heldout/set")
    shipped = tmp_path / "default.json"
    report = tmp_path / "cross_set.md"
    monkeypatch.setattr(
        sys, "argv", ["train_policy", "--out", str(shipped), "--evaluate-on", other, "--report", str(report)]
    )
    train_policy.main()
    quality = json.loads(capsys.readouterr().out)
    assert quality["operators"] == 6 and quality["episodes"] == 6 and quality["folds"] == 1
    assert "| median_evaluations_ratio |" in report.read_text()
    # Each replayed search: its final best, and the position the learned and the fixed order give it.
    searches = quality["searches"]
    assert len(searches) == 6 and {d["best"] for d in searches} == {LAUNCH_BOUND_WINNER, LARGE_WINNER}
    for d in searches:
        assert d["learned"].index(d["best"]) + 1 == d["evaluations"][0]
        assert d["fixed"].index(d["best"]) + 1 == d["evaluations"][1]
    assert report.read_text().count("| heldout/set:") == 6
    assert not shipped.exists()


def test_the_shipped_default_policy_loads(rules: list[Rule], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kernelbot.policy"):
        policy = search_policy(Config.model_validate({"agent": {"policy": "default"}}), Path("."), rules)
    assert policy is not None and caplog.records == []
    assert (asset_dir("policies") / "default.json").is_file()
    assert policy.trained["rows"] > 0


def test_search_trajectories_are_exported(history_url: str, tmp_path: Path) -> None:
    out = tmp_path / "search.jsonl"
    stats = export_trajectories(history_url, out, agent="search")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert stats.written == len(lines) == 40
    first = lines[0]
    assert first["agent"] == "search" and first["messages"] == []
    assert [c["origin"] for c in first["candidates"]] == list(RULES)
    assert all(c["wall_s"] > 0 for c in first["candidates"])
    assert first["operator"]["facts"]["eager_ms"] > 0 and first["final"]["origin"] == LAUNCH_BOUND_WINNER
    assert export_trajectories(history_url, tmp_path / "llm.jsonl", agent="llm").written == 0
    assert main(["export", "trajectories", "--agent", "search", "--db", history_url, "--out", str(out)]) == 0


def test_a_rule_tried_twice_in_one_search_replays_by_its_best_try() -> None:
    from kernelbot.agents.learning import Episode, TrainingRow, _replay

    def row(rule: str, reward: int, s: float | None) -> TrainingRow:
        return TrainingRow("e", "op", rule, {}, reward, s, 10.0)

    episode = Episode("e", "op", {}, [row("a", -1, None), row("b", 1, 1.0), row("a", 3, 2.0)])
    assert episode.target is not None and episode.target.rule == "a"
    assert _replay(["b", "a"], episode).evaluations == 2  # was a ValueError: the target's row not kept
    assert _replay(["a", "b"], episode).evaluations == 1


def test_candidates_cut_by_the_run_deadline_are_not_training_rows(tmp_path: Path) -> None:
    from kernelbot.harness.evaluate import OUT_OF_TIME
    from kernelbot.history import MeasurementRecord
    from kernelbot.reports.training import training_rows

    url = f"sqlite:///{tmp_path / 'h.db'}"
    cut = CandidateRecord("# a\n", RULES[0], "timeout", -1, wall_s=3.0,
                          measurement=MeasurementRecord("candidate", "timeout", reason=OUT_OF_TIME))  # fmt: skip
    hung = CandidateRecord("# b\n", RULES[1], "timeout", -1, wall_s=90.0,
                           measurement=MeasurementRecord("candidate", "timeout", reason="no answer in 90 s"))  # fmt: skip
    op = OperatorRecord("ops/x", "ops/x.py", "0" * 64, "unchanged", candidates=[cut, hung], facts={"ops": []})
    history = History.open(url)
    try:
        history.record_run(RunRecord("acme/ops", "local", None, operators=[op]))
    finally:
        history.close()
    assert [(r.rule, r.reward) for r in training_rows([url])] == [(RULES[1], -1)]  # a real hang still counts
