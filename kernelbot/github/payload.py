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
from kernelbot.github.client import (
    COMMENT_LIMIT,
    Annotation,
    CheckRun,
    GitHub,
    Suggestion,
)
from kernelbot.github.gate import REACTIONS
from kernelbot.history import RunRecord, Trigger
from kernelbot.pipeline.review import OperatorResult, ReviewResult
from kernelbot.pipeline.store import store_review
from kernelbot.render import STICKY_MARKER, render

CHECK_NAME = "kernelbot"


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
