"""The LLM agent's tools: read files, write a candidate, compile, verify and profile it through the harness."""

# NOTE: every check here goes through the same harness (evaluate/Handle, static check included) as the
# pipeline; a tool's verdict only guides the model. The pipeline re-verifies whatever the agent proposes.

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelbot.agents.base import PRECISIONS, Precision, Task, job_at_precision, precision_allowed
from kernelbot.harness.evaluate import Handle, Settings, evaluate, may_switch_tf32
from kernelbot.harness.jail import JailUnavailable
from kernelbot.harness.results import Evaluation, Timing, reward, speedup
from kernelbot.harness.sandbox import compiler_caches, run_jailed, worker_env
from kernelbot.harness.staticcheck import scan

READ_LIMIT = 20_000  # characters of one file shown to the model
ERROR_LIMIT = 1_500  # characters of one error shown to the model

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a text file of the repository (path relative to its root).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "list_files",
        "description": "List repository files matching a glob pattern (default **/*.py).",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
    },
    {
        "name": "write_candidate",
        "description": "Write the candidate: a complete Python file defining ModelNew (PyTorch, Triton, or "
        "CUDA C++ bound through torch.utils.cpp_extension.load_inline). Replaces the previous one.",
        "parameters": {
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "precision": {"type": "string", "enum": list(PRECISIONS)},
                "description": {"type": "string", "description": "one line: what it changes"},
            },
            "required": ["source"],
        },
    },
    {
        "name": "compile",
        "description": "Build and import the candidate in a sandbox; returns compiler errors.",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "verify",
        "description": "Check the candidate against the operator on fresh random inputs (correctness only).",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "profile",
        "description": "Verify, then time the candidate against eager PyTorch and torch.compile; returns the reward.",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "finish",
        "description": "Submit the current candidate (or the best verified one) to the pipeline; call it again "
        "without changes to stop.",
        "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}},
    },
]


