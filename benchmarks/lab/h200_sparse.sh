#!/usr/bin/env bash
# The sparse session on one H200 (benchmarks/results/2026-12-03-h200-sparse/), one device call from the
# repository root with .whl and .dev carried (benchmarks/lab/device_carry.sh):
#   1. tests/test_rule_sparse.py there (the plans decoded, the kernels built by the image's nvcc);
#   2. python -m benchmarks.sparse: every format on the generated set, verified against cuSPARSE and timed;
#   3. kernelbot optimize --agent search on the operators of benchmarks/sparse_ops/ (benchmarks.suite), the
#      sparse rules chosen by the analysis's features and every candidate checked by the harness.
#   4. with BF16_S set (seconds): the set again in bfloat16 (--dtype bfloat16), the kernels' bfloat16 path,
#      never run on a GPU before.
# Stage times: SPARSE_S (330), OPS_S (200; 0: skipped), OPS_TIME (--time per operator, 50), BF16_S (0: skipped).
# WIDTHS: the SpMM widths of stages 2 and 4 (default "1 32"; 1 is SpMV).
set -u
: "${OUT:?set OUT to the folder for results}"
[ -d /tmp/site/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$OUT/gpu.csv"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__)" \
    >"$OUT/versions.txt" 2>&1
timeout -k 5 60 python3 -m pytest -o addopts= -q -p no:cacheprovider tests/test_rule_sparse.py >"$OUT/pytest_sparse.log" 2>&1
echo "tests: $(tail -1 "$OUT/pytest_sparse.log")"
timeout -k 5 "${SPARSE_S:-330}" python3 -m benchmarks.sparse --widths ${WIDTHS:-1 32} --out "$OUT/kernels" >"$OUT/kernels.log" 2>&1
echo "kernels: rc $?"; tail -40 "$OUT/kernels.log"
if [ "${BF16_S:-0}" -gt 0 ]; then
    timeout -k 5 "$BF16_S" python3 -m benchmarks.sparse --dtype bfloat16 --widths ${WIDTHS:-1 32} --out "$OUT/kernels_bf16" >"$OUT/kernels_bf16.log" 2>&1
    echo "kernels bf16: rc $?"; tail -30 "$OUT/kernels_bf16.log"
fi
[ "${OPS_S:-200}" -gt 0 ] || exit 0
timeout -k 5 "${OPS_S:-200}" python3 -m benchmarks.suite table --set benchmarks/sparse_ops --device cuda \
    --out "$OUT/ops" --time "${OPS_TIME:-50}" --stop-after "${OPS_S:-200}" >"$OUT/ops.log" 2>&1
echo "ops: rc $?"; tail -30 "$OUT/ops.log"
[ -f "$OUT/ops/table.md" ] && cat "$OUT/ops/table.md"
