"""The flags `optimize`, `review` and `action` share (the agent's, the run's time), and the AgentChoice they make."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelbot.pipeline.optimizers import AgentChoice, AgentKind


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def add_time_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """--time SECONDS (dest time_s), refused at parse time unless more than 0."""
    parser.add_argument("--time", dest="time_s", type=_seconds, metavar="SECONDS", help=help)


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """--model and the limits of --agent llm."""
    group = parser.add_argument_group("--agent llm (key: KERNELBOT_LLM_API_KEY or the provider's variable)")
    group.add_argument("--model", help="litellm model name, e.g. openai/gpt-4o (default: config agent.model)")
    group.add_argument(
        "--api-base", help="an OpenAI-compatible endpoint URL (default: config agent.api_base)"
    )
    group.add_argument("--max-turns", type=int, help="model replies per operator (default: agent.max_turns)")
    group.add_argument(
        "--max-cost",
        type=float,
        dest="max_cost",
        help="US dollars per operator (default: agent.max_cost_usd)",
    )
    group.add_argument("--max-tokens", type=int, help="tokens per operator (default: agent.max_tokens)")


def agent_choice(args: argparse.Namespace, kind: AgentKind) -> AgentChoice:
    return AgentChoice(
        kind,
        budget=getattr(args, "budget", None),
        candidates=tuple(Path(p) for p in getattr(args, "candidates", None) or ()),
        model=args.model,
        api_base=args.api_base,
        max_turns=args.max_turns,
        max_cost_usd=args.max_cost,
        max_tokens=args.max_tokens,
    )
