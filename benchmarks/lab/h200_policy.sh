#!/usr/bin/env bash
# Issue 22's cross-set criterion on one GPU, from the repository root with .whl and .dev carried
# (benchmarks/lab/device_carry.sh), one or more device calls:
#   SUITE_DIR=benchmarks/results/DIR/heldout bash benchmarks/lab/h200_policy.sh
# 1. `benchmarks.suite table --set heldout` with a --time long enough that each search tries every rule that
#    matches (benchmarks/heldout/ was written after the recorded runs the policy trains on, so none of its
#    operators is in them). SUITE_DIR is a tracked folder: a later call, even on a fresh machine, resumes
#    from its history.db. STOP_S bounds this call (default 540), TIME_S each search (default 300).
# 2. benchmarks.train_policy --evaluate-on that database: trained on benchmarks/results/*/optimize_results.json,
#    each held-out search replayed in the learned and in the fixed order (evaluations and seconds to its
#    final best, reward >= 2 within 4 candidates): $OUT/cross_set.md.
set -u
: "${OUT:?set OUT to the folder for results}" "${SUITE_DIR:?set SUITE_DIR to a results folder}"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
nvidia-smi --query-gpu=name,driver_version --format=csv >"$OUT/gpu.csv"
left=$(( start + ${STOP_S:-540} - $(date +%s) - 40 ))
python3 -m benchmarks.suite table --set heldout --device cuda --out "$SUITE_DIR" --time "${TIME_S:-300}" \
    --stop-after "$left" ${ONLY:+--only $ONLY} >"$OUT/suite.log" 2>&1
echo "suite: rc $?"; tail -20 "$OUT/suite.log"
python3 -m benchmarks.train_policy --evaluate-on "sqlite:///$SUITE_DIR/history.db" --report "$OUT/cross_set.md" \
    >"$OUT/cross_set.json" 2>"$OUT/cross_set.err"
cat "$OUT/cross_set.md" "$OUT/cross_set.err"
mkdir -p "$OUT/suite" && cp "$SUITE_DIR"/history.db "$SUITE_DIR"/table.md "$OUT/suite/" 2>/dev/null
