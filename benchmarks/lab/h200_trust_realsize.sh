#!/usr/bin/env bash
# One device call of the ninth GPU session (nvidia-h200, one GPU), from the repository root, carrying
# .whl (pydantic, SQLAlchemy, alembic, platformdirs and their needs), .dev (bubblewrap and its three
# libraries, built on the CI machine's Debian) and .old (the harness before the judge/subject split):
#   bash benchmarks/lab/h200_trust_realsize.sh trustgpu     # CUDA candidates in the sandbox, overhead before/after
#   bash benchmarks/lab/h200_trust_realsize.sh adversarial  # the adversarial and trust suites on CUDA
#   bash benchmarks/lab/h200_trust_realsize.sh gputests     # the GPU tests written since the last device session
#   bash benchmarks/lab/h200_trust_realsize.sh realsize   # `kernelbot optimize --time 120` over benchmarks/realsize/
#   SUITE_DIR=benchmarks/results/DIR/suite bash benchmarks/lab/h200_trust_realsize.sh suite
#       # `python -m benchmarks.suite table --set realsize` into SUITE_DIR (a tracked folder, so the next call
#       # resumes from its history.db even on a fresh machine; ONLY= names problems); GPUTESTS_S=N first
#       # runs every gpu-marked test for at most N seconds
# STOP_S ends the stage's work that many seconds after it starts (default 540); a realsize call skips the
# operators an earlier call on the same (still warm) machine finished. Results: $OUT/<stage>.tar.gz.
set -u
stage=${1:?trustgpu, gputests, adversarial, realsize or suite}
: "${OUT:?set OUT to the folder for results}"
start=$(date +%s)
stop_at=$((start + ${STOP_S:-540}))
keep=/tmp/kernelbot-results
mkdir -p "$keep/$stage"
# A folder named "-packages", as the audit hook counts installed packages (audit._trusted_dirs): under /tmp/site
# the carried more_itertools was untrusted code, and setuptools (inductor's CPU build imports it) picks that copy
# over its vendored one, so an honest CPU torch.compile under the hook failed on the H100 image (2026-12-07).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kb-site-packages .whl/*.whl || exit 1
export PYTHONPATH=.:/tmp/kb-site-packages PYTHONUNBUFFERED=1 PATH="$PWD/.dev/bin:$PATH" KERNELBOT_CACHE_DIR=/root/kernelbot-cache
left() { echo $((stop_at - $(date +%s))); }
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    python3 -c 'import torch, cupy, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, cupy.__version__, triton.__version__)'
    bwrap --version
    date -u
} >"$keep/$stage/env.txt" 2>&1

if [ "$stage" = trustgpu ]; then
    # .prev (optional): a `git archive` of an earlier commit, to show what a change of the harness did
    timeout -k 5 "$(( $(left) - 10 ))" python3 benchmarks/trust_gpu.py --out "$keep/$stage" --old .old \
        $([ -d .prev ] && echo --prev .prev) --cases "${CASES:-eager,relu_cupy,compile}" --reps "${REPS:-1}" \
        >"$keep/$stage/trust_gpu.log" 2>&1
elif [ "$stage" = gputests ]; then  # the GPU tests written since the last device session
    timeout -k 5 "$(( $(left) - 10 ))" python3 -m pytest -o addopts= -m gpu -q -rA -p no:cacheprovider \
        tests/test_link.py tests/test_gpu_launch_bound.py >"$keep/$stage/pytest_gpu.log" 2>&1
elif [ "$stage" = suite ]; then
    : "${SUITE_DIR:?set SUITE_DIR to a results folder}"
    if [ "${GPUTESTS_S:-0}" -gt 0 ]; then
        # the files with gpu-marked tests (collecting all of tests/ needs PyGithub, which the image lacks)
        timeout -k 5 "$GPUTESTS_S" python3 -m pytest -o addopts= -m gpu -q -rA -p no:cacheprovider \
            $(grep -l "mark.gpu" tests/test_*.py | grep -v test_gpu_llm_agent) >"$keep/$stage/pytest_gpu.log" 2>&1
    fi
    # shellcheck disable=SC2086
    python3 -m benchmarks.suite table --set realsize --device cuda --out "$SUITE_DIR" --time "${TIME_S:-120}" \
        --stop-after "$(( $(left) - 20 ))" ${ONLY:+--only $ONLY} >"$keep/$stage/suite.log" 2>&1
    mkdir -p "$OUT/suite" && cp "$SUITE_DIR"/history.db "$SUITE_DIR"/table.md "$OUT/suite/"
    tar -czf "$OUT/suite-dir.tar.gz" -C "$SUITE_DIR" .  # the logs and candidates too (a device call returns few files)
elif [ "$stage" = adversarial ]; then
    # ADVERSARIAL_LIST=FILE: the node ids in FILE, one a line (some hold spaces); else ADVERSARIAL_TESTS
    if [ -n "${ADVERSARIAL_LIST:-}" ]; then mapfile -t tests <"$ADVERSARIAL_LIST"
    else read -ra tests <<<"${ADVERSARIAL_TESTS:-tests/test_adversarial.py tests/test_trust.py}"; fi
    KERNELBOT_ADVERSARIAL_DEVICE=cuda timeout -k 5 "$(( $(left) - 10 ))" python3 -m pytest -o addopts= \
        -m "not slow" -q -rA -p no:cacheprovider "${tests[@]}" \
        >"$keep/$stage/pytest_adversarial_cuda.log" 2>&1
elif [ "$stage" = realsize ]; then
    # The ten of the tenth session again first (each showed a harness limit fixed since), then the rest.
    order="07_gelu_6p4gb 05_matmul_sum_cancel 26_vit_like 25_efficientnet_like 27_gru 01_gemm_4096 \
        10_softmax_rows 22_attention_manual 08_fma_2gb 17_conv2d_3x3 23_mlp_block 12_layernorm"
    [ -n "${ONLY:-}" ] && order=$ONLY  # ONLY="05_matmul_sum_cancel ...": those alone, in that order
    for f in benchmarks/realsize/[0-9][0-9]_*.py; do
        [ -n "${ONLY:-}" ] && break
        n=$(basename "$f" .py)
        case " $order " in *" $n "*) ;; *) order="$order $n" ;; esac
    done
    for n in $order; do
        [ -e "$keep/realsize/$n.json" ] && continue
        [ "$(left)" -lt $((${TIME_S:-120} + 30)) ] && { echo "not started (call's end): $n" >>"$keep/realsize/log.txt"; continue; }
        t0=$(date +%s.%N)
        # `kernelbot optimize` imports only its own command (the image has no PyGithub)
        timeout -k 5 $((${TIME_S:-120} + 50)) python3 -m kernelbot.cli optimize \
            "benchmarks/realsize/$n.py" --agent search --time "${TIME_S:-120}" --device cuda --repo . \
            --out "/tmp/kernelbot-candidates/$n" --json "$keep/realsize/$n.json" \
            >"$keep/realsize/$n.log" 2>&1
        rc=$?
        echo "$n rc=$rc wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" >>"$keep/realsize/log.txt"
    done
fi
tar -czf "$OUT/$stage.tar.gz" -C "$keep" "$stage"
cat "$keep/$stage"/*.md "$keep/$stage/log.txt" 2>/dev/null | tail -40
tail -5 "$keep/$stage"/*.log 2>/dev/null | tail -60
