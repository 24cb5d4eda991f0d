"""The offline search agent: enumerate the rules that match an operator, build their candidates, best first;
then stack the rules that wrap any model (compile modes, TF32, cuDNN autotuning) on the best verified one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kernelbot.agents.base import AgentBase, Feedback, Precision, Proposal, Task, allowed_precisions
from kernelbot.agents.policy import Policy
from kernelbot.agents.rules import Rule
from kernelbot.config import PrecisionPolicy
from kernelbot.render import render


class SearchAgent(AgentBase):
    name = "search"

    def __init__(self, rules: Sequence[Rule], policy: Policy | None = None) -> None:
        super().__init__()
        self.rules = list(rules)
        self.policy = policy  # a learned order (agents/policy.py); None: the rules' expected_gain
        self.order: list[dict[str, Any]] = []  # the policy's estimates, in the order tried (for the summary)
        self._queue: list[Proposal] | None = None
        self._matched: list[Rule] = []  # rules whose own candidate was built, best expected gain first
        self._stacked = False

    def ranked(self, task: Task, matching: list[Rule]) -> list[Rule]:
        """The matching rules in the policy's order (expected gain per second under the budget left, with
        its exploration share), or by their expected_gain without a policy."""
        if self.policy is None:
            return matching
        left = None if task.deadline is None else task.deadline - time.monotonic()
        facts = {**task.facts, "device": task.device}
        ordered = self.policy.order(matching, facts, time_left_s=left, candidates_left=task.budget)
        self.order = [
            {"rule": e.rule, "p_win": round(e.p_win, 3), "speedup": round(e.speedup, 3),
             "cost_s": round(e.cost_s, 1), "rows": e.n}
            for _, e in ordered
        ]  # fmt: skip
        return [rule for rule, _ in ordered]

    def summary(self) -> dict[str, Any]:
        return {"policy_order": self.order} if self.order else {}

    def plan(self, task: Task) -> list[Proposal]:
        """Every candidate the matching rules produce, in the policy's order (else by expected gain)."""
        proposals = []
        policy = task.policy.model_dump()
        matching = []
        for rule in sorted(self.rules, key=lambda r: -r.expected_gain):
            why = rule.matches(task.facts, task.device, task.spec.kind, policy)
            if why is not None:
                self.skipped[rule.id] = why
                continue
            matching.append(rule)
        for rule in self.ranked(task, matching):
            source = self.build(rule, task)
            if source is None:
                continue
            self._matched.append(rule)
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

    def stack(self, task: Task, feedback: Sequence[Feedback]) -> list[Proposal]:
        """Each stackable rule whose own candidate was verified, on top of the fastest verified candidate.

        Rules are tried alone first, so a stack is only built from parts that each passed the harness; the
        stack itself is checked and timed like any candidate (a wrapper that lost alone can win on top of a
        rewrite, e.g. TF32 under max-autotune). The fastest candidate a stricter policy allows is a base too
        (IEEE float32 only, then float32 with tf32x3), so the candidates of a run whose policy allows more are
        a superset of the ones a stricter run would make.
        """
        verified = [f for f in feedback if f.evaluation.ok and f.speedup_vs_eager is not None]
        by_id = {r.id: r for r in self.rules}
        bases: list[Feedback] = []
        for allowed in (*STRICTER_POLICIES, None):
            group = [f for f in verified if allowed is None or f.proposal.precision in allowed]
            best = max(group, key=lambda f: f.speedup_vs_eager or 0.0, default=None)
            if best is not None and best not in bases:
                bases.append(best)
        # What a wrapper saves (launches, kernels fused) mostly adds to any forward it wraps: the fastest other
        # forward replacements (rewrites, kernels) are bases too, after those, so that a rewrite that lost
        # alone to a wrapper still gets the wrapper on top (on the H200: tf32x3 under the graph capture).
        replacements = sorted(
            (f for f in verified if f.proposal.origin in by_id and not by_id[f.proposal.origin].stacks),
            key=lambda f: -(f.speedup_vs_eager or 0.0),
        )
        bases += [f for f in replacements if f not in bases][:EXTRA_BASES]
        ok_alone = {f.proposal.origin for f in verified}
        out: list[Proposal] = []
        made: set[frozenset[str]] = set()
        for base in bases:
            used = set(base.proposal.origin.split("+"))
            for rule in self._matched:
                parts = frozenset(used | {rule.id})
                if not rule.stacks or rule.id in used or rule.id not in ok_alone or parts in made:
                    continue
                if used & set(rule.conflicts) or any(
                    rule.id in by_id[u].conflicts for u in used if u in by_id
                ):
                    continue
                precision = _combined(base.proposal.precision, rule.precision)
                if precision is None:
                    continue
                source = self.build(rule, task, on=base.proposal)
                if source is None:
                    continue
                made.add(parts)
                out.append(
                    Proposal(
                        source,
                        origin=f"{base.proposal.origin}+{rule.id}",
                        description=f"{rule.description}, on top of: {base.proposal.description}",
                        precision=precision,
                        require_kernel=base.proposal.require_kernel,
                        expected_gain=rule.expected_gain,
                    )
                )
        return out

    def build(self, rule: Rule, task: Task, on: Proposal | None = None) -> str | None:
        """The candidate source the rule makes for the task, or stacked on the earlier candidate `on`."""
        context: dict[str, Any] = {
            "rule": rule,
            "params": rule.produces.params,
            "operator_source": task.source.rstrip() if on is None else on.source.rstrip(),
            "facts": task.facts,
            "device": task.device,
        }
        if on is not None:  # the earlier candidate's source defines ModelNew: the wrapper subclasses it
            assert rule.produces.template is not None  # only template rules stack
            header = f"# kernelbot: rule `{rule.id}` stacked on the verified candidate `{on.origin}` below.\n"
            return header + render(f"kernels/{rule.produces.template}", base="ModelNew", **context)
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
        if not self._queue and not self._stacked:
            self._stacked = True  # once: stacks are built from the single-rule results
            self._queue = self.stack(task, feedback)
        return self._queue.pop(0) if self._queue else None


EXTRA_BASES = 2  # forward replacements stacked on beyond the policies' fastest (each adds a stack or two)

# Precisions a stricter policy allows, strictest first (IEEE float32 only, then the default float32 policy):
# each one's fastest candidate is a base for stacks.
STRICTER_POLICIES: tuple[tuple[Precision, ...], ...] = (
    allowed_precisions(PrecisionPolicy(allow_tf32x3=False)),
    allowed_precisions(PrecisionPolicy()),
)


def _combined(a: Precision, b: Precision) -> Precision | None:
    """The precision of a stack: the lower one of its parts; two different lower precisions do not stack."""
    if a == "exact" or a == b:
        return b
    return a if b == "exact" else None
