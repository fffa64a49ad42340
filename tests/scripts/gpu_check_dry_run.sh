#!/usr/bin/env bash
# scripts/gpu-check.sh --dry-run on a machine without a GPU: the budget, the timeouts and the packing, as
# the GPU machine's one call relies on them. What comes back from that machine is at most 8 files of
# under 16 MiB, at most two folders down, named in letters, digits, '.', '_' and '-'; the summary must be
# complete even when the command is killed at its limit.
#   tests/scripts/gpu_check_dry_run.sh BUILD_DIR [BUDGET]
set -uo pipefail
build=$(realpath "${1:?build folder}")
budget=${2:-120}
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
steps=(build env gpu-tests quick gpu-speed portable diverge training torch prednet qualify prednet-paper)

# check_out DIR: the rules for what comes back.
check_out() {
  local out=$1 n
  n=$(find "$out" -mindepth 1 -type f | wc -l)
  [ "$n" -le 8 ] || fail "$out holds $n files (at most 8 come back)"
  find "$out" -mindepth 1 ! -type f ! -type d | grep -q . && fail "$out holds something that is not a plain file"
  find "$out" -mindepth 3 | grep -q . && fail "$out has entries more than two folders down"
  find "$out" -mindepth 1 -type f -size +16383k | while read -r f; do echo "FAIL: $f is 16 MiB or more"; done | grep -q FAIL &&
    failures=$((failures + 1))
  find "$out" -mindepth 1 -printf '%f\n' | grep -vqE '^[A-Za-z0-9._-]+$' && fail "$out has a name outside [A-Za-z0-9._-]"
  find "$out" -mindepth 1 -name '.pack.*' | grep -q . && fail "$out still holds a temporary file"
  [ -s "$out/summary.txt" ] || fail "$out has no summary.txt"
  if [ -f "$out/gpu-check.tar.gz" ]; then
    tar -tzf "$out/gpu-check.tar.gz" >"$scratch/list" 2>&1 || fail "gpu-check.tar.gz does not unpack: $(head -n 2 "$scratch/list")"
    [ "$(stat -c %s "$out/gpu-check.tar.gz")" -le $((15 * 1024 * 1024)) ] || fail "gpu-check.tar.gz over 15 MiB"
  fi
}

# 1. A whole dry run within its budget.
t0=$SECONDS
DETAUDIT_BIN="$build" "$root/scripts/gpu-check.sh" --dry-run --budget "$budget" "$scratch/out" >"$scratch/stdout" 2>"$scratch/stderr"
rc=$?
took=$((SECONDS - t0))
echo "dry run: exit $rc in $took s (budget $budget s)"
cat "$scratch/stdout"
[ "$rc" -eq 0 ] || fail "the dry run exited $rc (every stand-in should pass or be skipped): $(head -n 3 "$scratch/stderr")"
[ "$took" -le $((budget + 15)) ] || fail "the dry run took $took s, over its budget of $budget s"
check_out "$scratch/out"
cmp -s "$scratch/stdout" "$scratch/out/summary.txt" || fail "stdout is not the summary"
[ "$(wc -l <"$scratch/stdout")" -lt 200 ] || fail "the summary has $(wc -l <"$scratch/stdout") lines (under 200)"
for s in "${steps[@]}"; do
  n=$(grep -cE "^step $s: (ok|failed|timed out|skipped)" "$scratch/out/summary.txt")
  [ "$n" -eq 1 ] || fail "summary has $n lines for step $s (one expected)"
done
grep -qE '^step build: ok' "$scratch/out/summary.txt" || fail "the build step did not pass"
grep -qE '^step quick: ok' "$scratch/out/summary.txt" || fail "the quick step did not run and pass within $budget s"
grep -qE '^  atomics: cpu\?order=atomic&threads=2[^ ]* reduce\?op=softmax' "$scratch/out/summary.txt" ||
  fail "the quick step's figures lack the atomic softmax cell"
grep -q 'quick/results.json' "$scratch/list" || fail "the tarball lacks quick/results.json"
grep -qE '^gpu-check: done in [0-9]+ s' "$scratch/out/summary.txt" || fail "no closing line"

# 2. A budget too small for the steps: each is skipped with its line, and the files still follow the rules.
DETAUDIT_BIN="$build" "$root/scripts/gpu-check.sh" --dry-run --budget 30 "$scratch/small" >"$scratch/small.stdout" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "the 30 s dry run exited $rc"
check_out "$scratch/small"
grep -qE '^step portable: skipped \(needs [0-9]+ s, -?[0-9]+ s of the budget left\)' "$scratch/small/summary.txt" ||
  fail "the 30 s dry run did not skip the portable design with its reason"

# 3. A step past its limit is timed out and the next one runs; then the whole command is killed mid-step
# (as the GPU machine kills a command at its limit): what is in OUT still follows the rules and holds
# every finished step's line.
mkdir -p "$scratch/killed" "$scratch/tmp"
TMPDIR="$scratch/tmp" DETAUDIT_BIN="$build" GPU_CHECK_STEP_LIMIT=portable=2 setsid "$root/scripts/gpu-check.sh" --dry-run --budget 240 "$scratch/killed" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -qE '^step diverge: ' "$scratch/killed/summary.txt" 2>/dev/null && break
  sleep 0.2
done
# The whole session: the steps run under timeout(1), each in a process group of its own.
pkill -KILL -s "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "killed run: summary so far:"; cat "$scratch/killed/summary.txt"
check_out "$scratch/killed"
for s in build env gpu-tests quick gpu-speed diverge; do
  grep -qE "^step $s: " "$scratch/killed/summary.txt" || fail "killed run: the summary lost step $s"
done
grep -qE '^step portable: timed out \(limit 2 s\) in [0-9]+ s$' "$scratch/killed/summary.txt" ||
  fail "the portable step capped at 2 s was not reported as timed out"

# 4. The two heavy steps, asked for: they run and pass (the long steps before them cut to 1 s, which makes
# those time out and the run exit 1).
DETAUDIT_BIN="$build" GPU_CHECK_STEP_LIMIT=portable=1,diverge=1,training=1,prednet=1 \
  "$root/scripts/gpu-check.sh" --dry-run --qualify --paper --budget 300 "$scratch/heavy" >"$scratch/heavy.stdout" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "the run with four steps cut to 1 s exited $rc (1 expected)"
check_out "$scratch/heavy"
for s in qualify prednet-paper; do
  grep -qE "^step $s: ok" "$scratch/heavy/summary.txt" || fail "--qualify --paper: step $s did not pass: $(grep "^step $s" "$scratch/heavy/summary.txt")"
done

# 5. Bad arguments: exit 2, one line; an OUT holding other files is refused and keeps them.
"$root/scripts/gpu-check.sh" --budget soon "$scratch/x" 2>"$scratch/err"; rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$scratch/err")" -eq 1 ] || fail "--budget soon: exit $rc, $(wc -l <"$scratch/err") lines"
mkdir -p "$scratch/theirs" && echo keep >"$scratch/theirs/notes.txt"
"$root/scripts/gpu-check.sh" --dry-run "$scratch/theirs" 2>"$scratch/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q keep "$scratch/theirs/notes.txt" || fail "an OUT with another file: exit $rc, or the file was touched"

if [ "$failures" -eq 0 ]; then echo "gpu-check dry run: all checks passed"; else echo "gpu-check dry run: $failures checks FAILED"; fi
[ "$failures" -eq 0 ]
