"""The offline search agent: enumerate the rules that match an operator, build their candidates, best first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelbot.agents.base import Feedback, Proposal, Task
from kernelbot.agents.rules import Rule
from kernelbot.render import render


class SearchAgent:
    name = "search"

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = list(rules)
        self.skipped: dict[str, str] = {}  # rule id -> why it did not apply (for the report)
        self._queue: list[Proposal] | None = None

    def plan(self, task: Task) -> list[Proposal]:
        """Every candidate the matching rules produce, ordered by the rules' expected gain."""
        proposals = []
        policy = task.policy.model_dump()
        for rule in sorted(self.rules, key=lambda r: -r.expected_gain):
            why = rule.matches(task.facts, task.device, task.spec.kind, policy)
            if why is not None:
                self.skipped[rule.id] = why
                continue
            source = self._build(rule, task)
            if source is None:
                continue
            proposals.append(
                Proposal(
                    source,
                    origin=rule.id,
                    description=rule.description,
                    precision=rule.precision,
                    require_kernel=rule.require_kernel,
                    expected_gain=rule.expected_gain,
                )
            )
        return proposals

    def _build(self, rule: Rule, task: Task) -> str | None:
        context: dict[str, Any] = {
            "rule": rule,
            "params": rule.produces.params,
            "operator_source": task.source.rstrip(),
            "facts": task.facts,
            "device": task.device,
        }
        if rule.produces.rewrite is not None:
            rewrite = task.facts.get("rewrites", {}).get(rule.produces.rewrite, {})
            if not rewrite.get("applied"):
                self.skipped[rule.id] = "pattern not found in the graph"
                return None
            return render(
                "kernels/fx_forward.py.j2",
                forward_code=rewrite["forward_code"].strip(),
                description=rewrite["description"],
                **context,
            )
        assert rule.produces.template is not None
        return render(f"kernels/{rule.produces.template}", **context)

    def propose(self, task: Task, feedback: Sequence[Feedback]) -> Proposal | None:
        if self._queue is None:
            self._queue = self.plan(task)
        return self._queue.pop(0) if self._queue else None
