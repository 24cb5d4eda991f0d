"""Device check of the GPU rules: each one alone, through the real pipeline, on a small operator it fits.

On the GPU machine, from the repository root:   PYTHONPATH=. python3 benchmarks/gpu_rules_check.py --out DIR
Optional: --rules cuda-graph-capture,tf32-matmul (a subset); --time-budget 1.0 (seconds per timed subject).

For every rule, `kernelbot.pipeline.optimize.optimize_operator` runs with `SearchAgent([rule])` (the operator's eager and
torch.compile baselines, the analysis, then the rule's candidate through the sandboxed harness) and prints status,
reward and speedups.
Writes DIR/gpu_rules_check.json; exits 1 if any rule's candidate was not `ok`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kernelbot.agents.rules import load_rules, rewrites_for  # noqa: E402
from kernelbot.agents.search import SearchAgent  # noqa: E402
from kernelbot.config import Config, HarnessSettings, PrecisionPolicy  # noqa: E402
from kernelbot.fingerprint import collect  # noqa: E402
from kernelbot.pipeline.optimize import optimize_operator  # noqa: E402
from kernelbot.spec import kernelbench_spec  # noqa: E402

OPERATORS = {
    # Launch-bound: a few tiny kernels, well under 0.1 ms eager.
    "tiny_mlp": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, n):
                super(Model, self).__init__()
                self.fc1 = nn.Linear(n, n)
                self.fc2 = nn.Linear(n, n)

            def forward(self, x):
                return torch.sigmoid(self.fc2(torch.relu(self.fc1(x)))) * 2.0

        def get_inputs():
            return [torch.randn(16, 256)]

        def get_init_inputs():
            return [256]
    """,
    "conv_bn_relu": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, cin, cout):
                super(Model, self).__init__()
                self.conv = nn.Conv2d(cin, cout, 3, padding=1)
                self.bn = nn.BatchNorm2d(cout)

            def forward(self, x):
                return torch.relu(self.bn(self.conv(x)))

        def get_inputs():
            return [torch.randn(32, 64, 56, 56)]

        def get_init_inputs():
            return [64, 64]
    """,
    "gemm_gelu_scale_clamp": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self, k, n, scale):
                super(Model, self).__init__()
                self.lin = nn.Linear(k, n)
                self.scale = scale

            def forward(self, x):
                y = F.gelu(self.lin(x)) * self.scale
                return torch.clamp(y + 0.1, min=-0.5, max=0.5)

        def get_inputs():
            return [torch.randn(4096, 2048)]

        def get_init_inputs():
            return [2048, 4096, 0.75]
    """,
}
RULE_OPERATOR = {
    "cuda-graph-capture": "tiny_mlp",
    "cudnn-benchmark": "conv_bn_relu",
    "channels-last-conv": "conv_bn_relu",
    "conv-bn-fold": "conv_bn_relu",
    "fused-elementwise-epilogue": "gemm_gelu_scale_clamp",
    "tf32-matmul": "gemm_gelu_scale_clamp",
    "bf16-autocast": "gemm_gelu_scale_clamp",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rules", default=",".join(RULE_OPERATOR))
    parser.add_argument("--time-budget", type=float, default=1.0)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rules = {r.id: r for r in load_rules()}
    root = Path(tempfile.mkdtemp(prefix="kernelbot-rules-"))
    for name, source in OPERATORS.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source).lstrip())
    config = Config(
        precision=PrecisionPolicy(
            allow_tf32=True, allow_bf16=True
        ),  # the precision rules need the policy's leave
        harness=HarnessSettings(time_budget_s=args.time_budget, max_samples=60),
    )
    fingerprint = collect(args.device)
    results: list[dict[str, Any]] = []
    failed = 0
    for rule_id in [r for r in args.rules.split(",") if r]:
        operator = RULE_OPERATOR[rule_id]
        spec = kernelbench_spec(f"{operator}.py")
        agent = SearchAgent([rules[rule_id]])
        started = time.monotonic()
        row: dict[str, Any] = {"rule": rule_id, "operator": operator}
        try:
            result = optimize_operator(
                spec,
                root,
                config,
                fingerprint,
                agent,
                out_dir=args.out / "runs",
                budget=2,
                time_s=200,
                rules_for_analysis=rewrites_for([rules[rule_id]]),
                progress=lambda line: print(f"  {line}", flush=True),
            )
            check = result.check
            row.update(
                eager_ms=check.eager.timing.median_ms if check.eager.timing else None,
                compile_ms=check.compiled.timing.median_ms
                if check.compiled and check.compiled.timing
                else None,
                skipped=result.skipped,
                candidates=[c.to_json() for c in result.candidates],
            )
            if not result.candidates or any(c.evaluation.status != "ok" for c in result.candidates):
                failed += 1
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["trace"] = traceback.format_exc()[-3000:]
            failed += 1
        row["wall_s"] = round(time.monotonic() - started, 1)
        results.append(row)
        (args.out / "gpu_rules_check.json").write_text(
            json.dumps({"fingerprint": fingerprint.to_dict(), "rules": results}, indent=2)
        )
    print(
        f"\n{'rule':28} {'operator':24} {'status':12} {'reward':>6} {'vs eager':>9} {'vs compile':>10} {'eager ms':>9} {'cand ms':>9}"
    )
    for row in results:
        for c in row.get("candidates") or [
            {"status": row.get("error", "no candidate: " + str(row.get("skipped")))[:60]}
        ]:

            def num(v: Any, f: str = "{:.3f}") -> str:
                return f.format(v) if isinstance(v, int | float) else "-"

            print(
                f"{row['rule']:28} {row['operator']:24} {str(c.get('status'))[:40]:12} {num(c.get('reward'), '{}'):>6} "
                f"{num(c.get('speedup_vs_eager'), '{:.2f}x'):>9} {num(c.get('speedup_vs_compile'), '{:.2f}x'):>10} "
                f"{num(row.get('eager_ms'), '{:.4f}'):>9} {num(c.get('median_ms'), '{:.4f}'):>9}"
            )
            if c.get("reason"):
                print(f"    reason: {c['reason'][:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
