#!/usr/bin/env bash
# scripts/gpu-check.sh [--budget S] [--dry-run] [--qualify] [--paper] OUT
#
# Everything a GPU machine should run, within one time budget (default 540 s, the build included), in
# this order of what the steps prove: build for this GPU; `detaudit env`; the `gpu` tests; the quick
# suite's GPU targets (3 repeats), a second run checked against the first's baseline; device speed (bench/gpu_speed); the
# portable design on CPU and GPU; diverge on the GPU targets; a short GPU training design with the noise
# scale; PyTorch's GPU outputs imported beside the quick suite; PredNet's steps per second. --qualify adds
# `qualify --level 1`, --paper PredNet's paper-sized network: the two heavy steps, last.
#
# Every step runs under a timeout taken from what is left of the budget; a step that no longer fits is
# skipped with one line saying so. After every step OUT holds at most these five files, each under 16 MiB:
#   summary.txt       one line per step (ok / failed / timed out / skipped, seconds) and, under it, the
#                     figures that settle what only a GPU can (distinct outputs of the atomics, cuDNN's
#                     claims against the runs, device hash against a copy, sums against CUB, portable
#                     CPU = GPU, bf16x9 against the default math, kernel lists against the warm-up's)
#   gpu-tests.log     the gpu tests' output       build.log     the build's output (its last 8 MiB)
#   gpu-speed.json    bench/gpu_speed's figures   gpu-check.tar.gz   everything else (at most 15 MiB)
# so what comes back is complete even when the command is killed at its limit. Stdout is the summary.
#
# --dry-run runs the same steps with CPU stand-ins for the GPU targets, on a machine without a GPU, so the
# budget, the timeouts and the packing are exercised where CI runs (tests/scripts/gpu_check_dry_run.sh).
#
# Environment: GPU_CHECK_STEP_LIMIT=name=S,... caps named steps' limits; DETAUDIT_BIN=DIR uses prebuilt binaries (DIR/detaudit, DIR/tests/detaudit_gpu_tests,
# DIR/bench/gpu_speed) instead of building; BUILD (build-gpu; with --dry-run: build) the build folder;
# CUDA_ARCH (native) the CUDA architectures; EXTRA_CMAKE_ARGS more configure arguments. The GPU machines
# have the CUDA toolkit, cuDNN, CMake, ninja, a compiler and python3 but no Debian -dev packages and no
# network: header-only dependencies, GoogleTest's sources, hwloc and SQLite come from .deps/
# (scripts/make-deps-folder.sh), carried along with the tree.
#
# Exit status: 0 every step that ran passed, 1 a step failed or timed out, 2 bad arguments or no build.
set -uo pipefail

usage() { sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; }
BUDGET=540 DRY=0 QUALIFY=0 PAPER=0 OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --budget)
      [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "$2" -ge 30 ] || { echo "gpu-check: --budget takes seconds, at least 30 (got '${2:-}')" >&2; exit 2; }
      BUDGET=$2; shift 2 ;;
    --budget=*) set -- --budget "${1#--budget=}" "${@:2}" ;;
    --dry-run) DRY=1; shift ;;
    --qualify) QUALIFY=1; shift ;;
    --paper) PAPER=1; shift ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) [ -z "$OUT" ] || { echo "gpu-check: one OUT folder only (got '$OUT' and '$1')" >&2; exit 2; }; OUT=$1; shift ;;
  esac
done
[ -n "$OUT" ] || { echo "gpu-check: no OUT folder given" >&2; usage >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=$(realpath -m "$OUT")
mkdir -p "$OUT" || { echo "gpu-check: cannot create $OUT" >&2; exit 2; }
# OUT is the folder that comes back: only this script's own files may be in it.
for f in "$OUT"/* "$OUT"/.[!.]*; do
  [ -e "$f" ] || continue
  case "${f##*/}" in
    summary.txt|gpu-tests.log|gpu-speed.json|build.log|gpu-check.tar.gz|.pack.*) rm -f "$f" ;;
    *) echo "gpu-check: $OUT holds '${f##*/}', which is not this script's: give an empty folder" >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
