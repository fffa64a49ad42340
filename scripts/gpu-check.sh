#!/usr/bin/env bash
# Everything a GPU machine should run, in under 5 minutes on one H200:
#   build (CUDA for this machine's GPU), `detaudit env`, the `gpu` tests, the quick suite (its GPU
#   targets included, judged; its baseline checked against itself), `qualify --level 1`, a short GPU
#   training design with the noise scale and B_hw, the portable design, diverge on the GPU targets,
#   PyTorch's GPU outputs imported beside the targets (with and without cudnn.benchmark), PredNet's
#   steps per second on cuda and cudnn (quick) and on cudnn (the paper's network), and the GPU speed
#   measurements, all written into OUTDIR.
# The GPU machines have the CUDA toolkit, cuDNN, CMake, ninja, a compiler and python3 but no Debian -dev
# packages and no network: header-only dependencies and GoogleTest's sources come from .deps/
# (scripts/make-deps-folder.sh, copied along with the tree); OpenBLAS, oneDNN and hwloc are optional.
# With DETAUDIT_BUNDLE=DIR it runs prebuilt binaries from DIR/bin (libraries in DIR/lib) instead of building.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-gpu-check-out}")
mkdir -p "$OUT"
log() { echo "[gpu-check] $*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
start=$(date +%s)

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$OUT/nvidia-smi.txt" 2>&1 \
  || echo "nvidia-smi unavailable" >"$OUT/nvidia-smi.txt"
log "gpu: $(tail -n +2 "$OUT/nvidia-smi.txt" | head -1)"

# cuDNN from a pip wheel when the toolkit has none.
CUDNN_ROOT=""
if [ ! -e /usr/local/cuda/include/cudnn.h ] && [ ! -e /usr/include/cudnn.h ] && [ ! -e /usr/include/x86_64-linux-gnu/cudnn.h ]; then
  CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
if [ -n "$CUDNN_ROOT" ]; then
  export LD_LIBRARY_PATH="$CUDNN_ROOT/lib:${LD_LIBRARY_PATH:-}"
  log "cuDNN from $CUDNN_ROOT"
fi

if [ -n "${DETAUDIT_BUNDLE:-}" ]; then
  BIN="$DETAUDIT_BUNDLE/bin"
  export LD_LIBRARY_PATH="$DETAUDIT_BUNDLE/lib:${LD_LIBRARY_PATH:-}"
  log "using prebuilt binaries from $DETAUDIT_BUNDLE"
else
  BUILD=${BUILD:-build-gpu}
  deps=()
  [ -d .deps/include ] && deps+=(-DDETAUDIT_DEPS_DIR="$PWD/.deps")
  [ -n "$CUDNN_ROOT" ] && deps+=(-DDETAUDIT_CUDNN_ROOT="$CUDNN_ROOT")
  # EXTRA_CMAKE_ARGS: e.g. the -DCMAKE_DISABLE_FIND_PACKAGE_*=ON used to rehearse a bare machine.
  read -r -a extra <<<"${EXTRA_CMAKE_ARGS:-}"
  deps+=("${extra[@]}")
  arch=${CUDA_ARCH:-native}
  log "configure + build in $BUILD (CUDA architectures: $arch)"
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" "${deps[@]}" &&
         cmake --build "$BUILD" -j "$(nproc)" --target detaudit detaudit_gpu_tests gpu_speed; } >"$OUT/build.log" 2>&1; then
    log "BUILD FAILED (see build.log)"; tail -30 "$OUT/build.log"; exit 2
  fi
  BIN="$BUILD"
  [ -x "$BUILD/bench/gpu_speed" ] && cp "$BUILD/bench/gpu_speed" "$BUILD/gpu_speed"
  [ -x "$BUILD/tests/detaudit_gpu_tests" ] && cp "$BUILD/tests/detaudit_gpu_tests" "$BUILD/detaudit_gpu_tests"
  log "build done in $(( $(date +%s) - start )) s"
fi

"$BIN/detaudit" env >"$OUT/env.txt" 2>&1; log "env: exit $? ($(grep -m1 '^cuda' "$OUT/env.txt"))"
"$BIN/detaudit" env --json >"$OUT/env.json" 2>/dev/null

