"""The GitHub Actions front end: read the event, gate it, run the pipeline, store, render, publish."""

from __future__ import annotations

import ast
import builtins
import json
import shlex
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelbot.config import Config
from kernelbot.errors import KernelbotError, UsageError
from kernelbot.github import (
    COMMENT_LIMIT,
    PERMISSION_RANK,
    Annotation,
    CheckRun,
    GitHub,
    GitHubError,
    PullInfo,
    Suggestion,
    parse_time,
)
from kernelbot.history import RunRecord, Trigger
from kernelbot.render import STICKY_MARKER, render
from kernelbot.review import OperatorResult, ReviewResult
from kernelbot.store import store_review

# NOTE: nothing a commenter writes reaches a shell or git's option parser: the comment is split with
# shlex in Python, operator names are only compared with detected names, and SHAs come from GitHub.

CHECK_NAME = "kernelbot"
STEP_SUMMARY_LIMIT = 1024 * 1024
COMMAND = "/kernelbot"
REACTIONS = {"accepted": "eyes", "done": "rocket", "refused": "confused"}


class CommandError(KernelbotError):
    """A `/kernelbot` comment that cannot be run as written (answered with 😕 and a reply)."""


@dataclass(frozen=True)
class Command:
    """A parsed `/kernelbot optimize [OPERATOR…] [--budget N] [--agent search|llm]`."""

    operators: tuple[str, ...]  # empty: every changed operator
    budget: int | None
    agent: str  # "search" or "llm"


def parse_command(body: str) -> Command | None:
    """None when the comment is not addressed to kernelbot; CommandError when it is, but malformed."""
    first = (body or "").strip().splitlines()[0] if (body or "").strip() else ""
    if not (first == COMMAND or first.startswith(COMMAND + " ")):
        return None
    try:
        words = shlex.split(first)[1:]
    except ValueError as exc:
        raise CommandError(f"cannot read the command: {exc}") from None
    if not words or words[0] != "optimize":
        raise CommandError(
            "unknown command; use `/kernelbot optimize [OPERATOR…] [--budget N] [--agent search|llm]`"
        )
    operators: list[str] = []
    budget, agent = None, "search"
    it = iter(words[1:])
    for word in it:
        if word in ("--budget", "--agent"):
            value = next(it, None)
            if value is None:
                raise CommandError(f"{word} needs a value")
            if word == "--budget":
                if not value.isdigit() or not 1 <= int(value) <= 64:
                    raise CommandError("--budget takes a whole number from 1 to 64")
                budget = int(value)
            elif value not in ("search", "llm"):
                raise CommandError("--agent takes `search` or `llm`")
            else:
                agent = value
        elif word.startswith("-"):
            raise CommandError(f"unknown option {word[:40]!r}; options are --budget N and --agent search|llm")
        elif len(word) > 200 or not all(c.isalnum() or c in "/_.-:" for c in word):
            raise CommandError(f"{word[:40]!r} is not an operator name")
        else:
            operators.append(word)
    return Command(tuple(operators), budget, agent)


@dataclass(frozen=True)
class Event:
    name: str  # GITHUB_EVENT_NAME
    payload: dict[str, Any]  # the JSON at GITHUB_EVENT_PATH

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Event:
        name, path = env.get("GITHUB_EVENT_NAME"), env.get("GITHUB_EVENT_PATH")
        if not name or not path:
            raise UsageError(
                "GITHUB_EVENT_NAME and GITHUB_EVENT_PATH must be set (run inside GitHub Actions)"
            )
        try:
            payload = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the event payload {path}: {type(exc).__name__}") from None
        return cls(name, payload)


@dataclass
class Decision:
    """What the gate decided for one event."""

    run: bool  # measure or not
    reason: str  # one line: why (shown in the log and the step summary)
    kind: str = "review"  # "review" / "optimize" / "weekly"
    pr: int | None = None
    base_sha: str | None = None
    head_sha: str | None = None  # the one head this approval covers, pinned when the trigger was accepted
    command: Command | None = None
    comment_id: int | None = None  # the slash command's comment
    refused: bool = False  # a slash command that was refused (😕 and a reply)
    stale_label: str | None = None  # a fork PR's run label that approved an earlier head (taken off)
    approved_by: str = ""  # "label" / "command" / "same repository"
    said_at: str = ""  # the slash command's comment time (GitHub's, from the event)


