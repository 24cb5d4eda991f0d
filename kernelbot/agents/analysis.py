"""Run the tracer in a child process (time-limited) and return the operator's facts for rule matching."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelbot.harness.sandbox import worker_env


def analyze_operator(job: dict[str, Any], rewrites: list[str], timeout_s: float = 120.0) -> dict[str, Any]:
    """Facts about the operator (ops, modules, shapes, which rewrites apply). Failures become facts too."""
    with tempfile.TemporaryDirectory(prefix="kernelbot-trace-") as tmp:
        request, answer = Path(tmp) / "in.json", Path(tmp) / "out.json"
        request.write_text(json.dumps({"job": {**job, "device": "cpu"}, "rewrites": rewrites}))
        try:
            subprocess.run(
                [sys.executable, "-m", "kernelbot.agents.tracer", str(request), str(answer)],
                env=worker_env(None, "cpu"),
                timeout=timeout_s,
                capture_output=True,
                check=False,
            )
            result = json.loads(answer.read_text())
        except subprocess.TimeoutExpired:
            return {"traceable": False, "trace_error": f"analysis timed out after {timeout_s:g} s"}
        except (OSError, ValueError) as exc:
            return {"traceable": False, "trace_error": f"analysis failed: {exc}"}
    if not result.get("ok"):
        return {"traceable": False, "trace_error": result.get("error", "analysis failed")}
    facts: dict[str, Any] = result["facts"]
    return facts