log "gpu tests"
"$BIN/detaudit_gpu_tests" --gtest_color=no >"$OUT/gpu-tests.log" 2>&1
rc_tests=$?
log "gpu tests: exit $rc_tests; $(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/gpu-tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$OUT/gpu-tests.log" | head -20 | tee -a "$OUT/summary.txt"
# What the detection tests saw: distinct outputs of each atomic workload, and each repeat's kernel list
# against the warm-up's (tests/gpu/test_gpu_detection.cpp).
grep -E '^\[ (detect|kernels) +\]' "$OUT/gpu-tests.log" | tee -a "$OUT/summary.txt"
# order=portable: cuda against cpu, bit for bit (tests/gpu/test_gpu_portable.cpp).
grep -E '^\[ portable +\]' "$OUT/gpu-tests.log" | tee -a "$OUT/summary.txt"

# The history of this check stays in OUTDIR.
export DETAUDIT_HISTORY="$OUT/history.db"
log "quick suite"
"$BIN/detaudit" probe --suite quick --repeats "${REPEATS:-10}" --out "$OUT/quick" --fresh >"$OUT/quick.log" 2>&1
log "quick suite: exit $? (1: a cell FAILed) in $(( $(date +%s) - start )) s total; $(grep -m1 '^verdicts:' "$OUT/quick.log")"
grep '^FAIL ' "$OUT/quick.log" | head -20 | tee -a "$OUT/summary.txt"
sed -n '/^## Verdict/,/^## Determinism matrix/p' "$OUT/quick/report.md" 2>/dev/null | head -60 >>"$OUT/summary.txt"
# cuDNN's two claims (Find, cudnn_ops.h) against the runs, and the kernels behind each output.
for section in "Claimed vs observed determinism" "Kernel attribution"; do
  awk -v h="## $section" '$0 == h {on = 1; print; next} on && /^## / {exit} on' "$OUT/quick/report.md" 2>/dev/null |
    head -80 | tee -a "$OUT/summary.txt"
done
"$BIN/detaudit" baseline save "$OUT/quick" >>"$OUT/quick.log" 2>&1
"$BIN/detaudit" check "$OUT/quick" --baseline "$OUT/quick/baseline.json" >"$OUT/check.txt" 2>&1
log "check against its own baseline: exit $? (expected 0); $(tail -1 "$OUT/check.txt")"

log "qualify level 1"
"$BIN/detaudit" qualify --level 1 --out "$OUT/qualify" >"$OUT/qualify.txt" 2>"$OUT/qualify.log"
log "qualify: exit $?; $(grep -m1 '^qualify level' "$OUT/qualify.txt")"
grep -E '  (FAIL|WARN) ' "$OUT/qualify.txt" | head -20 | tee -a "$OUT/summary.txt"

log "gpu training"
# Fashion-MNIST: the Debian package where installed, else a copy in .deps/fashion-mnist (train-*-ubyte.gz).
train_data=(); [ ! -d /usr/share/datasets/fashion-mnist ] && [ -d .deps/fashion-mnist ] && train_data=(--data "$PWD/.deps/fashion-mnist")
"$BIN/detaudit" train autoencoder --targets 'cuda:0,cudnn:0' --seeds 2 --batches 60 --window 10 --replicates 2 --noise-scale "${train_data[@]}" --out "$OUT/train" --fresh >"$OUT/train.log" 2>&1
log "gpu training: exit $? in $(( $(date +%s) - start )) s total; $(tail -1 "$OUT/train.log")"
sed -n '/^## Training verdict/,/^## Variance components/p' "$OUT/train/report.md" 2>/dev/null | head -60 >>"$OUT/summary.txt"
# B_hw of the GPU targets (issue 12): one row per target, the atomic variants' sigma^2_hw against SGD's noise.
sed -n '/^Hardware noise against SGD noise/,/^## /p' "$OUT/train/report.md" 2>/dev/null | head -20 | tee -a "$OUT/summary.txt"

