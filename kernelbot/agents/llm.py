"""The model agent: a multi-turn, tool-using loop through litellm (any provider), with budgets and a transcript.

Why one module of ~500 lines: one class whose turns share the conversation, the budgets and the attempts
awaiting the pipeline's verdict; the endpoint (endpoint.py), the tools (tools.py) and the prompts
(templates/) are apart.
"""

# NOTE: every text this module keeps or shows goes through Endpoint.redact (the API key never leaves it).

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelbot.agents.base import AgentBase, Feedback, Proposal, Task, precision_allowed
from kernelbot.agents.endpoint import (
    AgentError,
    Endpoint,
    Limits,
    RunBudget,
    classify,
    endpoint_from,
    limits_from,
    litellm_module,
)
from kernelbot.agents.rules import Rule
from kernelbot.agents.tools import TOOL_SPECS, Attempt, Toolbox, openai_tools, parse_arguments
from kernelbot.config import Config
from kernelbot.fingerprint import Fingerprint
from kernelbot.history import TurnRecord
from kernelbot.render import render

CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
MAX_IDLE = 3  # replies in a row with neither a tool call nor code before the agent gives up
TEXT_PROTOCOL = (
    "Function calls are not available. Reply with a ```python block holding the whole candidate file "
    "(it is compiled, verified and profiled for you), or with FINISH to submit the best verified one."
)


