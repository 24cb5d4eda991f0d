"""What the publish step posts (sticky comment, suggestions, check run) and posting it."""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelbot.errors import UsageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.github.client import COMMENT_LIMIT, GitHub
from kernelbot.github.gate import REACTIONS
from kernelbot.github.types import Annotation, CheckRun, Suggestion
from kernelbot.harness.results import Evaluation, Timing
from kernelbot.history import RunRecord, Trigger
from kernelbot.pipeline.results import OperatorResult, ReviewResult, Suggested, suggested_best
from kernelbot.pipeline.store import store_review
from kernelbot.render import STICKY_MARKER

CHECK_NAME = "kernelbot"


def _forward(tree: ast.Module, cls: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    return None


def suggestion_for(op: OperatorResult, head_source: str) -> Suggestion | None:
    """A candidate whose ModelNew only replaces `forward` becomes a suggestion on Model.forward's lines."""
    cand = op.best_candidate
    if cand is None or not cand.source or not op.path.endswith(".py"):
        return None
    source = cand.source
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
        op.path,
        start,
        old.end_lineno,
        textwrap.indent(body, indent),
        f"**kernelbot**: `{cand.origin}` is verified correct and "
        f"{cand.speedup_vs_eager or 0:.1f}× faster than eager (reward {cand.reward}).",
    )


def truncate(body: str, limit: int, pointer: str) -> str:
    """Cut `body` under `limit` characters at a line break, ending with `pointer` (where the rest is)."""
    if len(body) <= limit:
        return body
    note = f"\n\n… truncated ({len(body):,} characters). {pointer}\n"
    cut = body[: limit - len(note) - 1]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + note


def annotations_for(review: ReviewResult) -> list[Annotation]:
    out = []
    broken = review.broken_at_head
    for op in review.operators:
        verdict, name = op.verdict, op.name
        if verdict == "regression" or op in broken:
            level = "failure"
            msg = f"{name}: {'regression ' + format(op.ratio - 1, '+.1%') if op.ratio else 'broken at head'}"
        elif verdict == "ambiguous":
            level, msg = "warning", f"{name}: ambiguous timing change; not enough evidence either way"
        else:
            continue
        out.append(
            Annotation(op.path, 1, 1, level, msg + (f" ({op.error})" if op.error else ""), "kernelbot")
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
    review: ReviewResult,
    *,
    pr: int | None,
    fail_on_regression: bool,
    pointer: str,
    read_head: Callable[[str], str | None],
    comment_id: int | None = None,
) -> tuple[Payload, str]:
    """(the payload, the full untruncated report for the artifact and the step summary)."""
    full, summary = review.markdown(), review.summary()
    suggestions = []
    for op in review.operators:
        if op.best_candidate is not None and op.best_candidate.source:
            source = read_head(op.path)
            s = suggestion_for(op, source) if source else None
            if s:
                suggestions.append(asdict(s))
    bad = review.regressions or review.broken_at_head
    conclusion = "failure" if bad and fail_on_regression else "success"
    payload = Payload(
        repository=review.repository,
        pr=pr,
        head_sha=review.head,
        run_id=review.run_id,
        summary=summary,
        comment=truncate(full, COMMENT_LIMIT - 1000, pointer),
        check_conclusion=conclusion,
        check_summary=truncate(f"**{summary}**\n\n" + full.replace(STICKY_MARKER, ""), 65_000, pointer),
        annotations=[asdict(a) for a in annotations_for(review)],
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


def store(
    review: ReviewResult, url: str | None, trigger: Trigger, pr: int | None, fallback: Path
) -> str | None:
    """Store the run, with its candidates, before anything is posted; a warning when it could not be."""
    return store_review(review, url, trigger=trigger, pr_number=pr, fallback_dir=fallback)[1]


def review_from_record(run_id: int, record: RunRecord) -> ReviewResult:
    """A run stored before its report was kept (schema 0002), rebuilt from its rows for `publish --run-id`."""
    fp = record.fingerprint
    extra = fp.extra if fp else {}
    fingerprint = Fingerprint(
        device=extra.get("device", "cpu"), gpu=None if not fp or fp.gpu == "cpu" else fp.gpu,
        driver=fp.driver if fp else None, cuda=fp.cuda if fp else None, torch=fp.torch if fp else "",
        cupy=fp.cupy if fp else None, triton=extra.get("triton"), kernelbot=fp.kernelbot if fp else "",
        python=extra.get("python", ""), cpu=extra.get("cpu", ""), host=record.runner or "",
    )  # fmt: skip
    operators = []
    for op in record.operators:
        result = OperatorResult(op.name, op.path, op.change, [], 0.0)
        for m in op.measurements:
            if m.side not in ("base", "head"):
                continue
            timing = None
            if m.median_ms is not None:
                low, high = m.ci95_low_ms or m.median_ms, m.ci95_high_ms or m.median_ms
                timing = Timing(m.median_ms, m.mean_ms or m.median_ms, m.std_ms or 0.0, (low, high),
                                m.samples, m.calls_per_sample, m.stopped_by, raw_ms=list(m.raw_ms))  # fmt: skip
            ev = Evaluation(m.side, m.status, m.reason, m.max_abs_err, m.max_rel_err, timing=timing)
            result.base, result.head = (ev, result.head) if m.side == "base" else (result.base, ev)
        if (v := op.verdict) is not None:
            result.verdict, result.ratio, result.p_value = v.verdict, v.ratio, v.p_value
            result.error, result.threshold = v.error, v.threshold or 0.0
        if (best := suggested_best(op.candidates)) is not None:
            result.best_candidate = Suggested.from_json(
                {"origin": best.origin, "source": best.source, "reward": best.reward, "status": best.status,
                 "precision": (best.precision_note or "").removeprefix("uses ") or "exact",
                 "speedup_vs_eager": best.speedup_vs_eager, "speedup_vs_compile": best.speedup_vs_compile}
            )  # fmt: skip
        operators.append(result)
    return ReviewResult(
        record.repository, record.base_sha or "", record.head_sha or "", fingerprint, operators, run_id=run_id
    )
