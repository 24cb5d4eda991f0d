"""`kernelbot action`: one GitHub Actions run (pull_request, /kernelbot optimize), from event to posted results."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import yaml

from kernelbot import gitrepo
from kernelbot.action import (
    REACTIONS,
    CommandError,
    Decision,
    Event,
    build_payload,
    client,
    gate,
    publish,
    run_url,
    store,
    workflow_command,
    write_output,
    write_summary,
)
from kernelbot.agents.rules import load_rules, rewrites_for
from kernelbot.agents.search import SearchAgent
from kernelbot.config import Config, load_config, parse_config
from kernelbot.errors import ConfigError, KernelbotError
from kernelbot.fingerprint import Fingerprint, choose_device, collect
from kernelbot.github import GitHub, GitHubError
from kernelbot.history import Trigger
from kernelbot.optimize import OptimizeResult, optimize_operator
from kernelbot.review import Optimizer, run_review
from kernelbot.spec import OperatorSpec

SKIPPED = "not named in the /kernelbot command"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("action", help="run inside GitHub Actions: gate the event, review, publish")
    parser.add_argument("--repo", type=Path, help="the checkout (default: $GITHUB_WORKSPACE or .)")
    parser.add_argument("--config", type=Path, help="config file (default: .github/kernelbot.yml)")
    parser.add_argument("--agent", choices=["search", "llm", "none"], help="default: the config's agent.kind")
    parser.add_argument("--budget", type=int, help="candidates per operator (default: config agent.budget)")
    parser.add_argument("--db", metavar="URL", help="history database URL (default: the config's database)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    parser.add_argument("--fail-on-regression", action="store_true", help="fail the check run and exit 1")
    parser.add_argument("--out", type=Path, default=Path("kernelbot-out"), help="payload and full report")
    parser.add_argument(
        "--no-publish",
        action="store_true",
        help="write the payload for a separate publish job (`kernelbot publish --payload`) instead of posting",
    )
    parser.add_argument(
        "--gate-only",
        action="store_true",
        help="only decide: react 👀 (or 😕 and a reply) and write accepted/head-sha/base-sha outputs",
    )
    parser.add_argument("--head-sha", help="measure this head (pinned by an earlier --gate-only job)")
    parser.add_argument("--base-sha", help="the base that goes with --head-sha")
    parser.set_defaults(run=run)


def _config(repo: Path, path: Path | None) -> Config:
    if path is None:
        return load_config(repo)
    try:
        return parse_config(yaml.safe_load((repo / path).read_text()), str(path))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path}: cannot read it ({type(exc).__name__}); check the action's `config` input"
        ) from None


def _optimizer(fingerprint: Fingerprint, out: Path, budget: int | None, names: tuple[str, ...]) -> Optimizer:
    rules = load_rules()
    rewrites = rewrites_for(rules)

    def optimizer(spec: OperatorSpec, root: Path, cfg: Config) -> OptimizeResult:
        if names and spec.name not in names:
            raise KernelbotError(SKIPPED)
        return optimize_operator(
            spec,
            root,
            cfg,
            fingerprint,
            SearchAgent(rules),
            out_dir=out,
            budget=budget,
            rules_for_analysis=rewrites,
        )

    return optimizer


def _refuse(gh: GitHub | None, decision: Decision) -> None:
    if gh is None or decision.comment_id is None or decision.pr is None:
        return
    gh.react(decision.comment_id, REACTIONS["refused"])
    marker = f"<!-- kernelbot:reply:{decision.comment_id} -->"  # one reply per command, also on retries
    gh.upsert_comment(
        decision.pr, f"{marker}\nkernelbot did not run this command: {decision.reason}.", marker
    )


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    repo = gitrepo.toplevel(args.repo or Path(env.get("GITHUB_WORKSPACE") or "."))
    config = _config(repo, args.config)
    event = Event.from_env(env)
    token = env.get("GITHUB_TOKEN") or env.get("INPUT_TOKEN")
    if token:
        print(f"::add-mask::{token}")
    gh = client(env) if token else None
    print("::group::kernelbot: event")
    decision = gate(event, config, gh)
    if decision.run and decision.command and decision.command.agent == "llm":
        decision.run, decision.refused = False, True
        decision.reason = "`--agent llm` is not available in this version; use `--agent search`"
    print(f"{event.name}: {'run' if decision.run else 'skip'}: {decision.reason}")
    print("::endgroup::")
    if not decision.run:
        if decision.refused and not args.no_publish:
            _refuse(gh, decision)
        write_output(
            env,
            {
                "run-id": "",
                "verdict-summary": f"skipped: {decision.reason}",
                "comment-url": "",
                "accepted": "false",
            },
        )
        write_summary(env, f"## kernelbot\n\nNothing measured: {decision.reason}.\n")
        return 0
    if gh is not None and decision.comment_id is not None and not args.no_publish:
        gh.react(decision.comment_id, REACTIONS["accepted"])
    if args.head_sha:  # pinned by the accept job: a push since then must not slip in
        decision.head_sha, decision.base_sha = args.head_sha, args.base_sha or decision.base_sha
    assert decision.base_sha and decision.head_sha
    if args.gate_only:
        write_output(
            env,
            {
                "accepted": "true",
                "head-sha": decision.head_sha,
                "base-sha": decision.base_sha,
                "pr": str(decision.pr),
            },
        )
        return 0
    agent = "search" if decision.kind == "optimize" else (args.agent or config.agent.kind)
    if agent == "llm":
        raise CommandError("--agent llm: the model agent is not in this version yet; use search or none")
    fingerprint = collect(choose_device(args.device, config.device))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = decision.command.operators if decision.command else ()
    budget = (decision.command.budget if decision.command else None) or args.budget
    optimizer = _optimizer(fingerprint, out, budget, names) if agent == "search" else None
    print("::group::kernelbot: measure")
    # The pinned SHAs are measured in their own worktrees, whatever the checkout moved to since.
    review = run_review(
        repo, decision.base_sha, decision.head_sha, fingerprint, optimizer=optimizer, progress=print
    )
    for op in review.operators:
        if op.error == f"optimization: {SKIPPED}":
            op.error = None
    print("::endgroup::")
    trigger = cast(Trigger, "command" if decision.command else "pull_request")
    problem = store(review, args.db or config.database, trigger, decision.pr, repo / ".kernelbot")
    for warning in review.warnings + ([problem] if problem else []):
        print(workflow_command("warning", warning))
    pointer = (
        f"The full report is in the `kernelbot-report` artifact of {run_url(env) or 'this workflow run'}."
    )
    payload, full = build_payload(
        review.to_json(),
        review.summary(),
        pr=decision.pr,
        fail_on_regression=args.fail_on_regression,
        pointer=pointer,
        read_head=lambda p: (gitrepo.read_file(repo, review.head, p) or b"").decode(errors="replace") or None,
        comment_id=decision.comment_id,
    )
    (out / "report.md").write_text(full)
    (out / "review.json").write_text(json.dumps(review.to_json(), indent=2, default=str))
    (out / "payload.json").write_text(json.dumps(payload.to_json(), indent=2))
    for a in payload.annotations:
        kind = "error" if a["level"] == "failure" else "warning"
        print(workflow_command(kind, a["message"], file=a["path"], line=a["start_line"], title=a["title"]))
    write_summary(env, full)
    outputs = {"run-id": str(review.run_id or ""), "verdict-summary": review.summary(), "comment-url": ""}
    code = 1 if payload.check_conclusion == "failure" else 0
    if not args.no_publish:
        if gh is None:
            raise CommandError("publishing needs GITHUB_TOKEN; pass --no-publish to only write the payload")
        try:
            outputs["comment-url"] = publish(gh, payload).get("comment", "")
        except GitHubError as exc:
            replay = (
                f"kernelbot publish --run-id {review.run_id}"
                if review.run_id
                else f"kernelbot publish --payload {out / 'payload.json'}"
            )
            print(
                workflow_command(
                    "error", f"publishing failed: {exc}; the results are stored: replay with `{replay}`"
                )
            )
            code = max(code, 1)
    write_output(env, outputs)
    print(f"kernelbot: {review.summary()}", file=sys.stderr)
    return code
