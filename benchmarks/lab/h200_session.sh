#!/usr/bin/env bash
# The GPU runs behind benchmarks/results/2026-11-30-h200-x2/, as two device calls on one nvidia-h200-x2 machine
# (two H200s, 32 cores), from the repository root, with the wheels of .whl (and .whl-llm for `call1`) carried:
#   bash benchmarks/lab/h200_session.sh call1   # GPU 0: verdict trials | GPU 1: build caches, then the model agent
#   bash benchmarks/lab/h200_session.sh call2   # GPU 0 and GPU 1: `kernelbot optimize` over half the operators each
#   DONE="rows files" bash benchmarks/lab/h200_session.sh call2   # (call3) the operators call2 had no time for
#   DONE="rows files" bash benchmarks/lab/h200_session.sh call4   # what was left, see below
#   bash benchmarks/lab/h200_session.sh warm    # caches only, both GPUs: to re-run just the optimize table (then call2)
# The optimize table of the third session (after the TF32-pin fix, stacking, problems 33-37), two calls:
#   bash benchmarks/lab/h200_session.sh table   # both GPUs: build the caches, then `timed` until the call's end
#   bash benchmarks/lab/h200_session.sh more    # both GPUs: `timed` for the operators no earlier call on this machine did
#   bash benchmarks/lab/h200_session.sh diag    # GPU 0: the compile-baseline diagnostic; GPU 1: more of the table
# The fourth session (tf32x3, compile baseline timed twice): the GPU tests beside the warm stage, then the table:
#   GPU_TESTS="tests/test_gpu_tf32x3.py tests/test_gpu_stacks.py tests/test_inputs.py" bash ... table; more; more2
# The fifth session (timing protocol 2: no autograd in timed calls; analysis facts cached by the warm stage):
#   GPU_TESTS="tests/test_gpu_tf32x3.py tests/test_gpu_stacks.py tests/test_inputs.py tests/test_gpu_timing.py" \
#     PROBE=1 WARM_S=400 FIRST=35_,36_,37_ bash ... table; then more, more2 with FIRST the same
# Next: the GPU tests alone on an idle GPU first (the side-stream test of run 5 shared GPU 0 with the warm
# stage), e.g. KERNELBOT_ADVERSARIAL_DEVICE=cuda python3 -m pytest -o addopts= -m "not slow" tests/test_adversarial.py
#   and python3 -m pytest -o addopts= -m gpu tests/test_gpu_timing.py, then the table under timing protocol 3.
# The sixth session (timing protocol 3; the GPU tests, the adversarial suite first, on GPU 0 alone):
#   GPU_TESTS="tests/test_gpu_timing.py tests/test_gpu_tf32x3.py tests/test_gpu_stacks.py tests/test_inputs.py" \
#     ALONE=1 ADVERSARIAL=1 WARM_S=330 FIRST=35_,36_,37_,34_,19_,20_ CALL_S=570 bash ... table; then more, more2
#   (ALONE=1, since removed: GPU 0 now runs its checks alone first and then builds its own shard's caches)
# The seventh session (all 42 under protocol 3; the elementwise probe alone on GPU 0 before its warm stage):
#   PROBE="elementwise_bandwidth:17_silu_manual.py elementwise_bandwidth:18_gelu_tanh_manual.py" PROBE_S=110 \
#     WARM_S=230 CALL_S=565 FIRST=34_,35_,37_,20_,bias_gelu,linear_relu,rowmean,02_,06_,12_,27_,29_,33_ \
#     LAST=17_,18_,30_ bash ... table; then more (CALL_S=560), more2 (CALL_S=555): 1671 device seconds.
# The eighth session (all 42 again: row-softmax-kernel, tf32x3 on convolutions with a CuPy split kernel, the
# float4 epilogue, conv1x1-matmul, split-k-linear, extra stack bases; their GPU tests alone on GPU 0 first):
#   GPU_TESTS="tests/test_gpu_row_softmax.py tests/test_gpu_tf32x3.py tests/test_gpu_stacks.py \
#     tests/test_gpu_epilogue.py" TESTS_S=200 WARM_S=230 CALL_S=560 \
#     FIRST=20_,34_,06_,07_,19_,22_,23_,28_,36_,conv_bn_relu,35_,37_,32_,27_,02_,linear_relu \
#     LAST=16_,30_,10_,04_,11_ bash ... table; then more, more2 (CALL_S as time allows).
#   (1726 s: the GPU tests ran out their 200 s after 29 of 38; 29 of the 42 operators were measured.)
# Next: GPU_TESTS="tests/test_gpu_stacks.py tests/test_gpu_epilogue.py" (the 8 run 8 did not reach), then the 13
#   operators run 8 did not measure: ONLY=01_,03_,04_,05_,10_,11_,16_,21_,24_,25_,26_,30_,31_ ... table.
# PROBE="name[:ARG] ..." runs benchmarks/probes/<name>.py OUT.json [ARG] after the GPU tests (PROBE=1:
# tf32x3_accuracy); FIRST puts those operators first in `timed`, LAST those last.
# Each GPU runs one timed job at a time; the two jobs of a call have their own cores (taskset), so neither
# times anything while the other builds on its cores. Results: $OUT/<stage>.tar.gz (the device tool brings
# back only a few files), candidates' sources left out.
set -u
stage=${1:?call1 or call2}
: "${OUT:?set OUT to the folder for results}"
out=/tmp/kernelbot-results/$stage
mkdir -p "$out"
wheels=(.whl/*.whl)
[ -d .whl-llm ] && wheels+=(.whl-llm/*.whl)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${wheels[@]}" || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 KERNELBOT_CACHE_DIR=/root/kernelbot-cache
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv >"$out/gpus_$stage.csv"

kill_sandboxes_on() {  # sandboxes run in their own sessions: end those a killed job left on GPU $1
    for p in $(pgrep -f kernelbot.harness.worker); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "CUDA_VISIBLE_DEVICES=$1" && kill -9 "$p"
    done
}

forget_shared_tuning() {  # after a warm stage, also one its timeout killed (gpu_optimize.py's forget_shared_tuning)
    python3 benchmarks/gpu_optimize.py forget --out "$out" >>"$out/forget.log" 2>&1
}

checks_on_idle_gpu() {  # $1 cores, $2 results folder: the adversarial suite, GPU tests and probes, in turn
    if [ -n "${ADVERSARIAL:-}" ]; then # the adversarial suite's runtime checks on this GPU
        KERNELBOT_ADVERSARIAL_DEVICE=cuda timeout -k 5 "${ADV_S:-200}" taskset -c "$1" python3 -m pytest \
            -o addopts= -m "not slow" -q -rA -p no:cacheprovider tests/test_adversarial.py \
            >"$2/pytest_adversarial_gpu.log" 2>&1
    fi
    if [ -n "${GPU_TESTS:-}" ]; then
        timeout -k 5 "${TESTS_S:-240}" taskset -c "$1" python3 -m pytest -o addopts= -m gpu -q -rA \
            -p no:cacheprovider $GPU_TESTS >"$2/pytest_gpu.log" 2>&1
    fi
    local probe name arg
    for probe in ${PROBE:-}; do # benchmarks/probes/<name>.py OUT.json [ARG], from PROBE="name[:ARG] ..."
        [ "$probe" = 1 ] && probe=tf32x3_accuracy # run 5's spelling
        name=${probe%%:*} arg=
        [ "$name" != "$probe" ] && arg=${probe#*:}
        timeout -k 5 "${PROBE_S:-150}" taskset -c "$1" python3 "benchmarks/probes/$name.py" \
            "$2/$name${arg:+-${arg%.py}}.json" $arg >>"$2/probe.log" 2>&1
    done
}

rows_of_earlier_calls() {  # the optimize rows earlier calls on this (still warm) machine wrote
    ls /tmp/kernelbot-results/*/gpu*/optimize_rows.jsonl 2>/dev/null | grep -v "/$stage/"
}

