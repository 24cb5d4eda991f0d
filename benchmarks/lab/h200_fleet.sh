#!/usr/bin/env bash
# Issue 24 (and the sparse re-run of issue 21) on one nvidia-h200-x2 machine, from the repository root with
# .whl and .dev carried (benchmarks/lab/device_carry.sh). One stage per device call:
#   bash benchmarks/lab/h200_fleet.sh a   GPU 0: the review unsharded on one GPU (benchmarks.fleet, one_gpu)
#                                         GPU 1: the sparse stages (benchmarks/lab/h200_sparse.sh) beside it
#   bash benchmarks/lab/h200_fleet.sh b   both GPUs: the review with the pool, then sharded over two runners
#   SHARDED=1 bash ... c                  the sharded review first (stage b's plan had no PyGithub there)
#   bash benchmarks/lab/h200_fleet.sh c   kernelbot optimize over real-size problems, --gpus 1 then --gpus 2
#                                         (ONLY: the problem stems; TIME: --time per problem)
# When only one H200 is lent (the x2 went back after stage b on 2026-12-04):
#   bash benchmarks/lab/h200_fleet.sh s   the sparse stages alone;   bash ... d   one_gpu and sharded on it
# Every process gets the NVLink multicast variables the device docs require.
set -u
: "${OUT:?set OUT to the folder for results}"
[ -d /tmp/site/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu_$1.csv"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__)" >"$OUT/versions.txt" 2>&1
case "$1" in
a)
    (mkdir -p "$OUT/sparse" && CUDA_VISIBLE_DEVICES=1 OUT="$OUT/sparse" SPARSE_S="${SPARSE_S:-300}" OPS_S="${OPS_S:-170}" \
        bash benchmarks/lab/h200_sparse.sh >"$OUT/sparse.log" 2>&1) &
    timeout -k 10 560 python3 -m benchmarks.fleet review --out "$OUT/review" --gpus 2 --ways one_gpu 2>&1 | tail -20
    wait
    tail -50 "$OUT/sparse.log" ;;
b)
    timeout -k 10 560 python3 -m benchmarks.fleet review --out "$OUT/review" --gpus 2 --ways pool,sharded 2>&1 | tail -20 ;;
c)
    [ -z "${SHARDED:-}" ] || timeout -k 10 200 python3 -m benchmarks.fleet review --out "$OUT/review" --gpus 2 --ways sharded 2>&1 | tail -14
    timeout -k 10 "${OPT_S:-570}" python3 -m benchmarks.fleet optimize --out "$OUT/optimize" --gpus 2 --time "${TIME:-40}" \
        --only ${ONLY:-05_matmul_sum_cancel 06_matmul_divide_mean 13_rmsnorm_manual 17_conv2d_3x3 12_layernorm 09_swish_scale_clamp} 2>&1 | tail -20 ;;
s)  # one GPU: the sparse stages alone
    mkdir -p "$OUT/sparse" && OUT="$OUT/sparse" SPARSE_S="${SPARSE_S:-300}" OPS_S="${OPS_S:-170}" \
        bash benchmarks/lab/h200_sparse.sh >"$OUT/sparse.log" 2>&1; tail -45 "$OUT/sparse.log" ;;
d)  # one GPU: the review unsharded, then sharded in two (the shards queue on the one GPU's lock)
    timeout -k 10 560 python3 -m benchmarks.fleet review --out "$OUT/review" --gpus 2 --ways one_gpu,sharded 2>&1 | tail -16 ;;
*) echo "stage: a | b | c | s | d"; exit 2 ;;
esac
# A call brings back a limited number of files: the details travel as one archive per stage.
cd "$OUT" && find . -name '*.db' -size +20M -delete && tar -czf "detail_$1.tgz" --exclude='*.tgz' --exclude=repo . \
    && find . -mindepth 1 -maxdepth 1 ! -name '*.tgz' ! -name '*.csv' ! -name versions.txt -exec rm -rf {} +