# Packing writes its temporary files beside OUT, never in it (on OUT's file system where its parent is
# writable, so the rename into OUT is atomic): a run killed mid-pack (SIGKILL at the machine's limit)
# leaves OUT with whole files only.
PACK=$(mktemp -d "$(dirname "$OUT")/.gpu-check-pack.XXXXXX" 2>/dev/null) || { PACK="$WORK/.pack" && mkdir -p "$PACK"; } || exit 2
trap 'rm -rf "$WORK" "$PACK"' EXIT
SUMMARY="$WORK/summary.txt" FIG="$WORK/.figures"
: >"$SUMMARY"
export DETAUDIT_HISTORY="$WORK/history.db"  # the history of this check stays with it
RESERVE=10                                  # seconds kept for the last packing
FAILED=0

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - SECONDS - RESERVE)); }

# Copies the summary and the logs into OUT and packs everything else into OUT/gpu-check.tar.gz, each
# through a temporary file (in PACK) renamed into place (OUT never holds more than five files).
cap_copy() {  # cap_copy SRC NAME: at most the last 8 MiB of SRC as OUT/NAME
  [ -f "$1" ] || return 0
  tail -c 8M "$1" >"$PACK/$2" && mv -f "$PACK/$2" "$OUT/$2"
}
pack() {
  cap_copy "$SUMMARY" summary.txt
  cap_copy "$WORK/gpu-tests.log" gpu-tests.log
  cap_copy "$WORK/gpu-speed.json" gpu-speed.json
  cap_copy "$WORK/build.log" build.log
  local tgz="$PACK/gpu-check.tar.gz" limit=$((15 * 1024 * 1024))
  # Oracle caches (.oracle/) are left out: recomputable, and the largest files a probe writes.
  local tar_args=(-czf "$tgz" -C "$WORK" --exclude=./.figures --exclude=.oracle --exclude=./.pack)
  tar "${tar_args[@]}" . 2>/dev/null
  if [ "$(stat -c %s "$tgz" 2>/dev/null || echo 0)" -gt "$limit" ]; then
    # Too big: leave out every file over 256 KiB, listed in left-out.txt inside the tarball.
    (cd "$WORK" && find . -type f -size +256k -printf './%P\n') >"$WORK/left-out.txt"
    tar "${tar_args[@]}" -X "$WORK/left-out.txt" . 2>/dev/null
  fi
  mv -f "$tgz" "$OUT/gpu-check.tar.gz"
}
trap 'say "gpu-check: interrupted at $SECONDS s"; pack; exit 130' INT TERM

# step NAME NEED MAX FUNCTION: runs FUNCTION (a function of this script) under a timeout of
# min(MAX, what is left) seconds, when at least NEED seconds are left; else skips it. The step's figures
# (what it writes to $FIG) follow its line in the summary; OUT is packed after it.
step() {
  local name=$1 need=$2 max=$3 fn=$4 l t0 rc status
  l=$(left)
  if [ "$l" -lt "$need" ]; then
    say "step $name: skipped (needs ${need} s, ${l} s of the budget left)"
    pack
    return 0
  fi
  [ "$max" -gt "$l" ] && max=$l
  # GPU_CHECK_STEP_LIMIT=name=S[,name=S]: a lower limit for named steps (the dry-run test times one out).
  local cap
  cap=$(tr ',' '\n' <<<"${GPU_CHECK_STEP_LIMIT:-}" | sed -n "s/^$name=\([0-9][0-9]*\)$/\1/p" | head -n 1)
  [ -n "$cap" ] && [ "$cap" -lt "$max" ] && max=$cap
  [ "$max" -ge 1 ] || max=1
  : >"$FIG"
  t0=$SECONDS
  STEP_LIMIT=$max timeout -k 10 "$max" bash -c "$fn" >>"$WORK/steps.log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    3) status="skipped ($(head -n 1 "$FIG" | sed 's/^  //'))"; sed -i 1d "$FIG" ;;  # the function's own reason
    124|137) status="timed out (limit ${max} s)"; FAILED=1 ;;
    *) status="failed (exit $rc)"; FAILED=1 ;;
  esac
  say "step $name: $status in $((SECONDS - t0)) s"
  # Figures: at most 60 lines a step, and the summary under 200 lines in all (170 for figures and step
  # lines so far, the rest kept for the steps still to come); what is cut stays in the tarball.
  local room=$((170 - $(wc -l <"$SUMMARY"))) figs
  figs=$(wc -l <"$FIG")
  [ "$room" -gt 60 ] && room=60
  [ "$room" -lt 0 ] && room=0
  head -n "$room" "$FIG" | tee -a "$SUMMARY"
  [ "$figs" -gt "$room" ] && say "  ... $((figs - room)) more figure lines in gpu-check.tar.gz (figures-$name.txt)"
  cp "$FIG" "$WORK/figures-$name.txt"
  pack
  return "$rc"
}
fig() { echo "  $*" >>"$FIG"; }  # a figure line: indented under its step
# main CMD...: a step's main command, stopped (SIGTERM: detaudit keeps what it finished) 15 s before the
# step's own limit, so that the step still reads its figures from what was done.
main() { timeout -k 5 $((STEP_LIMIT > 40 ? STEP_LIMIT - 15 : STEP_LIMIT)) "$@"; }
skip_because() { fig "$*"; exit 3; }
figures() { python3 "$ROOT/scripts/gpu_check_figures.py" "$@" >>"$FIG" 2>&1 || fig "(figures: python3 failed)"; }