case $stage in
call1)
    (CUDA_VISIBLE_DEVICES=0 taskset -c 0-5 python3 benchmarks/gpu_review.py --out "$out/review" --trials 20 \
        --deadline-s 470 >"$out/review.log" 2>&1) &
    (
        CUDA_VISIBLE_DEVICES=1 timeout -k 5 290 taskset -c 6-31 python3 benchmarks/gpu_optimize.py warm \
            --out "$out/warm" --workers 37 --cap-s 200 >"$out/warm.log" 2>&1
        kill_sandboxes_on 1
        rm -rf "$KERNELBOT_CACHE_DIR"/*/baselines # timed with a throw-away budget: measured again in call2
        CUDA_VISIBLE_DEVICES=1 timeout -k 5 230 taskset -c 6-31 python3 -m pytest -o addopts= -m gpu -q \
            tests/test_gpu_llm_agent.py >"$out/llm.log" 2>&1
        kill_sandboxes_on 1
    ) &
    wait
    ;;
call2)
    for g in 0 1; do
        cores=$([ "$g" = 0 ] && echo 0-15 || echo 16-31)
        (CUDA_VISIBLE_DEVICES=$g taskset -c "$cores" python3 benchmarks/gpu_optimize.py timed --shard "$g/2" \
            --out "$out/gpu$g" --deadline-s "${DEADLINE_S:-540}" --done ${DONE:-} >"$out/timed$g.log" 2>&1) &
    done
    wait
    python3 benchmarks/gpu_optimize.py summarize --out "$out" --rows "$out"/gpu*/optimize_rows.jsonl ${DONE:-} \
        >"$out/summary.log" 2>&1
    ;;
call4)  # what call1-3 left: the model agent (PyGithub was missing in call1), the last operator, the e2e review
    (
        CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python3 benchmarks/gpu_optimize.py timed --shard 0/1 \
            --out "$out/gpu0" --deadline-s 200 --done ${DONE:-} >"$out/timed0.log" 2>&1
        CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python3 benchmarks/gpu_review.py --out "$out/review" --trials 1 \
            --sizes small --deadline-s 150 >"$out/review.log" 2>&1
    ) &
    (CUDA_VISIBLE_DEVICES=1 timeout -k 5 280 taskset -c 16-31 python3 -m pytest -o addopts= -m gpu -q \
        tests/test_gpu_llm_agent.py >"$out/llm.log" 2>&1) &
    wait
    ;;