log "portable design"
# cpu and cuda with order=portable: condition (d) must be bitwise identical across CPU and GPU, and the
# report must say the hardware contributed exactly zero with the implementation pinned.
"$BIN/detaudit" train autoencoder --targets 'cpu?order=portable&threads=8,cuda:0?order=portable' --seeds 2 --batches 60 --window 10 --replicates 2 "${train_data[@]}" --out "$OUT/train-portable" --fresh >"$OUT/train-portable.log" 2>&1
log "portable design: exit $? in $(( $(date +%s) - start )) s total; $(tail -1 "$OUT/train-portable.log")"
awk '$0 == "## What a target effect could be attributed to" {on = 1; print; next} on && /^## / {exit} on' \
  "$OUT/train-portable/report.md" 2>/dev/null | head -40 | tee -a "$OUT/summary.txt"

log "diverge"
# The first divergent op of two GPU runs in lockstep (issue 12): cuda's atomic order twice, cudnn's atomic
# algorithms twice, and the portable order on the GPU against the CPU (which must not part).
for pair in 'cuda:0?order=atomic' 'cudnn:0?fwd_algo=1&bwd_data_algo=0&bwd_filter_algo=0' 'cpu?order=portable&threads=8,cuda:0?order=portable'; do
  timeout 120 "$BIN/detaudit" diverge --targets "$pair" --steps 5 "${train_data[@]}" --out "$OUT/diverge-$(echo "$pair" | tr -c 'a-z0-9' _)" \
    >"$OUT/diverge.log" 2>&1
  log "diverge $pair: exit $?: $(grep -m1 -E '^(diverged|no divergence)' "$OUT/diverge.log")$(grep -m1 '^kernels' "$OUT/diverge.log")"
done

log "pytorch on the gpu"
# Issue 14: which cuDNN algorithm torch.conv2d matched, with and without cudnn.benchmark: the quick
# suite's workloads exported, run through the machine's PyTorch and imported beside the quick suite's
# targets (the import prints the match lines).
if python3 -c 'import torch, numpy; assert torch.cuda.is_available()' 2>/dev/null; then
  "$BIN/detaudit" export --suite quick --out "$OUT/export" >"$OUT/torch.log" 2>&1
  for bench in "" --benchmark; do
    name=torch-cuda${bench:+-benchmark}
    timeout 120 python3 scripts/torch-probe.py "$OUT/export" --device cuda --repeats 3 $bench >>"$OUT/torch.log" 2>&1 &&
      "$BIN/detaudit" import "$OUT/export" --name "$name" --out "$OUT/quick" >>"$OUT/torch.log" 2>&1
    log "torch $name: exit $?: $(grep -m1 "external?name=$name matches" "$OUT/torch.log")"
  done
else
  log "pytorch on the gpu: no torch with CUDA here; skipped"
fi

log "prednet"
# Issue 13: PredNet training steps per second on the GPU targets (one run each, 20 batches of 4).
timeout 240 "$BIN/detaudit" train prednet --targets 'cuda:0,cudnn:0' --seeds 1 --replicates 1 --batches 20 --window 5 \
  "${train_data[@]}" --out "$OUT/prednet" --fresh >"$OUT/prednet.log" 2>&1
log "prednet: exit $?; $(grep -E '\(d\) .*final loss' "$OUT/prednet.log" | sed 's/^\[detaudit\] run [0-9/]* //' | tr '\n' ';')"
# The paper's KITTI network (3x128x160, stacks 3,48,96,192) on sprites in three channels: its steps per
# second on cudnn (5 runs of 3 batches; on a 2-core CPU one batch takes about a minute).
timeout 150 "$BIN/detaudit" train prednet --prednet-config paper --targets 'cudnn:0' --seeds 1 --replicates 1 \
  --batches 3 --window 1 "${train_data[@]}" --out "$OUT/prednet-paper" --fresh >"$OUT/prednet-paper.log" 2>&1
log "prednet paper: exit $?; $(grep -E '\(d\) .*final loss' "$OUT/prednet-paper.log" | sed 's/^\[detaudit\] run [0-9/]* //' | tr '\n' ';')"

log "gpu speed"
timeout 120 "$BIN/gpu_speed" >"$OUT/gpu-speed.json" 2>"$OUT/gpu-speed.err"
log "gpu speed: exit $?: $(cat "$OUT/gpu-speed.json")"
log "done in $(( $(date +%s) - start )) s"
exit $rc_tests