class LLMAgent(AgentBase):
    """Talks with a model until it submits a candidate (finish), hands that to the pipeline, and goes on."""

    name = "llm"

    def __init__(
        self,
        endpoint: Endpoint,
        limits: Limits,
        *,
        config: Config,
        fingerprint: Fingerprint,
        work_dir: Path,
        rules: Sequence[Rule] = (),
        run_budget: RunBudget | None = None,
        progress: Callable[[str], None] = lambda _: None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self.endpoint, self.limits, self.config, self.fingerprint = endpoint, limits, config, fingerprint
        self.work_dir, self.rules = work_dir, list(rules)
        self.run_budget = run_budget or RunBudget()
        self.progress, self.sleep = progress, sleep
        self.transcript: list[TurnRecord] = []  # every turn, for the history database
        self.notes: list[str] = []  # what went wrong or was noteworthy, for the run's output
        self.stop_reason: str | None = None  # why the agent stopped (budget, finish, error)
        self.problem: str | None = None  # the endpoint cannot be used at all (fatal)
        self.replies = self.tokens_in = self.tokens_out = 0
        self.cost_usd = 0.0
        self._messages: list[dict[str, Any]] = []
        self._toolbox: Toolbox | None = None
        self._deadline = 0.0
        # The finish call (its id; None in the plain-text protocol) and the attempt awaiting the pipeline's result.
        self._awaiting: tuple[str | None, Attempt] | None = None
        self._turn_attempt: dict[int, int] = {}  # transcript index -> attempt index it wrote or submitted
        self._repeats = self._idle = 0
        self._price_known = True
        self._final_done = False
        self._use_tools = endpoint.tools  # off when the endpoint turns function calling down

    # -- the Agent protocol ----------------------------------------------------------------------

    def propose(self, task: Task, feedback: Sequence[Feedback]) -> Proposal | None:
        if self._toolbox is None:
            self._start(task)
        if self._awaiting is not None and feedback:
            self._pipeline_result(feedback[-1], len(feedback) - 1)
        while self.stop_reason is None:
            why = self._limit_reached()
            if why is not None:
                self._stop(why)
                break
            message = self._ask()
            if message is None:
                break
            proposal = self._act(message, len(feedback))
            if proposal is not None:
                return proposal
        return self._final_submission(len(feedback))

    # -- setup -----------------------------------------------------------------------------------

    def _start(self, task: Task) -> None:
        job = task.spec.job(task.root, task.device)
        self._toolbox = Toolbox(
            task,
            job,
            task.settings,
            self.work_dir,
            eager_ms=task.facts.get("eager_ms"),
            compiled=task.compiled,
        )
        self._deadline = time.monotonic() + self.limits.time_s
        policy = task.policy.model_dump()
        allowed = {r.id: precision_allowed(r.precision, policy) for r in self.rules}
        system = render(
            "agent_system.md.j2",
            task=task,
            tools=TOOL_SPECS,
            tool_style=self.endpoint.tools,
            rules=self.rules,
            rule_allowed=allowed,
            limits={**self.limits.__dict__},
        )
        facts: dict[str, Any] = {
            k: task.facts[k]
            for k in ("ops", "modules", "input_shapes", "input_dtypes", "eager_ms")
            if k in task.facts
        }
        if task.compiled is not None and task.compiled.timing is not None:
            facts["compile_ms"] = task.compiled.timing.median_ms
        user = (
            f"Operator `{task.spec.name}` ({task.spec.path}):\n```python\n{task.source.rstrip()}\n```\n"
            f"What kernelbot measured: {json.dumps(facts, default=str)}\n"
            "Write a faster ModelNew. Start when ready."
        )
        self._record("system", system)
        self._messages.append({"role": "system", "content": system})
        # The task turn carries the operator itself, so exports need nothing but the transcript.
        self._record(
            "user",
            user,
            tool_result={"kind": "task", "operator": task.spec.name, "path": task.spec.path, "model": self.endpoint.model,
                         "device": task.device, "source": task.source, "facts": facts},
        )  # fmt: skip
        self._messages.append({"role": "user", "content": user})

    # -- budgets ---------------------------------------------------------------------------------

    def _limit_reached(self) -> str | None:
        lim = self.limits
        if self.replies >= lim.max_turns:
            return f"turn limit {lim.max_turns} reached"
        if lim.max_tokens is not None and self.tokens_in + self.tokens_out >= lim.max_tokens:
            return f"token limit {lim.max_tokens} reached"
        next_cost = self._next_cost() if self._price_known else 0.0
        if lim.max_cost_usd is not None and self._price_known:
            if self.cost_usd >= lim.max_cost_usd:
                return f"cost limit ${lim.max_cost_usd:.2f} reached"
            if self.cost_usd + next_cost > lim.max_cost_usd:
                return f"cost limit ${lim.max_cost_usd:.2f}: the next reply could exceed it"
        if time.monotonic() >= self._deadline:
            return f"time limit {lim.time_s:.0f} s reached"
        return self.run_budget.exceeded(next_cost)

    def _next_cost(self) -> float:
        """The most the next reply can cost: this prompt (about 4 characters a token) and a full reply."""
        prompt = len(json.dumps(self._messages)) // 4
        try:
            cin, cout = litellm_module().cost_per_token(
                model=self.endpoint.model, prompt_tokens=prompt, completion_tokens=self._reply_tokens()
            )
        except Exception:
            return 0.0
        return float(cin) + float(cout)

    def _reply_tokens(self) -> int:
        if self.limits.max_tokens is None:
            return self.limits.reply_tokens
        left = self.limits.max_tokens - self.tokens_in - self.tokens_out
        return max(16, min(self.limits.reply_tokens, left))

    def _stop(self, why: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = why
            self._event(f"stopped: {why}")

    # -- talking to the model --------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        return self.endpoint.redact(text)

    def _ask(self) -> Any | None:
        """One reply (the message object), after retries; None when the agent has to stop."""
        litellm = litellm_module()
        failures = rate_limits = 0
        while True:
            left = self._deadline - time.monotonic()
            if left <= 0:
                self._stop(f"time limit {self.limits.time_s:.0f} s reached")
                return None
            started = time.monotonic()
            try:
                response = litellm.completion(
                    model=self.endpoint.model,
                    messages=self._messages,
                    tools=openai_tools() if self._use_tools else None,
                    api_base=self.endpoint.api_base,
                    api_key=self.endpoint.api_key,
                    timeout=min(self.endpoint.timeout_s, left),
                    max_tokens=self._reply_tokens(),
                    num_retries=0,  # retries are ours: Retry-After honoured, every attempt in the transcript
                    max_retries=0,
                )
                message = response.choices[0].message
            except Exception as exc:
                kind, wait, text = classify(exc, self.endpoint, use_tools=self._use_tools)
                elapsed = time.monotonic() - started
                if kind == "no_tools":
                    self._use_tools = False
                    self._event(f"{text}; switching to the plain-text protocol", elapsed)
                    self._reply_user(TEXT_PROTOCOL, None)
                    continue
                if kind == "fatal":
                    self.problem = text
                    self._event(text, elapsed)
                    self._stop(f"model endpoint error: {text}")
                    return None
                if kind == "rate":
                    rate_limits += 1
                    wait = wait if wait is not None else self.endpoint.retry_delay_s * 2**rate_limits
                    if wait > min(self.endpoint.max_retry_after_s, self._deadline - time.monotonic()):
                        self._event(f"{text}; waiting {wait:.0f} s would pass the time limit", elapsed)
                        self._stop("rate limited for longer than the time left")
                        return None
                    if rate_limits > self.endpoint.retries + 2:
                        self.problem = f"{text}; still rate limited after {rate_limits} waits"
                        self._stop(f"model endpoint error: {self.problem}")
                        return None
                    self._event(f"{text}; waiting {wait:.1f} s as the endpoint asked", elapsed)
                    self.sleep(wait)
                    continue
                failures += 1
                if failures > self.endpoint.retries:
                    self.problem = f"{text} (gave up after {failures} attempts)"
                    self._event(self.problem, elapsed)
                    self._stop(f"model endpoint error: {self.problem}")
                    return None
                delay = min(
                    self.endpoint.retry_delay_s * 2 ** (failures - 1),
                    max(0.0, self._deadline - time.monotonic()),
                )
                self._event(f"{text}; retrying in {delay:.1f} s", elapsed)
                self.sleep(delay)
                continue
            self._account(response, time.monotonic() - started, message)
            return message

    def _account(self, response: Any, elapsed: float, message: Any) -> None:
        usage = getattr(response, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = 0.0
        try:
            cost = float(litellm_module().completion_cost(completion_response=response) or 0.0)
        except Exception:
            cost = float((getattr(response, "_hidden_params", None) or {}).get("response_cost") or 0.0)
        if cost == 0.0 and tin + tout > 0 and self._price_known:
            self._price_known = False
            self.notes.append(
                f"litellm knows no price for {self.endpoint.model}: the money limit cannot be enforced "
                "(turn, token and time limits still hold)"
            )
        self.replies += 1
        self.tokens_in, self.tokens_out, self.cost_usd = (
            self.tokens_in + tin,
            self.tokens_out + tout,
            self.cost_usd + cost,
        )
        self.run_budget.cost_usd += cost
        self.run_budget.tokens += tin + tout
        for i, call in enumerate(getattr(message, "tool_calls", None) or []):
            call.id = call.id or f"call_{self.replies}_{i}"  # some servers send none; replies must name one
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in (getattr(message, "tool_calls", None) or [])
        ]
        content = message.content or ""
        self._record(
            "assistant", content, tool_name=",".join(c["name"] for c in calls) or None,
            tool_args=calls or None, tokens_in=tin, tokens_out=tout, cost_usd=cost, elapsed_s=elapsed,
        )  # fmt: skip
        entry: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:
            entry["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        self._messages.append(entry)
        self.progress(f"model reply {self.replies}: {', '.join(c['name'] for c in calls) or 'text'}")

    # -- acting on a reply -----------------------------------------------------------------------

    def _act(self, message: Any, next_candidate: int) -> Proposal | None:
        calls = getattr(message, "tool_calls", None) or []
        if calls:
            self._idle = 0
            return self._tool_calls(calls, next_candidate)
        content = message.content or ""
        blocks = [b for b in CODE_BLOCK.findall(content) if b.strip()]
        if blocks:
            self._idle = 0
            self._text_candidate(blocks[-1])
            return None
        if content.strip().upper().rstrip(".!").endswith("FINISH"):
            outcome = self._finish(None, next_candidate)
            if isinstance(outcome, str):
                self._reply_user(outcome, "finish")
                return None
            return outcome
        self._idle += 1
        self.notes.append(f"model reply {self.replies} held no code and no tool call")
        if self._idle >= MAX_IDLE:
            self._stop(f"{MAX_IDLE} replies in a row without code or a tool call")
            return None
        self._reply_user(
            "Your reply had no tool call and no ```python block, so nothing was run. Write the candidate "
            "(write_candidate, or a ```python block defining ModelNew), or reply FINISH.",
            None,
        )
        return None

    def _tool_calls(self, calls: list[Any], next_candidate: int) -> Proposal | None:
        assert self._toolbox is not None
        proposal: Proposal | None = None
        for call in calls:
            name, call_id = call.function.name, call.id
            if proposal is not None or self.stop_reason is not None:
                self._tool_reply(call_id, name, None, "not run: the turn ended before this call", {})
                continue
            args, error = parse_arguments(call.function.arguments)
            started = time.monotonic()
            if args is None:
                self.notes.append(f"malformed tool call {name}: {error}")
                self._tool_reply(
                    call_id, name, call.function.arguments, f"error: {error}", {"malformed": True}
                )
                continue
            if name == "finish":
                outcome = self._finish(call_id, next_candidate)
                if isinstance(outcome, str):
                    self._tool_reply(call_id, name, args, outcome, {}, time.monotonic() - started)
                else:
                    proposal = outcome  # answered later, with the pipeline's result
                continue
            self.progress(f"tool {name}")
            result = self._toolbox.call(name, args)
            index = self._tool_reply(
                call_id, name, args, result.text, result.data, time.monotonic() - started
            )
            if name == "write_candidate" and self._toolbox.current is not None:
                self._turn_attempt[index] = self._toolbox.current.index
            self._after_tool(name, result)
        return proposal

    def _after_tool(self, name: str, result: Any) -> None:
        if result.repeated:
            self._repeats += 1
            self.notes.append(f"the model rewrote a candidate that already failed ({self._repeats} time(s))")
            if self._repeats >= self.limits.max_repeats:
                self._stop(f"the model repeated failing candidates {self._repeats} times")
        elif name == "write_candidate" and result.text.startswith("rejected"):
            self.notes.append(f"static check rejected attempt {result.data.get('attempt')}")

    def _text_candidate(self, source: str) -> None:
        """Plain-text protocol: a ```python block is written, then compiled, verified and profiled."""
        assert self._toolbox is not None
        started = time.monotonic()
        written = self._toolbox.call("write_candidate", {"source": source})
        texts, data = [written.text], dict(written.data)
        attempt = self._toolbox.current
        if attempt is not None and attempt.failure is None:
            profiled = self._toolbox.call("profile", {})
            texts.append(profiled.text)
            data.update(profiled.data)
        texts.append(
            "Reply with an improved ```python block, or FINISH to submit the best verified candidate."
        )
        index = self._reply_user(
            "\n".join(texts), "write_candidate", data, {"source": source}, time.monotonic() - started
        )
        if attempt is not None:
            self._turn_attempt[index] = attempt.index
        self._after_tool("write_candidate", written)

    def _finish(self, call_id: str | None, next_candidate: int) -> Proposal | str:
        """A proposal for the pipeline, or the text telling the model why nothing was submitted."""
        box = self._toolbox
        assert box is not None
        current = box.current
        choice = (
            current if current is not None and current.failure is None and not current.submitted else None
        )
        if choice is None:
            best = box.best_verified()
            choice = best if best is not None and not best.submitted else None
        if choice is None:
            if any(a.submitted for a in box.attempts):
                self._stop("the model finished")
                return "Done: your submitted candidates are with the pipeline."
            if not box.attempts:
                self._stop("the model finished without writing a candidate")
                return "Finished without a candidate."
            self._stop("the model finished without a candidate that passed its checks")
            return f"Nothing to submit: the current candidate failed ({current.failure if current else ''})."
        self._awaiting = (call_id, choice)
        self.progress(f"submitting attempt {choice.index} to the pipeline")
        return self._submit(choice, next_candidate)  # the reply that called finish is the last turn

    def _pipeline_result(self, fb: Feedback, candidate: int) -> None:
        assert self._awaiting is not None
        call_id, attempt = self._awaiting
        self._awaiting = None
        ev = fb.evaluation

        def x(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.2f}x"

        text = (
            f"Pipeline result for attempt {attempt.index}: {ev.status}, reward {fb.reward}, "
            f"{x(fb.speedup_vs_eager)} vs eager, {x(fb.speedup_vs_compile)} vs torch.compile."
            + (f" Reason: {ev.reason.splitlines()[0][:300]}" if ev.reason else "")
            + "\nImprove it further, or call finish again (no changes) to stop."
        )
        data = {"status": ev.status, "reward": fb.reward, "speedup_vs_eager": fb.speedup_vs_eager,
                "speedup_vs_compile": fb.speedup_vs_compile, "pipeline": True}  # fmt: skip
        if call_id is not None:
            index = self._tool_reply(call_id, "finish", {}, text, data)
        else:
            index = self._reply_user(text, "finish", data)
        self.transcript[index].candidate = candidate

    def _final_submission(self, next_candidate: int) -> Proposal | None:
        """At a stop: the best candidate the tools verified and the pipeline has not seen yet (once)."""
        if self._final_done or self._toolbox is None or self._awaiting is not None:
            return None
        self._final_done = True
        best = self._toolbox.best_verified()
        if best is None or best.submitted:
            return None
        self._event(f"submitting attempt {best.index}, the best verified one, before stopping")
        return self._submit(best, next_candidate)

    def _submit(self, attempt: Attempt, next_candidate: int) -> Proposal:
        """The attempt as the pipeline's next candidate; every turn that wrote or submitted it is marked so."""
        attempt.submitted = True
        self._turn_attempt[len(self.transcript) - 1] = attempt.index
        for turn_index, attempt_index in self._turn_attempt.items():
            if attempt_index == attempt.index:
                self.transcript[turn_index].candidate = next_candidate
        return Proposal(
            attempt.source,
            origin=f"llm:{self.endpoint.model}",
            description=attempt.description or f"written by {self.endpoint.model} (attempt {attempt.index})",
            precision=attempt.precision,
        )

    # -- the transcript --------------------------------------------------------------------------

    def _record(self, role: str, content: str, **fields: Any) -> int:
        self.transcript.append(TurnRecord(len(self.transcript), role, self._redact(content), **fields))
        return len(self.transcript) - 1

    def _event(self, text: str, elapsed: float = 0.0) -> None:
        """Something that happened outside the conversation (retries, waits, stops): kept, not sent."""
        text = self._redact(text)
        self.notes.append(text)
        self._record("event", text, elapsed_s=elapsed)
        self.progress(text)

    def _tool_reply(
        self, call_id: str, name: str, args: Any, text: str, data: dict[str, Any], elapsed: float = 0.0
    ) -> int:
        self._messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        return self._record("tool", text, tool_name=name, tool_args=args,
                            tool_result={"call_id": call_id, **data}, elapsed_s=elapsed)  # fmt: skip

    def _reply_user(
        self,
        text: str,
        name: str | None,
        data: dict[str, Any] | None = None,
        args: Any = None,
        elapsed: float = 0.0,
    ) -> int:
        self._messages.append({"role": "user", "content": text})
        return self._record("user", text, tool_name=name, tool_args=args, tool_result=data, elapsed_s=elapsed)

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.endpoint.model,
            "replies": self.replies,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "stop_reason": self.stop_reason,
            "problem": self.problem,
            "notes": self.notes,
            **(self._toolbox.summary() if self._toolbox else {}),
        }


__all__ = ["AgentError", "Endpoint", "LLMAgent", "Limits", "RunBudget", "endpoint_from", "limits_from"]