warm)  # caches only, on both GPUs (for a session that re-runs just the optimize table: warm, then call2)
    for g in 0 1; do
        (CUDA_VISIBLE_DEVICES=$g timeout -k 5 290 taskset -c $((g * 16))-$((g * 16 + 15)) python3 \
            benchmarks/gpu_optimize.py warm --shard "$g/2" --out "$out/warm$g" --workers 19 --cap-s 200 \
            >"$out/warm$g.log" 2>&1) &
    done
    wait
    kill_sandboxes_on 0
    kill_sandboxes_on 1
    forget_shared_tuning
    ;;
table | more*)  # more, more2, ...: each call its own folder
    # Operators an earlier call on this (still warm) machine finished are skipped; a fresh machine warms first.
    done=$(rows_of_earlier_calls)
    if [ "$stage" = table ] || [ ! -d "$KERNELBOT_CACHE_DIR" ]; then
        for g in 0 1; do
            (
                export CUDA_VISIBLE_DEVICES=$g
                cores=$((g * 16))-$((g * 16 + 15))
                # GPU 0 runs the GPU tests and probes first, alone on its GPU (run 5 timed them beside the warm
                # stage; run 6 warmed all 42 operators on GPU 1 meanwhile, where a shared GPU cost 19 their caches)
                [ "$g" = 0 ] && checks_on_idle_gpu "$cores" "$out"
                timeout -k 5 "${WARM_S:-240}" taskset -c "$cores" python3 benchmarks/gpu_optimize.py warm \
                    --shard "$g/2" --out "$out/warm$g" --workers 21 --cap-s 200 --only "${ONLY:-}" --done $done >"$out/warm$g.log" 2>&1
            ) &
        done
        wait
        kill_sandboxes_on 0
        kill_sandboxes_on 1
        forget_shared_tuning
    fi
    left=$((${CALL_S:-555} - SECONDS))
    for g in 0 1; do
        (CUDA_VISIBLE_DEVICES=$g taskset -c $((g * 16))-$((g * 16 + 15)) python3 benchmarks/gpu_optimize.py timed \
            --shard "$g/2" --out "$out/gpu$g" --deadline-s "$left" --time-per-op 90 --first "${FIRST:-}" --last "${LAST:-}" --only "${ONLY:-}" --done $done \
            >"$out/timed$g.log" 2>&1) &
    done
    wait
    python3 benchmarks/gpu_optimize.py summarize --out "$out" --rows $done "$out"/gpu*/optimize_rows.jsonl \
        >"$out/summary.log" 2>&1
    ;;
diag)  # after `table` on the same machine. GPU 0: is the compile baseline stable? (gpu_baselines.py);
    # GPU 1 meanwhile: `timed` for the operators no earlier call on this machine finished, in order.
    done=$(rows_of_earlier_calls)
    (CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python3 benchmarks/gpu_baselines.py --out "$out/baselines" \
        --only bias_gelu_clamp,08_layernorm,09_rmsnorm,26_batchnorm,16_relu --reps 3 --deadline-s 480 \
        >"$out/baselines.log" 2>&1) &
    (CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 python3 benchmarks/gpu_optimize.py timed --out "$out/gpu1" \
        --deadline-s $((${CALL_S:-555} - SECONDS)) --time-per-op 90 --done $done >"$out/timed1.log" 2>&1) &
    wait
    ;;
call5)  # after fixing the job's TF32 pin and reduce-overhead's outputs: the matmul/conv operators, as time allows
    for g in 0 1; do
        ops=$([ "$g" = 0 ] && echo "01_square,31_small_matmul,27_gemm,19_conv2d" || echo "examples/ops/linear,28_conv_bn,03_batched,20_conv2d")
        (CUDA_VISIBLE_DEVICES=$g taskset -c $((g * 16))-$((g * 16 + 15)) python3 benchmarks/gpu_optimize.py timed \
            --only "$ops" --out "$out/gpu$g" --deadline-s "${DEADLINE_S:-230}" >"$out/timed$g.log" 2>&1) &
    done
    wait
    ;;
esac
tail -n 40 "$out"/*.log
tar -czf "$OUT/$stage.tar.gz" --exclude=runs --exclude=candidates -C "$(dirname "$out")" "$stage"
