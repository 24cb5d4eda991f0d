"""The one place agents and optimizers are built, for `optimize`, `review` and the Action alike.

An Optimizer is what the review pipeline calls per changed operator, with the seconds it may take (the
run's shared budget decides them). Settings come from an AgentChoice (what the user asked for on the command
line or in a `/kernelbot optimize` comment) over the config's agent section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from kernelbot.agents.base import Agent, ReplayAgent
from kernelbot.agents.policy import Policy, load_policy
from kernelbot.agents.rules import Rule, load_rules, rewrites_for
from kernelbot.agents.search import SearchAgent
from kernelbot.assets import asset_dir
from kernelbot.config import Config
from kernelbot.errors import UsageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.pipeline.optimize import optimize_operator
from kernelbot.pipeline.results import OptimizeResult
from kernelbot.spec import OperatorSpec

if TYPE_CHECKING:
    from kernelbot.agents.endpoint import RunBudget

AgentKind = Literal["search", "llm", "replay"]


class Optimizer(Protocol):
    """Optimizes one operator within `time_s` seconds; `gpu`: the pool's GPU its sandboxes see (None: any)."""

    def __call__(
        self, spec: OperatorSpec, root: Path, config: Config, time_s: float, gpu: str | None = None
    ) -> OptimizeResult: ...


@dataclass(frozen=True)
class AgentChoice:
    kind: AgentKind
    budget: int | None = None  # candidates per operator (default: agent.budget)
    candidates: tuple[Path, ...] = ()  # --agent replay: the files to replay
    model: str | None = None  # --agent llm: litellm model name (default: agent.model)
    api_base: str | None = None
    max_turns: int | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for flag in ("max_turns", "max_tokens", "budget"):
            value = getattr(self, flag)
            if value is not None and value < 1:
                raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
        if self.max_cost_usd is not None and self.max_cost_usd < 0:
            raise UsageError("--max-cost must be 0 or more")
        if self.kind == "replay" and not self.candidates:
            raise UsageError("--agent replay needs --candidates FILE [FILE ...]")


def check_endpoint(choice: AgentChoice, config: Config, env: Mapping[str, str] | None = None) -> None:
    """Fail before any timing when the model agent cannot run (no model named, litellm not installed)."""
    if choice.kind == "llm":
        from kernelbot.agents.endpoint import endpoint_from, litellm_module

        endpoint_from(
            config.agent, os.environ if env is None else env, model=choice.model, api_base=choice.api_base
        )
        litellm_module()


def policy_path(config: Config, root: Path) -> Path | None:
    """The learned search order the config names: "default" is the shipped one, else a file under `root`."""
    name = config.agent.policy
    if name is None:
        return None
    return asset_dir("policies") / "default.json" if name == "default" else root / name


def search_policy(config: Config, root: Path, rules: list[Rule]) -> Policy | None:
    """The config's policy, or None (the fixed order; a missing or stale file says so in one log line)."""
    return load_policy(policy_path(config, root), rules)


def make_agent(
    choice: AgentChoice,
    config: Config,
    fingerprint: Fingerprint,
    work_dir: Path,
    *,
    time_s: float | None = None,
    run_budget: RunBudget | None = None,
    rules: list[Rule] | None = None,
    root: Path = Path("."),
    policy: Policy | Literal["config"] | None = "config",
) -> tuple[Agent, list[str]]:
    """The agent, and the fx rewrites the operator's analysis should try for it (`rules`: already loaded;
    `policy`: already loaded (None: the fixed order), or "config": read from agent.policy under `root`)."""
    if choice.kind == "replay":
        return ReplayAgent(list(choice.candidates)), []
    rules = load_rules() if rules is None else rules
    if choice.kind == "search":
        learned = search_policy(config, root, rules) if policy == "config" else policy
        return SearchAgent(rules, learned), rewrites_for(rules)
    from kernelbot.agents.endpoint import endpoint_from, limits_from
    from kernelbot.agents.llm import LLMAgent

    endpoint = endpoint_from(config.agent, os.environ, model=choice.model, api_base=choice.api_base)
    limits = limits_from(
        config.agent,
        max_turns=choice.max_turns,
        max_cost_usd=choice.max_cost_usd,
        max_tokens=choice.max_tokens,
        time_s=time_s,
    )
    agent = LLMAgent(
        endpoint,
        limits,
        config=config,
        fingerprint=fingerprint,
        work_dir=work_dir,
        rules=rules,
        run_budget=run_budget,
    )
    return agent, []


def make_optimizer(choice: AgentChoice, fingerprint: Fingerprint, out_dir: Path) -> Optimizer:
    """Per operator: a fresh agent (the model agent's money and tokens shared over the run), from rules
    read once."""
    from kernelbot.agents.endpoint import RunBudget

    run_budget: RunBudget | None = None
    rules = load_rules() if choice.kind != "replay" else []
    policies: dict[Path | None, Policy | None] = {}  # read once per run (one log line when it falls back)

    def optimizer(
        spec: OperatorSpec, root: Path, config: Config, time_s: float, gpu: str | None = None
    ) -> OptimizeResult:
        nonlocal run_budget
        if run_budget is None:
            run_budget = RunBudget(max_cost_usd=config.agent.run_max_cost_usd)
        work = out_dir / "agent" / spec.name.replace("/", "_")
        policy: Policy | None = None
        if choice.kind == "search":
            where = policy_path(config, root)
            if where not in policies:
                policies[where] = load_policy(where, rules)
            policy = policies[where]
        agent, rewrites = make_agent(
            choice,
            config,
            fingerprint,
            work,
            time_s=time_s,
            run_budget=run_budget,
            rules=rules,
            root=root,
            policy=policy,
        )
        return optimize_operator(
            spec,
            root,
            config,
            fingerprint,
            agent,
            out_dir=out_dir,
            budget=choice.budget,
            time_s=time_s,
            rules_for_analysis=rewrites,
            gpu=gpu,
        )

    return optimizer
