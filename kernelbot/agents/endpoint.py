"""The model endpoint: which model, where, with which key and limits, and what a failed call means."""

# NOTE: litellm is imported on first use only (an optional extra, slow to import). The API key lives in
# Endpoint (repr=False); callers scrub it from every text they keep or show.

from __future__ import annotations

import email.utils
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelbot.config import AgentSettings
from kernelbot.errors import KernelbotError

KEY_VARIABLE = "KERNELBOT_LLM_API_KEY"
Outcome = Literal["fatal", "rate", "retry", "no_tools"]


class AgentError(KernelbotError):
    """The model endpoint cannot be used (unknown model, refused key, unreachable): names the fix."""


@dataclass(frozen=True)
class Endpoint:
    model: str  # litellm model name: "openai/gpt-4o", "anthropic/claude-...", "hosted_vllm/<name>"
    api_base: str | None = None  # an OpenAI-compatible server's URL; None: the provider's default
    api_key: str | None = field(default=None, repr=False)  # None: litellm reads the provider's variable
    secrets: tuple[str, ...] = field(default=(), repr=False)  # every key value to scrub from texts
    timeout_s: float = 120.0  # one model call
    retries: int = 3  # per reply, for timeouts, 5xx, malformed bodies and unreachable endpoints
    retry_delay_s: float = 1.0  # first backoff; doubles each retry
    max_retry_after_s: float = 120.0  # a longer Retry-After stops the agent instead of waiting
    tools: bool = True  # offer function-calling tools (False: plain-text protocol only)

    def redact(self, text: str) -> str:
        """`text` with every key value and bearer token replaced by ***."""
        for secret in (self.api_key, *self.secrets):
            if secret:
                text = text.replace(secret, "***")
        return re.sub(r"(Bearer\s+)\S+", r"\1***", text)


@dataclass(frozen=True)
class Limits:
    max_turns: int = 12  # model replies per operator
    max_tokens: int | None = None  # prompt + completion tokens per operator
    max_cost_usd: float | None = 2.0  # per operator, from litellm's price of the model
    time_s: float = 900.0  # wall time per operator
    max_repeats: int = 3  # rewrites of a source that already failed, before stopping
    reply_tokens: int = 4096  # completion tokens asked for per reply


@dataclass
class RunBudget:
    """Shared by every operator of one run (review): money and tokens across operators."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    cost_usd: float = 0.0  # spent so far
    tokens: int = 0  # prompt + completion tokens so far

    def exceeded(self, next_cost: float = 0.0) -> str | None:
        """Why no further reply fits the run's budget (`next_cost`: the most the next reply can cost)."""
        if self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd:
            return f"run cost limit ${self.max_cost_usd:.2f} reached"
        if self.max_cost_usd is not None and self.cost_usd + next_cost > self.max_cost_usd:
            return f"run cost limit ${self.max_cost_usd:.2f}: the next reply could exceed it"
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"run token limit {self.max_tokens} reached"
        return None


def endpoint_from(
    settings: AgentSettings,
    env: Mapping[str, str],
    *,
    model: str | None = None,
    api_base: str | None = None,
) -> Endpoint:
    """Model and endpoint from the CLI, else config; the key from KERNELBOT_LLM_API_KEY, else the provider's."""
    name = model or settings.model
    if not name:
        raise AgentError(
            "--agent llm needs a model: pass --model NAME (e.g. openai/gpt-4o) or set agent.model in .github/kernelbot.yml"
        )
    secrets = tuple(
        v for k, v in env.items() if (k.endswith("_API_KEY") or k == KEY_VARIABLE) and len(v) >= 4
    )
    return Endpoint(name, api_base or settings.api_base, env.get(KEY_VARIABLE) or None, secrets)