# The targets: the GPU's, or in a dry run CPU stand-ins that take the same paths through the tool.
if [ "$DRY" -eq 1 ]; then
  QUICK_TARGETS=(--targets 'cpu?order=atomic&threads=2,cpu?order=blocked&threads=2')
  PORTABLE='cpu?order=portable&threads=2,cpu?order=portable&threads=4'
  DIVERGE=('cpu?order=atomic&threads=2' 'cpu?order=blocked&threads=2' 'cpu?order=portable&threads=2,cpu?order=portable&threads=4')
  TRAIN_TARGETS='cpu?threads=2'
  PREDNET=(--targets 'cpu?threads=2&conv=winograd' --prednet-config tiny)
  PAPER_ARGS=(--targets 'cpu?threads=2&conv=winograd' --prednet-config tiny)
  QUALIFY_TARGETS=(--targets 'cpu?order=atomic&threads=2,cpu?order=blocked&threads=2')
  TORCH_DEVICE=cpu
  TRAIN_BATCHES=20  # the stand-ins' designs shorter than the GPU's 60 batches: the dry run fits 120 s under load
  BUILD=${BUILD:-build}
else
  QUICK_TARGETS=(--gpu-only)
  PORTABLE="cpu?order=portable&threads=$(( $(nproc) > 8 ? 8 : $(nproc) )),cuda:0?order=portable"
  DIVERGE=('cuda:0?order=atomic' 'cudnn:0?fwd_algo=1&bwd_data_algo=0&bwd_filter_algo=0' "$PORTABLE")
  TRAIN_TARGETS='cuda:0,cudnn:0'
  PREDNET=(--targets 'cuda:0,cudnn:0')
  PAPER_ARGS=(--targets 'cudnn:0' --prednet-config paper)
  QUALIFY_TARGETS=()
  TORCH_DEVICE=cuda
  TRAIN_BATCHES=60
  BUILD=${BUILD:-build-gpu}
fi
# Fashion-MNIST: the Debian package where installed, else a copy in .deps/fashion-mnist.
DATA=()
[ ! -d /usr/share/datasets/fashion-mnist ] && [ -d "$ROOT/.deps/fashion-mnist" ] && DATA=(--data "$ROOT/.deps/fashion-mnist")

# cuDNN from a pip wheel when the toolkit has none.
CUDNN_ROOT=""
if [ ! -e /usr/local/cuda/include/cudnn.h ] && [ ! -e /usr/include/cudnn.h ] && [ ! -e /usr/include/x86_64-linux-gnu/cudnn.h ]; then
  CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  [ -n "$CUDNN_ROOT" ] && export LD_LIBRARY_PATH="$CUDNN_ROOT/lib:${LD_LIBRARY_PATH:-}"
