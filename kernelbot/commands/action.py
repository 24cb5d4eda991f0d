"""`kernelbot action`: one GitHub Actions run (pull_request, /kernelbot optimize), from event to posted results."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import yaml

from kernelbot import gitrepo
from kernelbot.commands.agent_args import add_time_argument
from kernelbot.config import CONFIG_PATH, Config, load_config, load_config_at, parse_config
from kernelbot.errors import ConfigError, GitError, KernelbotError, UsageError
from kernelbot.fingerprint import choose_device, collect
from kernelbot.github.client import GitHub
from kernelbot.github.gate import REACTIONS, CommandError, Decision, Event, gate
from kernelbot.github.payload import build_payload, publish, store
from kernelbot.github.types import GitHubError
from kernelbot.github.workflow import client, log_line, run_url, workflow_command, write_output, write_summary
from kernelbot.history import Trigger
from kernelbot.pipeline.optimizers import AgentChoice, AgentKind, check_endpoint, make_optimizer
from kernelbot.pipeline.pool import GpuPool
from kernelbot.pipeline.review import run_review


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("action", help="run inside GitHub Actions: gate the event, review, publish")
    parser.add_argument("--repo", type=Path, help="the checkout (default: $GITHUB_WORKSPACE or .)")
    parser.add_argument("--config", type=Path, help="config file (default: .github/kernelbot.yml)")
    parser.add_argument("--agent", choices=["search", "llm", "none"], help="default: the config's agent.kind")
    parser.add_argument("--budget", type=int, help="candidates per operator (default: config agent.budget)")
    parser.add_argument(
        "--db", metavar="URL|FILE", help="history database URL (default: the config's database)"
    )
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
    add_time_argument(
        parser, "wall-clock budget of the review, shared by its operators (default: harness.run_time_s)"
    )
    parser.add_argument("--head-sha", help="measure this head (pinned by an earlier --gate-only job)")
    parser.add_argument("--base-sha", help="the base that goes with --head-sha")
    parser.set_defaults(run=run)


def _config(repo: Path, path: Path | None, base_sha: str | None = None) -> Config:
    """The config as committed at the base revision when the event names one (never the PR's own: the
    checkout may be the head, and a PR does not pick its own triggers); else the checkout's."""
    if base_sha:
        try:
            gitrepo.resolve(repo, base_sha)
        except GitError:
            # A shallow checkout of the default branch (the gate job): trusted, so its config is used.
            print(f"kernelbot: base {base_sha[:12]} is not in this clone; using the checkout's config")
        else:
            return load_config_at(repo, base_sha, (path or Path(CONFIG_PATH)).as_posix())
    if path is None:
        return load_config(repo)
    try:
        return parse_config(yaml.safe_load((repo / path).read_text()), str(path))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path}: cannot read it ({type(exc).__name__}); check the action's `config` input"
        ) from None


def _event_base(event: Event, args: argparse.Namespace) -> str | None:
    if args.head_sha and args.base_sha:
        return str(args.base_sha)
    base = ((event.payload.get("pull_request") or {}).get("base") or {}).get("sha")
    return base if isinstance(base, str) and base else None


def _refuse(gh: GitHub | None, decision: Decision) -> None:
    if gh is None or decision.comment_id is None or decision.pr is None:
        return
    gh.react(decision.comment_id, REACTIONS["refused"])
    marker = f"<!-- kernelbot:reply:{decision.comment_id} -->"  # one reply per command, also on retries
    gh.upsert_comment(
        decision.pr, f"{marker}\nkernelbot did not run this command: {decision.reason}.", marker
    )


APPROVAL_MARKER = "<!-- kernelbot:approval -->"


