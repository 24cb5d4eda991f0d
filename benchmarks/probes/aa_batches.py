"""Probe: raw per-batch timings of the same operator in two sandboxes, interleaved (for tuning the verdict rule offline)."""

import json
import sys
import time
from pathlib import Path

from kernelbot.harness.evaluate import Handle, Settings

out = Path(sys.argv[1])
rounds = int(sys.argv[2])
src = Path("/tmp/aa_op")
src.mkdir(exist_ok=True)
result = {}
for name, (m, k, n) in {"small": (1024, 6400, 1024), "large": (4096, 6400, 4096)}.items():
    (src / f"{name}.py").write_text(f"""
import torch
def mm(a, b):
    return a @ b
def make(device):
    return [torch.randn({m}, {k}, device=device, dtype=torch.bfloat16), torch.randn({k}, {n}, device=device, dtype=torch.bfloat16)]
""")
    job = {
        "kind": "declared",
        "root": str(src),
        "callable": f"{name}.py:mm",
        "inputs": f"{name}.py:make",
        "reference": None,
        "shapes": [],
        "dtypes": ["bfloat16"],
        "device": "cuda",
        "allow_tf32": False,
        "atol": 1e-2,
        "rtol": 1e-2,
    }
    s = Settings(time_budget_s=0.6, timeout_s=120)
    with Handle(job, "operator", s) as a, Handle(job, "operator", s) as b:
        a.check()
        b.check()
        batches = {"a": [], "b": []}
        t0 = time.time()
        for r in range(rounds):
            for side, h in (("a", a), ("b", b)) if r % 2 == 0 else (("b", b), ("a", a)):
                ans = h.time_batch(6, 6, 0.1)
                if a.calls and b.calls is None:
                    b.calls = a.calls
                batches[side].append(ans["times_ms"])
        result[name] = {"batches": batches, "calls": a.calls, "wall_s": time.time() - t0}
(out / "aa_batches.json").write_text(json.dumps(result))
print({k: (v["calls"], round(v["wall_s"], 1)) for k, v in result.items()})