def openai_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": spec} for spec in TOOL_SPECS]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def trim_error(text: str, limit: int = ERROR_LIMIT) -> str:
    """Compiler output cut to what a model can act on: the error lines and their neighbours, then the tail."""
    lines = [line for line in text.splitlines() if line.strip()]
    wanted = [i for i, line in enumerate(lines) if re.search(r"\berror\b|Error|error:", line)]
    if wanted and len(text) > limit:
        keep = sorted({j for i in wanted[:6] for j in range(max(0, i - 1), min(len(lines), i + 3))})
        text = "\n".join(lines[j] for j in keep)
    return text if len(text) <= limit else text[: limit // 3] + "\n[...]\n" + text[-2 * limit // 3 :]


@dataclass
class Attempt:
    """One candidate source the model wrote, and what the tools found out about it."""

    index: int  # order of writing, from 0
    source: str
    sha: str
    path: Path
    precision: Precision = "exact"
    description: str = ""
    stage: str = "written"  # furthest stage passed: written / compiled / verified / profiled
    failure: str | None = None  # "<status>: <reason>" of the first failing stage
    reward: int | None = None  # the tool's reward (profile); the pipeline's is authoritative
    speedup_vs_eager: float | None = None
    submitted: bool = False  # proposed to the pipeline


def fp64_note(ev: Evaluation) -> str:
    """The error against float64, as a multiple of the float32 reference's own (empty when not measured)."""
    if ev.fp64_ratio is None:
        return ""
    how = " (passed by the float64 rule)" if ev.by_fp64 else ""
    return f"; against float64 {ev.fp64_ratio:.3g}x the float32 reference's error{how}"


@dataclass
class ToolResult:
    text: str  # what the model reads
    data: dict[str, Any] = field(default_factory=dict)  # JSON-able, for the transcript
    repeated: bool = False  # the model rewrote a source that already failed


class Toolbox:
    """The tools of one optimization task: files under the repository root, candidates in `work_dir`."""

    def __init__(
        self,
        task: Task,
        job: dict[str, Any],
        settings: Settings,
        work_dir: Path,
        *,
        eager_ms: float | None,
        compiled: Evaluation | None,
    ) -> None:
        self.task, self.job, self.settings, self.work_dir = task, job, settings, work_dir
        self.root = task.root.resolve()
        self.eager = (
            Evaluation("eager", "ok", timing=Timing.from_samples([eager_ms], 1, "baseline"))
            if eager_ms
            else None
        )
        self.compiled = compiled
        self.attempts: list[Attempt] = []
        work_dir.mkdir(parents=True, exist_ok=True)

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def best_verified(self) -> Attempt | None:
        ok = [a for a in self.attempts if a.failure is None and a.stage in ("verified", "profiled")]
        return max(ok, key=lambda a: (a.reward or 0, a.speedup_vs_eager or 0.0, a.index), default=None)

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        method = getattr(self, f"tool_{name}", None)
        if method is None or name == "finish":
            names = ", ".join(s["name"] for s in TOOL_SPECS)
            return ToolResult(f"error: unknown tool {name!r}; the tools are {names}")
        try:
            return method(**args)
        except TypeError as exc:
            return ToolResult(f"error: bad arguments for {name}: {exc}")

    # -- files -----------------------------------------------------------------------------------

    def _inside(self, rel: str) -> Path | None:
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root) or ".git" in path.relative_to(self.root).parts:
            return None
        return path

    def tool_read_file(self, path: str) -> ToolResult:
        target = self._inside(path)
        if target is None:
            return ToolResult(
                f"error: {path} is outside the repository; only files under its root can be read"
            )
        if not target.is_file():
            return ToolResult(f"error: no file {path} in the repository")
        try:
            text = target.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            return ToolResult(f"error: cannot read {path}: {exc}")
        more = f"\n[... {len(text) - READ_LIMIT} more characters]" if len(text) > READ_LIMIT else ""
        return ToolResult(text[:READ_LIMIT] + more, {"path": path, "chars": len(text)})

    def tool_list_files(self, pattern: str = "**/*.py") -> ToolResult:
        found = sorted(
            str(p.relative_to(self.root))
            for p in self.root.glob(pattern)
            if p.is_file() and self._inside(str(p.relative_to(self.root))) is not None
        )
        return ToolResult("\n".join(found[:200]) or "no file matches", {"count": len(found)})

    # -- candidates ------------------------------------------------------------------------------

    def tool_write_candidate(
        self, source: str, precision: str = "exact", description: str = ""
    ) -> ToolResult:
        if precision not in PRECISIONS:
            return ToolResult(f"error: precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        if not precision_allowed(precision, self.task.policy.model_dump()):
            return ToolResult(
                f"error: the operator's precision policy does not allow {precision}; write an exact candidate"
            )
        digest = sha256(source)
        index = len(self.attempts)
        path = self.work_dir / f"attempt-{index:02d}.py"
        path.write_text(source)
        earlier = next((a for a in self.attempts if a.sha == digest), None)
        attempt = Attempt(index, source, digest, path, precision, description)
        self.attempts.append(attempt)
        data: dict[str, Any] = {"attempt": index, "source_sha256": digest, "lines": source.count("\n") + 1}
        if earlier is not None and earlier.failure is not None:
            attempt.failure = earlier.failure
            return ToolResult(
                f"error: this source is identical to attempt {earlier.index}, which failed ({earlier.failure}). "
                "Change the code before testing it again.",
                {**data, "repeat_of": earlier.index},
                repeated=True,
            )
        findings = scan(source, allow_tf32=may_switch_tf32(job_at_precision(self.job, attempt.precision)))
        if findings:
            attempt.failure = "rejected: static check"
            listed = "\n".join(f"line {f.line}: {f.message}" for f in findings[:5])
            return ToolResult(
                f"rejected by the static check (the harness will not run it):\n{listed}\n"
                "Candidates may not read files, use the network, threads, processes, side streams, "
                "patch torch, or inspect the harness. Remove that code.",
                {**data, "findings": [f.message for f in findings[:5]]},
            )
        return ToolResult(
            f"written as attempt {index} ({data['lines']} lines); static check passed. Next: compile or verify.",
            data,
        )

    def _need_candidate(self) -> Attempt | ToolResult:
        attempt = self.current
        if attempt is None:
            return ToolResult("error: no candidate yet; call write_candidate first")
        if attempt.failure is not None and attempt.failure.startswith("rejected"):
            return ToolResult(f"error: the current candidate was {attempt.failure}; write a new one")
        return attempt

    def _job(self, attempt: Attempt) -> dict[str, Any]:
        return job_at_precision(self.job, attempt.precision)

    def _failed(self, attempt: Attempt, stage: str, ev: Evaluation) -> ToolResult:
        attempt.failure = f"{ev.status}: {ev.reason.splitlines()[0][:200] if ev.reason else ''}"
        hint = {
            "build_error": "fix the build or import error",
            "incorrect": "the output differs from the reference; fix the computation",
            "crashed": "it raised or crashed at run time",
            "timeout": "it ran past the time limit",
            "rejected": "a harness check rejected it",
        }.get(ev.status, "")
        errs = ""
        if ev.max_abs_err is not None:
            errs = f"\nmax abs err {ev.max_abs_err:.3g}, max rel err {ev.max_rel_err or 0:.3g}{fp64_note(ev)}"
        return ToolResult(
            f"{stage} FAILED ({ev.status}): {hint}\n{trim_error(ev.reason)}{errs}",
            {"status": ev.status, "reason": trim_error(ev.reason, 4000), "max_abs_err": ev.max_abs_err},
        )

    def tool_compile(self) -> ToolResult:
        attempt = self._need_candidate()
        if isinstance(attempt, ToolResult):
            return attempt
        with Handle(self._job(attempt), "candidate", self.settings, candidate=str(attempt.path)) as handle:
            if handle.failure is not None:
                return self._failed(attempt, "compile", handle.failure)
        attempt.stage = "compiled" if attempt.stage == "written" else attempt.stage
        return ToolResult(
            "compile OK: built and imported; ModelNew was constructed. Next: verify.", {"status": "ok"}
        )

    def tool_verify(self) -> ToolResult:
        attempt = self._need_candidate()
        if isinstance(attempt, ToolResult):
            return attempt
        ev = evaluate(
            self._job(attempt), "candidate", self.settings, candidate=str(attempt.path), time_it=False
        )
        if not ev.ok:
            return self._failed(attempt, "verify", ev)
        if attempt.stage in ("written", "compiled"):
            attempt.stage = "verified"
        cases = ", ".join(ev.cases[:4]) or "the operator's inputs"
        return ToolResult(
            f"verify OK on {self.settings.seeds} fresh seeds ({cases}); max abs err {ev.max_abs_err or 0:.3g}"
            f"{fp64_note(ev)}. Next: profile.",
            {
                "status": "ok",
                "max_abs_err": ev.max_abs_err,
                "max_rel_err": ev.max_rel_err,
                "fp64_ratio": ev.fp64_ratio,
            },
        )

    def tool_profile(self) -> ToolResult:
        attempt = self._need_candidate()
        if isinstance(attempt, ToolResult):
            return attempt
        ev = evaluate(self._job(attempt), "candidate", self.settings, candidate=str(attempt.path))
        if not ev.ok or ev.timing is None:
            return self._failed(attempt, "profile", ev)
        attempt.stage = "profiled"
        attempt.reward = reward(ev, self.eager, self.compiled)
        attempt.speedup_vs_eager = speedup(self.eager, ev)
        vs_compile = speedup(self.compiled, ev)
        t = ev.timing

        def ms(e: Evaluation | None) -> str:
            return "n/a" if e is None or e.timing is None else f"{e.timing.median_ms:.4g} ms"

        def x(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.2f}x"

        lines = [
            f"profile OK: median {t.median_ms:.4g} ms over {t.samples} samples "
            f"(95% CI {t.ci95_ms[0]:.4g}-{t.ci95_ms[1]:.4g} ms)",
            f"eager {ms(self.eager)} -> speedup {x(attempt.speedup_vs_eager)}; "
            f"torch.compile {ms(self.compiled)} -> speedup {x(vs_compile)}",
            f"reward {attempt.reward} (-1 wrong, 1 correct, 2 >5% faster than eager, 3 also than torch.compile)",
        ]
        ncu = self._ncu_summary(attempt)
        if ncu:
            lines.append(ncu)
        return ToolResult(
            "\n".join(lines),
            {
                "status": "ok",
                "median_ms": t.median_ms,
                "reward": attempt.reward,
                "speedup_vs_eager": attempt.speedup_vs_eager,
                "speedup_vs_compile": vs_compile,
            },
        )

    def _ncu_summary(self, attempt: Attempt) -> str | None:
        """Nsight Compute's view of the candidate's kernels, where `ncu` exists and a GPU runs them.

        In the OS sandbox like every run of the operator (PR code) and the candidate: attacker round 55 ran
        this on the host, where an operator that behaves in the sandbox wrote the parent's GITHUB_TOKEN and
        .git/config out and left a daemon behind."""
        ncu = shutil.which("ncu")
        if self.task.device != "cuda" or ncu is None or self.task.spec.kind != "kernelbench":
            return None
        script = (
            "import runpy, torch\n"
            f"op = runpy.run_path({str(self.root / self.task.spec.path)!r})\n"
            f"ns = runpy.run_path({str(attempt.path)!r})\n"
            "torch.manual_seed(0)\n"
            "m = ns['ModelNew'](*op['get_init_inputs']()).cuda()\n"
            "x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in op['get_inputs']()]\n"
            "m(*x); torch.cuda.synchronize()\n"
        )
        metrics = "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed"
        tool = Path(ncu).resolve().parent  # its install folder (a system one is bound already)
        caches = None if self.settings.cache_dir is None else self.settings.cache_dir / "candidate"
        with tempfile.TemporaryDirectory(prefix="kernelbot-ncu-") as tmp:
            try:
                code, out, err = run_jailed(
                    [ncu, "--csv", "--launch-skip", "0", "--launch-count", "20", "--metrics", metrics,
                     sys.executable, "-c", script],
                    sandbox=self.settings.sandbox, env=worker_env(caches, "cuda", self.settings.gpu),
                    readable=[self.root, attempt.path.parent, *([tool] if len(tool.parts) > 2 else [])],
                    writable=[Path(tmp), *(compiler_caches(caches) if caches is not None else [])],
                    timeout_s=min(120.0, self.settings.timeout_s), cwd=Path(tmp), capture=True,
                )  # fmt: skip
            except (OSError, JailUnavailable) as exc:
                return f"ncu: not available ({type(exc).__name__})"
        if code is None:
            return "ncu: timed out"
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        rows = [line for line in stdout.splitlines() if line.startswith('"') and "," in line]
        if code != 0 or len(rows) < 2:
            return "ncu: no counters (" + trim_error(stderr or stdout, 300).strip() + ")"
        return "ncu (kernel, metric, value):\n" + "\n".join(rows[1:25])

    def summary(self) -> dict[str, Any]:
        return {
            "attempts": [
                {
                    "index": a.index,
                    "sha": a.sha[:12],
                    "stage": a.stage,
                    "failure": a.failure,
                    "reward": a.reward,
                }
                for a in self.attempts
            ]
        }


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A tool call's arguments as a dict, or the reason they cannot be read."""
    if isinstance(raw, dict):
        return raw, None
    if raw in (None, ""):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError) as exc:
        return None, f"arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, None
