#!/usr/bin/env bash
# One device call (carry .whl and .dev, benchmarks/lab/device_carry.sh): the paths that changed without a GPU.
#   1. the adversarial suite on CUDA: every cheat through the worker's CUDA output copy (CuPy's cudaMemcpy);
#   2. the link's GPU tests;
#   3. the sparse kernels' bfloat16 path: tests/test_rule_sparse.py (nvcc) and benchmarks.sparse on the quick
#      set in bfloat16, every format verified against torch's product.
set -u
: "${OUT:?set OUT to the folder for results}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c 'import torch, cupy, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, cupy.__version__)'
    bwrap --version; date -u
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
KERNELBOT_ADVERSARIAL_DEVICE=cuda timeout -k 5 "${ADV_S:-280}" python3 -m pytest -o addopts= -m "not slow" -q -rfE \
    -p no:cacheprovider tests/test_adversarial.py >"$OUT/adversarial_cuda.log" 2>&1
echo "adversarial (cuda): rc $? $(tail -1 "$OUT/adversarial_cuda.log")"
timeout -k 5 "${LINK_S:-90}" python3 -m pytest -o addopts= -m gpu -q -rfE -p no:cacheprovider tests/test_link.py \
    >"$OUT/link_gpu.log" 2>&1
echo "link (gpu): rc $? $(tail -1 "$OUT/link_gpu.log")"
timeout -k 5 60 python3 -m pytest -o addopts= -q -rfE -p no:cacheprovider tests/test_rule_sparse.py >"$OUT/rule_sparse.log" 2>&1
echo "rule_sparse: rc $? $(tail -1 "$OUT/rule_sparse.log")"
timeout -k 5 "${BF16_S:-150}" python3 -m benchmarks.sparse --dtype bfloat16 --quick --budget-s 0.3 --out "$OUT/sparse_bf16_quick" \
    >"$OUT/sparse_bf16_quick.log" 2>&1
echo "sparse bf16 quick: rc $?"
python3 - "$OUT/sparse_bf16_quick/results.json" <<'PY' 2>/dev/null
import collections, json, sys
rows = json.load(open(sys.argv[1]))["rows"]
print(collections.Counter((r["subject"], r["status"]) for r in rows))
print([(r["problem"], r["subject"], r["error"][:120]) for r in rows if r["status"] in ("incorrect", "error")][:8])
PY
