#!/usr/bin/env bash
# One device call after the outputs-copy floor (attacker round 52): the CUDA re-check list (the native hooks,
# the fresh-draw and seeding tests among them), then honest CUDA subjects through the jailed harness (eager,
# CuPy, load_inline, torch.compile: none may be refused for a late copy), each with its status and reason.
#   STOP_S=540 bash benchmarks/lab/h200_copy_floor.sh   (writes under $OUT)
set -uo pipefail
: "${OUT:?set OUT}"
STOP_S=${ADV_S:-300} ADVERSARIAL_LIST=benchmarks/lab/adv_recheck.txt bash benchmarks/lab/h200_trust_realsize.sh adversarial
mkdir -p "$OUT/adv" && cp /tmp/kernelbot-results/adversarial/* "$OUT/adv/"
export PYTHONPATH=.:/tmp/kb-site-packages PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
timeout -k 5 "${TG_S:-230}" python3 benchmarks/trust_gpu.py --out "$OUT/tg" --cases "${CASES:-eager,relu_cupy,relu_inline,compile}" \
    --reps 1 >"$OUT/tg.log" 2>&1
tail -5 "$OUT/adv/pytest_adversarial_cuda.log"; grep -E "^\| " "$OUT/tg"/*.md 2>/dev/null | head -12; tail -3 "$OUT/tg.log"