def limits_from(
    settings: AgentSettings,
    *,
    max_turns: int | None = None,
    max_cost_usd: float | None = None,
    max_tokens: int | None = None,
    time_s: float | None = None,
) -> Limits:
    """The CLI's limits where given, else the config's."""
    return Limits(
        max_turns=max_turns or settings.max_turns,
        max_tokens=max_tokens or settings.max_tokens,
        max_cost_usd=settings.max_cost_usd if max_cost_usd is None else max_cost_usd,
        time_s=time_s or settings.time_s,
    )


def litellm_module() -> Any:
    # The bundled price list, not a download at import (CI runners and sandboxes have no network).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise AgentError("--agent llm needs litellm: pip install 'kernelbot[llm]'") from None
    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    return litellm


def classify(exc: Exception, endpoint: Endpoint, *, use_tools: bool) -> tuple[Outcome, float | None, str]:
    """What to do about a failed model call: stop, wait (seconds, from Retry-After), retry, or drop tools;
    and one line for the run's output."""
    litellm = litellm_module()
    status = getattr(exc, "status_code", None)
    text = str(exc)
    detail = endpoint.redact(" ".join(text.split()))[:300]
    where = endpoint.api_base or "the provider's endpoint"
    model = endpoint.model
    checks: list[tuple[bool, Callable[[], tuple[Outcome, float | None, str]]]] = [
        (
            isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError) or status in (401, 403),
            lambda: ("fatal", None, f"the endpoint refused the API key (HTTP {status}): set {KEY_VARIABLE} "
                                    "(or the provider's key variable) to a valid key"),
        ),
        (
            isinstance(exc, litellm.NotFoundError) or status == 404,
            lambda: ("fatal", None, f"unknown model {model!r} at {where} (HTTP 404): check --model / agent.model"),
        ),
        (
            isinstance(exc, litellm.ContextWindowExceededError),
            lambda: ("fatal", None, f"the conversation no longer fits {model}'s context window"),
        ),
        (
            isinstance(exc, litellm.BadRequestError) and "LLM Provider NOT provided" in text,
            lambda: ("fatal", None, f"unknown model {model!r}: name it as provider/model (openai/gpt-4o, "
                                    "anthropic/claude-sonnet-4-5, hosted_vllm/NAME with --api-base)"),
        ),
        (
            isinstance(exc, litellm.BadRequestError) and use_tools
            and re.search(r"\btools?\b|tool_choice|function", text, re.IGNORECASE) is not None,
            lambda: ("no_tools", None, "the endpoint does not take function-calling tools (HTTP 400)"),
        ),
        (
            isinstance(exc, litellm.BadRequestError),
            lambda: ("fatal", None, f"the endpoint rejected the request (HTTP 400): {detail}"),
        ),
        (
            isinstance(exc, litellm.RateLimitError) or status == 429,
            lambda: ("rate", retry_after(exc), "rate limited (HTTP 429)"),
        ),
        (
            isinstance(exc, litellm.Timeout),
            lambda: ("retry", None, f"no reply within {endpoint.timeout_s:.0f} s (timeout)"),
        ),
        (
            isinstance(exc, litellm.APIConnectionError) or "Connection error" in text,
            lambda: ("retry", None, f"cannot reach {where}: connection failed; check --api-base / agent.api_base"),
        ),
        (
            "Expecting value" in text or "JSONDecodeError" in text,
            lambda: ("retry", None, "malformed reply from the endpoint (not JSON)"),
        ),
        (
            (status is not None and status >= 500) or isinstance(exc, litellm.APIError),
            lambda: ("retry", None, f"server error (HTTP {status}) from the endpoint"),
        ),
        (
            isinstance(exc, IndexError | KeyError | AttributeError | TypeError | ValueError),
            lambda: ("retry", None, f"malformed reply from the endpoint ({type(exc).__name__})"),
        ),
    ]  # fmt: skip
    for matched, outcome in checks:
        if matched:
            return outcome()
    return "fatal", None, f"model call failed: {type(exc).__name__}: {detail}"


def retry_after(exc: Exception) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), when the endpoint sent one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