def _is_fork(pr: Mapping[str, Any]) -> bool:
    head_repo = (pr.get("head") or {}).get("repo") or {}
    base_repo = (pr.get("base") or {}).get("repo") or {}
    return head_repo.get("full_name") != base_repo.get("full_name")


def _pull_request_gate(p: Mapping[str, Any], config: Config) -> Decision:
    """Same-repository PRs run on every push; a fork PR runs once per approval, for the head it was given on.

    A maintainer's `kernelbot:run` label approves the head of the `labeled` event (the payload's
    pull_request.head.sha, GitHub's snapshot when the label was added) and nothing after it: on a later
    `synchronize` (or `reopened`) the label still sits on the PR, but it no longer approves anything.
    """
    pr = p.get("pull_request") or {}
    action = p.get("action")
    label = config.triggers.fork_label
    if action not in ("opened", "synchronize", "reopened", "labeled"):
        return Decision(False, f"pull_request {action}: nothing to do")
    if action == "labeled" and (p.get("label") or {}).get("name") != label:
        return Decision(False, "a label other than the run label was added")
    number, base, head = pr.get("number"), pr["base"]["sha"], pr["head"]["sha"]
    if not _is_fork(pr):
        return Decision(True, "pull request", "review", number, base, head, approved_by="same repository")
    if action == "labeled":
        who = (p.get("sender") or {}).get("login", "a maintainer")
        return Decision(
            True,
            f"pull request from a fork: @{who}'s `{label}` label approves head {head[:12]} (only that commit)",
            "review", number, base, head, approved_by="label",
        )  # fmt: skip
    labels = {lab.get("name") for lab in pr.get("labels") or []}
    if label in labels:
        return Decision(
            False,
            f"pull request from a fork: head {head[:12]} was pushed after the `{label}` label approved an "
            f"earlier head; a maintainer must look at the new commits and add the label again",
            "review", number, base, head, stale_label=label,
        )  # fmt: skip
    return Decision(
        False, f"pull request from a fork: waiting for a maintainer's `{label}` label or command", pr=number
    )


def gate(
    event: Event, config: Config, gh: GitHub | None, *, pin: str | None = None, accepted: bool = False
) -> Decision:
    """Who may run what (github.md): same-repository PRs, labelled forks, and writers' commands.

    `pin`: for a slash command, the head read at the very start of the accept job; `accepted`: an earlier
    accept job already took the command and pinned `pin` (the measure job), so it is used as it is.
    """
    p = event.payload
    if event.name == "pull_request":
        decision = _pull_request_gate(p, config)
        if decision.run and pin and pin != decision.head_sha:
            raise UsageError(f"--head-sha {pin[:12]} is not the head of this event ({decision.head_sha})")
        return decision
    if event.name == "issue_comment":
        issue, comment = p.get("issue") or {}, p.get("comment") or {}
        if p.get("action") != "created" or not issue.get("pull_request"):
            return Decision(False, "not a new comment on a pull request")
        try:
            command = parse_command(comment.get("body") or "")
        except CommandError as exc:
            return Decision(
                False, str(exc), "optimize", issue.get("number"), comment_id=comment.get("id"), refused=True
            )
        if command is None:
            return Decision(False, "the comment is not a /kernelbot command")
        if gh is None:
            raise UsageError("a slash command needs a GitHub token to check the commenter's permission")
        login = (comment.get("user") or {}).get("login", "")
        role = gh.permission(login)
        needed = config.triggers.min_permission
        decision = Decision(
            False, "", "optimize", issue["number"], command=command, comment_id=comment.get("id")
        )
        decision.said_at = str(comment.get("created_at") or "")
        if PERMISSION_RANK.get(role, 0) < PERMISSION_RANK[needed]:
            decision.reason = f"@{login} has {role} permission; `/kernelbot` needs {needed} or above"
            decision.refused = True
            return decision
        pull = gh.pull(issue["number"])
        decision.base_sha, decision.head_sha = pull.base_sha, pin or pull.head_sha
        if not accepted:
            problem = _pushed_after_the_command(gh, pull, pin, decision.said_at)
            if problem:
                decision.reason, decision.refused = problem, True
                return decision
        decision.run, decision.approved_by = True, "command"
        decision.reason = f"/kernelbot optimize from @{login} ({role}) approves head {decision.head_sha[:12]}"
        return decision
    if event.name in ("schedule", "workflow_dispatch"):
        return Decision(False, "the weekly report is not part of this version", "weekly")
    return Decision(False, f"event {event.name} is not handled")


