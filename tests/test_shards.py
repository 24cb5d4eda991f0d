"""A review over a fleet: `kernelbot plan` → `review --shard K/N` per runner → `kernelbot merge`, one comment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelbot.cli import main
from kernelbot.commands import merge as merge_cmd
from kernelbot.errors import UsageError
from kernelbot.github import workflow
from kernelbot.github.client import GitHub
from kernelbot.history import History
from kernelbot.history.queries import operator_costs
from kernelbot.pipeline.shards import Plan, ShardResult, balance, merge, read_artifacts
from kernelbot.render import STICKY_MARKER
from tests.gitrepo_builder import GitRepoBuilder
from tests.servers.github import GitHubImitation, Pull

CONFIG = """\
harness:
  time_budget_s: 0.2
  max_samples: 12
  timeout_s: 60
thresholds:
  regression: 0.5   # a shared 2-core box: only the plan and merge are under test here
  max_rounds: 0
"""


def tiny_op(scale: float, comment: str = "") -> str:
    return f"""
import torch
{comment}

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * {scale}

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
"""


FILES = [f"op{i:02d}" for i in range(10)]
NAMES = [f"ops/{f}" for f in FILES]  # a KernelBench file's operator is named by its path
TIMED = ("ops/op01", "ops/op04", "ops/op07")


@pytest.fixture(scope="module")
def pr(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepoBuilder, str, str]:
    """A repository whose pull request touches ten small operators: three in their code (timed), seven in
    comments only (cosmetic: listed, not timed), so that the round trip stays fast on a 2-core box."""
    repo = GitRepoBuilder(tmp_path_factory.mktemp("fleet") / "repo")
    files: dict[str, str | None] = {f"{n}.py": tiny_op(2.0) for n in NAMES}
    base = repo.commit({".github/kernelbot.yml": CONFIG, **files}, "ten operators")
    changed = {f"{n}.py": tiny_op(3.0) if n in TIMED else tiny_op(2.0, "# reworded") for n in NAMES}
    head = repo.commit(changed, "change them all")
    return repo, base, head


def test_balance_spreads_cost_and_falls_back_to_equal_counts() -> None:
    groups = balance({"big": 90.0, "a": 30.0, "b": 30.0, "c": 30.0}, 2)
    assert groups == [["big"], ["a", "b", "c"]]
    equal = balance({n: 1.0 for n in NAMES}, 3)
    assert sorted(len(g) for g in equal) == [3, 3, 4] and sorted(n for g in equal for n in g) == NAMES
    assert balance({n: 1.0 for n in NAMES}, 3) == equal  # every job computes the same split
    assert balance({"a": 1.0}, 4) == [["a"]]  # never an empty shard


def test_plan_uses_recorded_wall_times(pr: tuple[GitRepoBuilder, str, str], tmp_path: Path) -> None:
    repo, base, head = pr
    db = f"sqlite:///{tmp_path / 'h.db'}"
    # One past run: op01 took 100 s, the rest 10 s each.
    from kernelbot.fingerprint import collect
    from kernelbot.pipeline.results import OperatorResult, ReviewResult
    from kernelbot.pipeline.store import store_review

    past = ReviewResult("octo-org/kernels", base, base, collect("cpu"))
    for n in NAMES:
        op = OperatorResult(n, f"{n}.py", "modified", [], 0.05, spec_hash=n)
        op.wall_s = 100.0 if n == "ops/op01" else 10.0
        past.operators.append(op)
    assert store_review(past, db, trigger="local", fallback_dir=tmp_path)[1] is None
    history = History.open(db)
    try:
        assert operator_costs(history, "octo-org/kernels", ["ops/op01", "ops/op04", "nope"]) == {
            "ops/op01": 100.0,
            "ops/op04": 10.0,
        }
    finally:
        history.close()
    out = tmp_path / "plan.json"
    env = {"GITHUB_REPOSITORY": "octo-org/kernels"}
    args = ["plan", "--repo", str(repo.root), "--base", base, "--head", head, "--shards", "3"]
    from kernelbot.cli import build_parser

    parsed = build_parser("plan").parse_args([*args, "--db", db, "--out", str(out)])
    assert parsed.run(parsed, env) == 0
    plan = Plan.from_json(json.loads(out.read_text()))
    assert [op.name for op in plan.shards[0]] == ["ops/op01"]  # the expensive one alone
    assert sorted(len(s) for s in plan.shards) == [1, 4, 5]  # cosmetic ones cost nothing: spread by count
    assert {op.name for s in plan.shards for op in s if op.recorded} == set(TIMED)
    matrix = plan.matrix()["include"]
    assert [m["shard"] for m in matrix] == [1, 2, 3] and matrix[0]["operators"] == "ops/op01"


@pytest.mark.slow  # ~35 s; the merge's refusals and the plan stay in CI
def test_plan_merge_round_trip_names_the_missing_shard(
    pr: tuple[GitRepoBuilder, str, str],
    tmp_path: Path,
    github_api: GitHubImitation,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo, base, head = pr
    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    plan_file = tmp_path / "plan.json"
    assert main(["plan", "--repo", str(repo.root), "--base", base, "--head", head, "--shards", "3",
                 "--db", db, "--out", str(plan_file)]) == 0  # fmt: skip
    matrix = json.loads(capsys.readouterr().out)
    assert [m["shard"] for m in matrix["include"]] == [1, 2, 3]
    shares = [m["operators"].split(",") for m in matrix["include"]]
    assert sorted(n for s in shares for n in s) == NAMES and sorted(len(s) for s in shares) == [3, 3, 4]
    # Shards 1 and 3 report; shard 2's runner died before uploading anything.
    artifacts = tmp_path / "artifacts"
    for k in (1, 3):
        code = main(["review", "--repo", str(repo.root), "--base", base, "--head", head, "--shard", f"{k}/3",
                     "--plan", str(plan_file), "--artifact", str(artifacts / f"shard-{k}"),
                     "--db", str(tmp_path / f"runner-{k}.db"), "--pr", "21"])  # fmt: skip
        assert code == 0
    results = read_artifacts([artifacts])
    assert [(r.shard, r.operators) for r in results] == [(1, shares[0]), (3, shares[2])]
    for r in results:
        assert {op.name for op in r.review.operators} == set(r.operators)
        timed = [op for op in r.review.operators if op.name in TIMED]
        assert timed and all(op.head is not None and op.head.ok and op.verdict for op in timed)
        assert all(op.change == "cosmetic" for op in r.review.operators if op.name not in TIMED)

    # The merge job: one comment on the PR, shard 2 and its operators named in it.
    github_api.pulls[21] = Pull(21, head, base, {})
    for key, value in {
        "GITHUB_REPOSITORY": github_api.repository,
        "GITHUB_API_URL": github_api.base_url,
        "GITHUB_TOKEN": github_api.token,
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }.items():
        monkeypatch.setenv(key, value)
    real = workflow.client

    def client(env: Any, **kw: Any) -> GitHub:
        return real(env, seconds_between_writes=0, seconds_between_requests=0, backoff=0.01, **kw)

    monkeypatch.setattr(merge_cmd, "client", client)
    out = tmp_path / "out"
    code = main(["merge", str(artifacts), "--plan", str(plan_file), "--out", str(out), "--db", db,
                 "--publish", "--pr", "21", "--head-sha", head])  # fmt: skip
    assert code == 1  # published, and the job fails so that shard 2 is re-run
    comments = [c for c in github_api.comments_on(21) if STICKY_MARKER in c["body"]]
    assert len(comments) == 1
    body = comments[0]["body"]
    missing = ", ".join(shares[1])
    assert f"shard 2/3 did not report ({missing})" in body
    for name in NAMES:  # every operator has its row: measured, or named as not measured
        assert f"`{name}`" in body
    for name in shares[1]:
        assert f"`{name}`: not measured: shard 2/3 did not report" in body
    assert len(github_api.check_runs) == 1
    assert "missing-shards=2" in (tmp_path / "output").read_text()
    merged = json.loads((out / "review.json").read_text())
    assert [op["name"] for op in merged["operators"]] == NAMES
    # The shared history (the shards ran with their runners' own databases, no secret): the merged review
    # as one completed run holding every operator, and shard 2 as a failed run naming its operators.
    history = History.open(db)
    try:
        runs = history.runs()
        [done] = [history.get_run(r.run_id) for r in runs if r.status == "completed"]
    finally:
        history.close()
    assert sorted(r.status for r in runs) == ["completed", "failed"]
    failed = next(r for r in runs if r.status == "failed")
    assert missing in (failed.error or "")
    assert done.report is not None and [op["name"] for op in done.report["operators"]] == NAMES


def test_merge_refuses_shards_of_another_head(pr: tuple[GitRepoBuilder, str, str]) -> None:
    _, base, head = pr
    from kernelbot.fingerprint import collect
    from kernelbot.pipeline.results import ReviewResult

    fp = collect("cpu")
    one = ShardResult(1, 2, [], ReviewResult("o/r", base, head, fp))
    other = ShardResult(2, 2, [], ReviewResult("o/r", base, base, fp))
    with pytest.raises(UsageError, match="not the"):
        merge([one, other])
    merged = merge([one])  # no plan: the missing shard is named, its operators unknown
    assert merged.missing == {2: []}
    assert merged.review.warnings[0].startswith("shard 2/2 did not report:")


def test_a_forged_or_malformed_artifact_is_refused_or_kept_to_its_own_shard(
    pr: tuple[GitRepoBuilder, str, str], tmp_path: Path
) -> None:
    """Artifacts come from runners that ran the PR's code: a shard speaks only for the operators the plan gave
    it (a row for another shard's operator is left out, a dropped one is "not reported"), and an artifact that
    does not rebuild, or whose name and content disagree, is one line naming the file."""
    _, base, head = pr
    from kernelbot.fingerprint import collect
    from kernelbot.pipeline.results import OperatorResult, ReviewResult
    from kernelbot.pipeline.shards import Planned

    fp = collect("cpu")
    plan = Plan("o/r", base, head, [[Planned("ops/a", "ops/a.py", "modified", 1.0, True)],
                                    [Planned("ops/b", "ops/b.py", "modified", 1.0, True)]])  # fmt: skip
    forged = ReviewResult("o/r", base, head, fp)
    fake = OperatorResult("ops/a", "ops/a.py", "modified", [], 0.03, verdict="improvement")
    forged.operators.append(fake)  # shard 2 speaks for shard 1's operator and drops its own
    honest = ReviewResult("o/r", base, head, fp)
    honest.operators.append(OperatorResult("ops/a", "ops/a.py", "modified", [], 0.03, verdict="regression"))
    merged = merge([ShardResult(1, 2, ["ops/a"], honest), ShardResult(2, 2, ["ops/b"], forged)], plan).review
    rows = {op.name: op for op in merged.operators}
    assert [op.verdict for op in merged.operators if op.name == "ops/a"] == ["regression"]
    assert rows["ops/b"].error is not None and rows["ops/b"].error.startswith("not reported: shard 2/2")
    assert any("did not give it, left out: ops/a" in w for w in merged.warnings)
    with pytest.raises(UsageError, match=r"shard 3, not one of the 1\.\.2"):
        merge([ShardResult(3, 2, [], honest)], plan)

    good = ShardResult(1, 2, ["ops/a"], honest).to_json()
    cases = {
        "list": [good],
        "wall": {**good, "review": {**good["review"], "wall_s": "9"}},
        "ratio": {**good, "review": {**good["review"], "operators": [{**good["review"]["operators"][0], "ratio": "x"}]}},
    }  # fmt: skip
    for name, data in cases.items():
        folder = tmp_path / name / "kernelbot-shard-1"
        folder.mkdir(parents=True)
        (folder / "kernelbot-shard-1-of-2.json").write_text(json.dumps(data))
        with pytest.raises(
            UsageError, match=r"cannot read shard artifact .*kernelbot-shard-1-of-2\.json: \w+"
        ):
            read_artifacts([tmp_path / name])
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    (renamed / "kernelbot-shard-2-of-2.json").write_text(json.dumps(good))  # shard 1's content
    with pytest.raises(UsageError, match="its name says one shard and its content another"):
        read_artifacts([renamed])


def test_merge_publish_needs_the_trusted_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", str(tmp_path), "--publish"]) == 2
    assert "merge --publish needs --plan" in capsys.readouterr().err


# -- one PostgreSQL shared by the fleet ---------------------------------------------------------------

SHARDS_AT_ONCE = 3


def _shard_writer(url: str, k: int, head: str, barrier: Any, results: Any) -> None:
    from kernelbot.fingerprint import collect
    from kernelbot.harness.results import Evaluation, Timing
    from kernelbot.pipeline.results import OperatorResult, ReviewResult
    from kernelbot.pipeline.store import store_review

    try:
        review = ReviewResult("octo-org/kernels", "b" * 40, head, collect("cpu"))
        for i in range(4):  # shard k's four operators, each timed at base and head
            op = OperatorResult(
                f"ops/s{k}_{i}", f"ops/s{k}_{i}.py", "modified", [], 0.05, spec_hash=f"{k}{i}"
            )
            timing = Timing(1.0 + i, 1.0 + i, 0.01, (0.99, 1.01), 12, 1, "rse", raw_ms=[1.0] * 12)
            op.base, op.head = (
                Evaluation("base", "ok", timing=timing),
                Evaluation("head", "ok", timing=timing),
            )
            op.verdict, op.ratio, op.wall_s = "no_change", 1.0, 5.0 + k
            review.operators.append(op)
        barrier.wait(timeout=60)  # the three runners store at the same moment
        run_id, problem = store_review(
            review, url, trigger="pull_request", pr_number=7, fallback_dir=Path("/nonexistent")
        )
        results.put(("ok", k, run_id) if problem is None else ("error", k, problem))
    except BaseException as err:  # reported to the parent
        results.put(("error", k, f"{type(err).__name__}: {err}"))


@pytest.mark.postgres
def test_three_shards_share_one_postgres_without_losing_a_row(postgres_url: str) -> None:
    import multiprocessing

    History.open(postgres_url, auto_upgrade=True).close()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(SHARDS_AT_ONCE), ctx.Queue()
    procs = [
        ctx.Process(target=_shard_writer, args=(postgres_url, k, "h" * 40, barrier, results))
        for k in range(1, SHARDS_AT_ONCE + 1)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    assert [o for o in outcomes if o[0] == "error"] == []
    assert len({o[2] for o in outcomes}) == SHARDS_AT_ONCE
    history = History.open(postgres_url)
    try:
        assert history.count("runs") == SHARDS_AT_ONCE
        assert history.count("measurements") == SHARDS_AT_ONCE * 4 * 2
        assert history.count("commits") == 2 and history.count("repositories") == 1
        names = [f"ops/s{k}_{i}" for k in range(1, 4) for i in range(4)]
        costs = operator_costs(history, "octo-org/kernels", names)  # what the next plan balances on
        assert costs == {f"ops/s{k}_{i}": 5.0 + k for k in range(1, 4) for i in range(4)}
    finally:
        history.close()