fi
# SQLite and hwloc from .deps when the machine has no libraries of its own.
[ -d "$ROOT/.deps/lib" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$ROOT/.deps/lib"

if [ -n "${DETAUDIT_BIN:-}" ]; then BIN=$(realpath -m "$DETAUDIT_BIN"); else BIN="$ROOT/$BUILD"; fi
export ROOT WORK FIG BIN BUILD DRY CUDNN_ROOT
export PORTABLE TRAIN_TARGETS TORCH_DEVICE TRAIN_BATCHES
export -f fig main skip_because figures

say "gpu-check: budget ${BUDGET} s$([ "$DRY" -eq 1 ] && echo ', dry run: CPU stand-ins for the GPU targets'); $(date -u +%FT%TZ); commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
say "gpu: ${gpu:-none (nvidia-smi found no GPU)}"

# ---- the steps ----------------------------------------------------------------------------------
do_build() {
  if [ -n "${DETAUDIT_BIN:-}" ]; then
    [ -x "$BIN/detaudit" ] || skip_because "DETAUDIT_BIN=$BIN has no detaudit"
    echo "prebuilt binaries from $BIN" >"$WORK/build.log"
    fig "prebuilt binaries from $BIN"
    return 0
  fi
  local args=(-S "$ROOT" -B "$ROOT/$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release)
  [ -d "$ROOT/.deps/include" ] && args+=(-DDETAUDIT_DEPS_DIR="$ROOT/.deps")
  [ -n "$CUDNN_ROOT" ] && args+=(-DDETAUDIT_CUDNN_ROOT="$CUDNN_ROOT")
  # A dry run builds for the default architectures (there is no GPU to be native to).
  [ "$DRY" -eq 0 ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-native}")
  read -r -a extra <<<"${EXTRA_CMAKE_ARGS:-}"
  {
    if [ "$DRY" -eq 0 ] || [ ! -f "$ROOT/$BUILD/CMakeCache.txt" ]; then
      # `native` needs CMake to find the GPU; where it cannot, Hopper's machine code (H100, H200).
      cmake "${args[@]}" "${extra[@]}" ||
        { [ "$DRY" -eq 0 ] && [ -z "${CUDA_ARCH:-}" ] && rm -rf "$ROOT/$BUILD" &&
          echo "gpu-check: configure with native architectures failed; again with 90-real" &&
          cmake "${args[@]}" -DCMAKE_CUDA_ARCHITECTURES=90-real "${extra[@]}"; } || exit 1
    fi
    cmake --build "$ROOT/$BUILD" -j "$(nproc)" --target detaudit detaudit_gpu_tests gpu_speed ||
      cmake --build "$ROOT/$BUILD" -j "$(nproc)" --target detaudit  # CUDA off: no gpu tests, no gpu_speed
  } >"$WORK/build.log" 2>&1
  local rc=$?
  grep -E '^-- detaudit: ' "$WORK/build.log" | sed 's/^-- /  /' >>"$FIG"
  [ -x "$BIN/detaudit" ] || { tail -n 30 "$WORK/build.log" | sed 's/^/  /' >>"$FIG"; exit 1; }
  return $rc
}

do_env() {
  "$BIN/detaudit" env >"$WORK/env.txt" 2>&1
  local rc=$?
  "$BIN/detaudit" env --json >"$WORK/env.json" 2>/dev/null
  fig "$(grep -m1 -i '^cuda' "$WORK/env.txt")"
  return $rc
}

do_gpu_tests() {
  local exe="$BIN/tests/detaudit_gpu_tests"
  [ -x "$exe" ] || exe="$BIN/detaudit_gpu_tests"
  [ -x "$exe" ] || skip_because "no detaudit_gpu_tests in $BIN (a build without CUDA)"
  main "$exe" --gtest_color=no >"$WORK/gpu-tests.log" 2>&1
  local rc=$?
  figures tests "$WORK/gpu-tests.log"
  return $rc
}

do_quick() {
  main "$BIN/detaudit" probe --suite quick "${QUICK_ARGS[@]}" --repeats 3 --out "$WORK/quick" --fresh >"$WORK/quick.log" 2>&1
  local rc=$?
  fig "probe: exit $rc; $(grep -m1 '^verdicts:' "$WORK/quick.log")"
  grep '^FAIL ' "$WORK/quick.log" | head -n 10 | sed 's/^/  /' >>"$FIG"
  figures probe "$WORK/quick"
  [ "$rc" -le 1 ] || return "$rc"  # 124: stopped at the step's limit
  # A second run in its own processes, checked against the first's baseline: the GPU cells' bits from one process
  # to the next (a run checked against its own baseline would judge nothing).
  "$BIN/detaudit" baseline save "$WORK/quick" >>"$WORK/quick.log" 2>&1 &&
    "$BIN/detaudit" probe --suite quick "${QUICK_ARGS[@]}" --repeats 2 --out "$WORK/quick2" --fresh >>"$WORK/quick.log" 2>&1
  "$BIN/detaudit" check "$WORK/quick2" --baseline "$WORK/quick/baseline.json" >"$WORK/check.txt" 2>&1
  local rc2=$?
  fig "a second run checked against the first's baseline: exit $rc2 (0 expected): $(tail -n 1 "$WORK/check.txt" 2>/dev/null)"
  [ "$rc" -eq 0 ] && return "$rc2"
  return "$rc"
}

do_speed() {
  local exe="$BIN/bench/gpu_speed"
  [ -x "$exe" ] || exe="$BIN/gpu_speed"
  [ -x "$exe" ] || skip_because "no gpu_speed in $BIN (a build without CUDA)"
  main "$exe" >"$WORK/gpu-speed.json" 2>"$WORK/gpu-speed.err"
  local rc=$?
  # Without a device gpu_speed prints {"skipped": "<reason>"} and exits 0.
  if grep -q '^{"skipped"' "$WORK/gpu-speed.json"; then skip_because "$(sed -E 's/^\{"skipped": "(.*)"\}$/\1/' "$WORK/gpu-speed.json")"; fi
  figures speed "$WORK/gpu-speed.json"
  return $rc
}

# train_autoencoder NAME TARGETS [ARGS...]: the short design of the portable and training steps, into
# $WORK/NAME (its output in NAME.log).
train_autoencoder() {
  local name=$1 targets=$2
  shift 2
  main "$BIN/detaudit" train autoencoder --targets "$targets" --seeds 2 --batches "$TRAIN_BATCHES" --window 10 \
    --replicates 2 "$@" "${DATA_ARGS[@]}" --out "$WORK/$name" --fresh >"$WORK/$name.log" 2>&1
}

do_portable() {
  train_autoencoder train-portable "$PORTABLE"
  local rc=$?
  figures portable "$WORK/train-portable"
  return $rc
}

do_diverge() {
  local rc=0 i=0 pair r
  IFS=';' read -r -a pairs <<<"$DIVERGE_S"
  local t0=$SECONDS t
  for pair in "${pairs[@]}"; do
    i=$((i + 1))
    # Each pair at most DIVERGE_EACH seconds, and all of them within the step's limit.
    t=$((STEP_LIMIT - (SECONDS - t0) - 5))
    [ "$t" -gt "$DIVERGE_EACH" ] && t=$DIVERGE_EACH
    if [ "$t" -lt 5 ]; then fig "diverge $pair: not run (the step's limit is reached)"; rc=1; continue; fi
    timeout -k 5 "$t" "$BIN/detaudit" diverge --targets "$pair" --steps 5 "${DATA_ARGS[@]}" \
      --out "$WORK/diverge-$i" >"$WORK/diverge-$i.log" 2>&1
    r=$?
    # 0: no divergence, 1: diverged (both are answers); 2 and above: it could not run.
    [ "$r" -le 1 ] || rc=1
    local what
    what=$(grep -m1 -E '^(diverged|no divergence)' "$WORK/diverge-$i.log")$(grep -m1 '^kernels' "$WORK/diverge-$i.log")
    [ -n "$what" ] || what=$(tail -n 1 "$WORK/diverge-$i.log")  # could not run: its one-line reason
    fig "diverge $pair: exit $r: $what"
  done
  return $rc
}

do_training() {
  train_autoencoder train "$TRAIN_TARGETS" --noise-scale
  local rc=$?
  fig "train: exit $rc; $(tail -n 1 "$WORK/train.log")"
  figures training "$WORK/train"
  return $rc
}

do_torch() {
  python3 -c "import torch, numpy; assert '$TORCH_DEVICE' == 'cpu' or torch.cuda.is_available()" 2>/dev/null ||
    skip_because "no PyTorch with $TORCH_DEVICE here"
  [ -f "$WORK/quick/results.json" ] || skip_because "the quick step left no results to import beside"
  "$BIN/detaudit" export --suite quick --out "$WORK/export" >"$WORK/torch.log" 2>&1 || return 1
  local rc=0 bench name
  for bench in "" --benchmark; do
    name=torch-$TORCH_DEVICE${bench:+-benchmark}
    main python3 "$ROOT/scripts/torch-probe.py" "$WORK/export" --device "$TORCH_DEVICE" --repeats 3 $bench >>"$WORK/torch.log" 2>&1 &&
      "$BIN/detaudit" import "$WORK/export" --name "$name" --out "$WORK/quick" >>"$WORK/torch.log" 2>&1 || rc=1
    fig "torch $name: $(grep "external?name=$name matches" "$WORK/torch.log" | head -n 5 | tr '\n' ';')"
  done
  return $rc
}

do_prednet() {
  main "$BIN/detaudit" train prednet "${PREDNET_ARGS[@]}" --seeds 1 --replicates 1 --batches "$PREDNET_BATCHES" --window "$PREDNET_WINDOW" \
    "${DATA_ARGS[@]}" --out "$WORK/$PREDNET_OUT" --fresh >"$WORK/$PREDNET_OUT.log" 2>&1
  local rc=$?
  fig "prednet: exit $rc; $(tail -n 1 "$WORK/$PREDNET_OUT.log")"
  figures training "$WORK/$PREDNET_OUT"
  return $rc
}

do_qualify() {
  main "$BIN/detaudit" qualify --level 1 "${QUALIFY_ARGS[@]}" --out "$WORK/qualify" >"$WORK/qualify.txt" 2>"$WORK/qualify.log"
  local rc=$?
  fig "qualify: exit $rc; $(grep -m1 '^qualify level' "$WORK/qualify.txt")"
  grep -E '  (FAIL|WARN) ' "$WORK/qualify.txt" | head -n 20 | sed 's/^/  /' >>"$FIG"
  return $rc
}

# Arrays do not cross `bash -c`: the steps rebuild theirs from these strings (no value holds a space).
DIVERGE_S="$(IFS=';'; echo "${DIVERGE[*]}")"
export DIVERGE_S DATA_S="${DATA[*]}" QUICK_S="${QUICK_TARGETS[*]}" QUALIFY_S="${QUALIFY_TARGETS[*]}"
export -f train_autoencoder do_build do_env do_gpu_tests do_quick do_speed do_portable do_diverge do_training do_torch do_prednet do_qualify
prelude='read -r -a DATA_ARGS <<<"$DATA_S"; read -r -a QUICK_ARGS <<<"$QUICK_S"; read -r -a QUALIFY_ARGS <<<"$QUALIFY_S"; read -r -a PREDNET_ARGS <<<"$PREDNET_S"; '

if ! step build 20 "$BUDGET" "${prelude}do_build"; then
  say "gpu-check: no usable build (build.log); nothing else can run"
  pack
  exit 2
fi
step env 5 30 "${prelude}do_env"
step gpu-tests 20 150 "${prelude}do_gpu_tests"
step quick 30 150 "${prelude}do_quick"
step gpu-speed 10 90 "${prelude}do_speed"
step portable 30 150 "${prelude}do_portable"
export DIVERGE_EACH=40
step diverge 15 120 "${prelude}do_diverge"
step training 30 150 "${prelude}do_training"
step torch 20 120 "${prelude}do_torch"
export PREDNET_BATCHES=20 PREDNET_WINDOW=5 PREDNET_OUT=prednet PREDNET_S="${PREDNET[*]}"
step prednet 30 150 "${prelude}do_prednet"
if [ "$QUALIFY" -eq 1 ]; then
  step qualify 60 300 "${prelude}do_qualify"
else
  say "step qualify: skipped (not asked: --qualify)"
fi
if [ "$PAPER" -eq 1 ]; then
  export PREDNET_BATCHES=3 PREDNET_WINDOW=1 PREDNET_OUT=prednet-paper PREDNET_S="${PAPER_ARGS[*]}"
  step prednet-paper 60 200 "${prelude}do_prednet"
else
  say "step prednet-paper: skipped (not asked: --paper)"
fi

say "gpu-check: done in $SECONDS s of the ${BUDGET} s budget; $([ "$FAILED" -eq 0 ] && echo 'every step that ran passed' || echo 'a step FAILED or timed out')"
pack
exit "$FAILED"