def _pushed_after_the_command(gh: GitHub, pull: PullInfo, pin: str | None, said_at: str) -> str | None:
    """Why the head cannot be the one the commenter saw, or None. A command approves the head as it was
    when the comment was written: a push after the comment (before or during the accept job) is refused."""
    if pin and pin != pull.head_sha:
        return (
            f"new commits were pushed after the command (the head moved from {pin[:12]} to "
            f"{pull.head_sha[:12]} while it was being accepted); look at them and comment again"
        )
    said = parse_time(said_at)
    pushed = gh.head_pushed_at(pull)
    if pushed is not None and said is not None and pushed >= said:
        return (
            f"head {pull.head_sha[:12]} was pushed at {pushed:%Y-%m-%d %H:%M:%S} UTC, after the command "
            f"({said:%H:%M:%S} UTC); look at the new commits and comment again"
        )
    if pull.is_fork and (pushed is None or said is None):
        return (
            f"cannot tell when the fork's head {pull.head_sha[:12]} was pushed (GitHub shows no push of it "
            f"in {pull.head_repo}'s activity); a fork's head runs only when it predates the command"
        )
    return None


# -- suggestions -------------------------------------------------------------------------------------


def _forward(tree: ast.Module, cls: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    return None


def suggestion_for(op: Mapping[str, Any], head_source: str) -> Suggestion | None:
    """A candidate whose ModelNew only replaces `forward` becomes a suggestion on Model.forward's lines."""
    cand = op.get("best_candidate") or {}
    source = cand.get("source")
    if not source or not str(op.get("path", "")).endswith(".py"):
        return None
    try:
        head_tree, cand_tree = ast.parse(head_source), ast.parse(source)
    except SyntaxError:
        return None
    old, new = _forward(head_tree, "Model"), _forward(cand_tree, "ModelNew")
    new_cls = next((n for n in cand_tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if old is None or new is None or new_cls is None or len(new_cls.body) != 1:
        return None
    defined = {n.id for n in ast.walk(head_tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    defined |= {
        a.asname or a.name.split(".")[0]
        for n in ast.walk(head_tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    args = {a.arg for a in ast.walk(new) if isinstance(a, ast.arg)}
    args |= {n.id for n in ast.walk(new) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    used = {n.id for n in ast.walk(new) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if used - defined - args - set(dir(builtins)):
        return None  # it needs an import the file lacks: the sticky comment carries the full source
    lines = source.splitlines()
    body = textwrap.dedent("\n".join(lines[new.lineno - 1 : new.end_lineno]))
    indent = " " * old.col_offset
    start = min([old.lineno, *(d.lineno for d in old.decorator_list)])
    assert old.end_lineno is not None
    return Suggestion(
        op["path"],
        start,
        old.end_lineno,
        textwrap.indent(body, indent),
        f"**kernelbot**: `{cand.get('origin')}` is verified correct and "
        f"{cand.get('speedup_vs_eager') or 0:.1f}× faster than eager (reward {cand.get('reward')}).",
    )


# -- rendering ---------------------------------------------------------------------------------------


def truncate(body: str, limit: int, pointer: str) -> str:
    """Cut `body` under `limit` characters at a line break, ending with `pointer` (where the rest is)."""
    if len(body) <= limit:
        return body
    note = f"\n\n… truncated ({len(body):,} characters). {pointer}\n"
    cut = body[: limit - len(note) - 1]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + note


def _broken_at_head(op: Mapping[str, Any]) -> bool:
    """Its head failed its check (an operator the run's time budget cut short is not broken)."""
    return bool(op.get("head")) and op["head"]["status"] != "ok" and not op.get("stopped_by")


def annotations_for(review: Mapping[str, Any]) -> list[Annotation]:
    out = []
    for op in review["operators"]:
        verdict, name = op.get("verdict"), op["name"]
        if verdict == "regression" or _broken_at_head(op):
            level = "failure"
            msg = f"{name}: {'regression ' + format(op['ratio'] - 1, '+.1%') if op.get('ratio') else 'broken at head'}"
        elif verdict == "ambiguous":
            level, msg = "warning", f"{name}: ambiguous timing change; not enough evidence either way"
        else:
            continue
        out.append(
            Annotation(
                op["path"], 1, 1, level, msg + (f" ({op['error']})" if op.get("error") else ""), "kernelbot"
            )
        )
    return out


@dataclass
class Payload:
    """Everything the publish step posts: plain data, so the GPU job can hand it over as an artifact."""

    repository: str  # "owner/name"
    pr: int | None
    head_sha: str
    run_id: int | None  # history database id (None: the database was unreachable)
    summary: str  # one line
    comment: str  # sticky comment body, under COMMENT_LIMIT
    check_conclusion: str  # "success" / "failure" / "neutral"
    check_summary: str
    annotations: list[dict[str, Any]] = field(default_factory=list)
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    comment_id: int | None = None  # the slash command to react to (🚀 when published)

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Payload:
        if data.get("schema_version") != 1:
            raise UsageError("the payload file is not a kernelbot publish payload (schema_version 1)")
        fields = {k: v for k, v in data.items() if k != "schema_version"}
        try:
            return cls(**fields)
        except TypeError as exc:
            raise UsageError(f"the payload file has unexpected fields: {exc}") from None


def build_payload(
    review_json: Mapping[str, Any],
    summary: str,
    *,
    pr: int | None,
    fail_on_regression: bool,
    pointer: str,
    read_head: Callable[[str], str | None],
    comment_id: int | None = None,
) -> tuple[Payload, str]:
    """(the payload, the full untruncated report for the artifact and the step summary)."""
    full = render("comment.md.j2", review=review_json, summary=summary)
    suggestions = []
    for op in review_json["operators"]:
        if op.get("best_candidate") and op.get("best_candidate", {}).get("source"):
            source = read_head(op["path"])
            s = suggestion_for(op, source) if source else None
            if s:
                suggestions.append(asdict(s))
    bad = [op for op in review_json["operators"] if op.get("verdict") == "regression" or _broken_at_head(op)]
    conclusion = "failure" if bad and fail_on_regression else "success"
    payload = Payload(
        repository=review_json["repository"],
        pr=pr,
        head_sha=review_json["head"],
        run_id=review_json.get("run_id"),
        summary=summary,
        comment=truncate(full, COMMENT_LIMIT - 1000, pointer),
        check_conclusion=conclusion,
        check_summary=truncate(f"**{summary}**\n\n" + full.replace(STICKY_MARKER, ""), 65_000, pointer),
        annotations=[asdict(a) for a in annotations_for(review_json)],
        suggestions=suggestions,
        comment_id=comment_id,
    )
    return payload, full


def publish(gh: GitHub, payload: Payload) -> dict[str, str]:
    """Post the payload: sticky comment, review with suggestions, check run, 🚀. Returns the URLs."""
    urls: dict[str, str] = {}
    if payload.pr is not None:
        urls["comment"] = gh.upsert_comment(payload.pr, payload.comment, STICKY_MARKER)
        suggestions = [Suggestion(**s) for s in payload.suggestions]
        if suggestions:
            review_url, dropped = gh.create_review(
                payload.pr,
                payload.head_sha,
                "kernelbot found verified faster versions of changed operators.",
                suggestions,
            )
            if review_url:
                urls["review"] = review_url
            if dropped:
                urls["dropped_suggestions"] = str(len(dropped))
    urls["check"] = gh.create_check_run(
        CheckRun(
            CHECK_NAME,
            payload.head_sha,
            payload.check_conclusion,
            f"kernelbot: {payload.summary}",
            payload.check_summary,
            external_id=str(payload.run_id or ""),
            annotations=[Annotation(**a) for a in payload.annotations],
        )
    )
    if payload.comment_id is not None:
        gh.react(payload.comment_id, REACTIONS["done"])
    return urls


# -- storage ---------------------------------------------------------------------------------------


def store(
    review: ReviewResult, url: str | None, trigger: Trigger, pr: int | None, fallback: Path
) -> str | None:
    """Store the run, with its candidates, before anything is posted; a warning when it could not be."""
    return store_review(review, url, trigger=trigger, pr_number=pr, fallback_dir=fallback)[1]


def review_from_record(run_id: int, record: RunRecord) -> tuple[dict[str, Any], str]:
    """The comment template's data from a stored run (for `kernelbot publish --run-id`)."""
    fp = record.fingerprint
    extra = fp.extra if fp else {}
    device = {
        "device": extra.get("device", "cpu"), "gpu": None if not fp or fp.gpu == "cpu" else fp.gpu,
        "cpu": extra.get("cpu", ""), "driver": fp.driver if fp else "", "cuda": fp.cuda if fp else "",
        "torch": fp.torch if fp else "", "cupy": fp.cupy if fp else "", "kernelbot": fp.kernelbot if fp else "",
    }  # fmt: skip
    operators, results = [], []
    for op in record.operators:
        sides: dict[str, Any] = {"base": None, "head": None}
        for m in op.measurements:
            if m.side in sides:
                timing = None if m.median_ms is None else {
                    "median_ms": m.median_ms, "samples": m.samples, "calls_per_sample": m.calls_per_sample,
                    "ci95_ms": [m.ci95_low_ms, m.ci95_high_ms],
                }  # fmt: skip
                sides[m.side] = {"status": m.status, "reason": m.reason, "timing": timing}
        v = op.verdict
        # The suggestion, as optimize.OptimizeResult.best picks it: reward 2 or 3 only.
        best = max(
            (c for c in op.candidates if c.reward >= 2),
            key=lambda c: (c.reward, c.speedup_vs_eager or 0),
            default=None,
        )
        operators.append(
            {
                "name": op.name, "path": op.path, "change": op.change, **sides,
                "ratio": v.ratio if v else None, "p_value": v.p_value if v else None, "ratio_ci99": None,
                "threshold": v.threshold if v and v.threshold else 0.0, "verdict": v.verdict if v else None,
                "error": v.error if v else None, "notes": [], "stopped_by": None,
                "best_candidate": None if best is None else {
                    "origin": best.origin, "source": best.source, "reward": best.reward,
                    "description": "", "precision": (best.precision_note or "").removeprefix("uses ") or "exact",
                    "speedup_vs_eager": best.speedup_vs_eager, "speedup_vs_compile": best.speedup_vs_compile,
                },
            }
        )  # fmt: skip
        result = OperatorResult(op.name, op.path, op.change, [], 0.0)
        result.verdict = v.verdict if v else None
        results.append(result)
    summary = ReviewResult(record.repository, "", "", None, results).summary()  # type: ignore[arg-type]
    review = {
        "schema_version": 1, "run_id": run_id, "repository": record.repository,
        "base": record.base_sha or "", "head": record.head_sha or "", "device": device,
        "summary": summary, "warnings": [], "operators": operators,
    }  # fmt: skip
    return review, summary


# -- the Actions environment -------------------------------------------------------------------------


def write_output(env: Mapping[str, str], values: Mapping[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            fh.write(f"{key}={' '.join(str(value).split())}\n")  # one line each: no delimiter games


def write_summary(env: Mapping[str, str], markdown: str) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(
                truncate(markdown, STEP_SUMMARY_LIMIT - 1024, "The full report is in the run's artifact.")
            )


def _escape(value: str, prop: bool = False) -> str:
    out = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def workflow_command(kind: str, message: str, **props: Any) -> str:
    """`::error file=…,line=…::message` with GitHub's escaping, so an operator name cannot inject one."""
    args = ",".join(f"{k}={_escape(str(v), True)}" for k, v in props.items())
    return f"::{kind}{' ' + args if args else ''}::{_escape(message)}"


def run_url(env: Mapping[str, str]) -> str:
    server, repo, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else ""


def client(env: Mapping[str, str], **kw: Any) -> GitHub:
    token, repo = env.get("GITHUB_TOKEN") or env.get("INPUT_TOKEN"), env.get("GITHUB_REPOSITORY")
    if not token or not repo:
        raise UsageError("GITHUB_TOKEN and GITHUB_REPOSITORY must be set to talk to GitHub")
    return GitHub(
        repo,
        token,
        env.get("GITHUB_API_URL", "https://api.github.com"),
        bot_login=env.get("KERNELBOT_BOT_LOGIN"),
        **kw,
    )


__all__ = [
    "Command",
    "CommandError",
    "Decision",
    "Event",
    "GitHubError",
    "Payload",
    "gate",
    "parse_command",
    "publish",
]