def _say_approval(gh: GitHub | None, decision: Decision, label: str) -> None:
    """A fork PR's approval note: which head the label approved, or that a push made it stale (the label
    is taken off). Best effort: a fork PR's `pull_request` token is read-only, so the log says it too."""
    if gh is None or decision.pr is None:
        return
    try:
        if decision.stale_label:
            gh.remove_label(decision.pr, decision.stale_label)
            text = (
                f"New commits were pushed after the `{label}` label approved this pull request: head "
                f"`{(decision.head_sha or '')[:12]}` is not approved. The label approves only the head it "
                f"was added on, so it was taken off; a maintainer must look at the new commits and add it again."
            )
        else:
            text = (
                f"The `{label}` label approves head `{(decision.head_sha or '')[:12]}` only; a later push "
                f"needs a maintainer to add the label again."
            )
        gh.upsert_comment(decision.pr, f"{APPROVAL_MARKER}\nkernelbot: {text}", APPROVAL_MARKER)
    except GitHubError as exc:
        print(workflow_command("warning", f"could not update the approval on the pull request: {exc}"))


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if args.budget is not None and args.budget < 1:
        raise UsageError("--budget must be at least 1")
    repo = gitrepo.toplevel(args.repo or Path(env.get("GITHUB_WORKSPACE") or "."))
    event = Event.from_env(env)
    config = _config(repo, args.config, _event_base(event, args))
    token = env.get("GITHUB_TOKEN") or env.get("INPUT_TOKEN")
    if token:
        print(f"::add-mask::{token}")
    gh = client(env) if token else None
    print("::group::kernelbot: event")
    # --head-sha with --gate-only: the head read at the start of the accept job, checked against GitHub's;
    # without it: the head an earlier accept job pinned, measured as it is.
    accepted = bool(args.head_sha) and not args.gate_only
    decision = gate(event, config, gh, pin=args.head_sha, accepted=accepted)
    if decision.run and decision.command and decision.command.agent == "llm":
        try:  # the model and key are the maintainers' (base config, workflow secrets), checked before timing
            check_endpoint(AgentChoice("llm"), config, env)
        except KernelbotError as exc:
            decision.run, decision.refused = False, True
            decision.reason = f"`--agent llm` cannot run here: {exc}"
    print(f"{event.name}: {'run' if decision.run else 'skip'}: {decision.reason}")
    print("::endgroup::")
    if not decision.run:
        if decision.refused and not args.no_publish:
            _refuse(gh, decision)
        if decision.stale_label and not args.no_publish:
            _say_approval(gh, decision, config.triggers.fork_label)
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
    if decision.approved_by == "label" and args.gate_only:
        _say_approval(gh, decision, config.triggers.fork_label)
    if accepted:  # pinned by the accept job: a push since then must not slip in
        decision.base_sha = args.base_sha or decision.base_sha
    assert decision.base_sha and decision.head_sha
    if args.gate_only:
        write_output(
            env,
            {
                "accepted": "true",
                "head-sha": decision.head_sha,
                "base-sha": decision.base_sha,
                "pr": str(decision.pr),
                "said-at": decision.said_at,
            },
        )
        write_summary(env, f"## kernelbot\n\nAccepted: {decision.reason}.\n")
        return 0
    # `/kernelbot optimize [--agent llm]` names its agent (search by default); a pull request uses the config's.
    agent = decision.command.agent if decision.command else (args.agent or config.agent.kind)
    if agent == "llm":
        check_endpoint(AgentChoice("llm"), config, env)
    fingerprint = collect(choose_device(args.device, config.device))
    pool, pool_note = GpuPool.for_runner(env) if fingerprint.device == "cuda" else (None, None)
    if pool_note:
        print(workflow_command("warning", pool_note))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = decision.command.operators if decision.command else ()
    budget = (decision.command.budget if decision.command else None) or args.budget
    optimizer = (
        make_optimizer(AgentChoice(cast(AgentKind, agent), budget=budget), fingerprint, out)
        if agent in ("search", "llm")
        else None
    )
    print("::group::kernelbot: measure")
    # The pinned SHAs are measured in their own worktrees, whatever the checkout moved to since.
    review = run_review(
        repo,
        decision.base_sha,
        decision.head_sha,
        fingerprint,
        optimizer=optimizer,
        time_s=args.time_s,
        optimize_only=tuple(names),
        pool=pool,
        progress=lambda line: print(log_line(line)),
    )
    # The workflow's repository, not the clone's remote: the publish job checks the payload against it.
    review.repository = env.get("GITHUB_REPOSITORY") or review.repository
    print("::endgroup::")
    trigger = cast(Trigger, "command" if decision.command else "pull_request")
    problem = store(review, args.db or config.database, trigger, decision.pr, gitrepo.work_dir(repo))
    for warning in review.warnings + ([problem] if problem else []):
        print(workflow_command("warning", warning))
    pointer = (
        f"The full report is in the `kernelbot-report` artifact of {run_url(env) or 'this workflow run'}."
    )
    payload, full = build_payload(
        review,
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
    if review.interrupted is not None:  # stored and written, but a partial review is not posted
        write_output(env, outputs)
        return 128 + signal.Signals[review.interrupted]
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
