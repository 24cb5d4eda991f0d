#!/usr/bin/env bash
# Issue 20 on one H200 (benchmarks/results/2026-12-03-h200-verdict/), from the repository root with .whl and
# .dev carried (benchmarks/lab/device_carry.sh). Stages, one per device call:
#   bash benchmarks/lab/h200_verdict.sh first   the graph-sample GPU tests, then verdict_power on 10us and 25us
#                                              (call 1 of the session: the matmul operator, --op matmul)
#   bash benchmarks/lab/h200_verdict.sh third   verdict_power on SIZES again (after each batch was relocated)
#   bash benchmarks/lab/h200_verdict.sh second  the graph-sample GPU tests, then verdict_power on SIZES
#                                              (default 25us 300us) with the elementwise operator
#   bash benchmarks/lab/h200_verdict.sh pairs   verdict_power --rule pairs on SIZES: a pool of SLOTS slots of
#                                              fresh process pairs a size, trials replayed from it, one full
#                                              measure_pair over pairs a size (issue 20's pairs rule)
# DEADLINE (s) bounds verdict_power in each call; PAIRS=N adds a full verdict over N fresh process pairs.
set -u
: "${OUT:?set OUT to the folder for results}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu_$1.csv"
python3 -c "import torch, pynvml; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nvml', pynvml.nvmlSystemGetDriverVersion() if not pynvml.nvmlInit() else '')" >"$OUT/versions.txt" 2>&1
case "$1" in
third) sizes="${SIZES:-25us 300us}" ;;  # after Subject.relocate: the same sizes again, no tests
first)
    timeout -k 5 150 python3 -m pytest -o addopts= -q -p no:cacheprovider -m gpu tests/test_gpu_graph_samples.py >"$OUT/pytest_graph.log" 2>&1
    echo "graph tests: $(tail -1 "$OUT/pytest_graph.log")"
    sizes="10us 25us" ;;
second)
    timeout -k 5 150 python3 -m pytest -o addopts= -q -p no:cacheprovider -m gpu tests/test_gpu_graph_samples.py >"$OUT/pytest_graph.log" 2>&1
    echo "graph tests: $(tail -1 "$OUT/pytest_graph.log")"
    sizes="${SIZES:-25us 300us}" ;;
pairs)
    timeout -k 10 "$((${DEADLINE:-480} + 90))" python3 benchmarks/verdict_power.py --rule pairs --sizes ${SIZES:-25us 300us} \
        --trials 20 --slots "${SLOTS:-40}" --seed "${SEED:-0}" --deadline "${DEADLINE:-480}" --out "$OUT/pairs" 2>&1 \
        | tee "$OUT/verdict_pairs.log" | tail -30
    exit 0 ;;
*) echo "stage: first | second | third | pairs"; exit 2 ;;
esac
timeout -k 10 "$((${DEADLINE:-380} + 60))" python3 benchmarks/verdict_power.py --sizes $sizes --trials 20 --op "${OP:-scale}" \
    --deadline "${DEADLINE:-380}" --process-pairs "${PAIRS:-0}" --out "$OUT/$1" 2>&1 | tee "$OUT/verdict_$1.log" | grep -v "trial [0-9]*:" | tail -30
grep -c "trial [0-9]*:" "$OUT/verdict_$1.log"
