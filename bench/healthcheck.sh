#!/usr/bin/env bash
# `detaudit healthcheck` measured on this machine: the median of RUNS (10) whole runs (start-up included, as a
# scheduler sees it), its one line, the cells judged, and the FLOP/s its runs sustain against the machine's FMA peak
# (bench_gemm's BM_peak_fma on two threads, the best of five, as bench/speed-table.sh measures it).
#   bench/healthcheck.sh [REFERENCE]   without one, a reference is made first: two ranks of `detaudit fleet` (level 1,
#                                      the quick suite) on this machine, one after the other, then `fleet report`
# BUILD (build), RUNS (10), BUDGET (the default, 6 s). Needs `make build` (detaudit, bench/bench_gemm).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-10}
exe=$BUILD/detaudit
for b in "$exe" "$BUILD/bench/bench_gemm"; do
  [ -x "$b" ] || { echo "healthcheck-bench: $b missing: run make build" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
say() { echo "healthcheck-bench: $*" >&2; }
ref=${1:-}
if [ -z "$ref" ]; then
  say "making a reference: two ranks of fleet --level 1 on this machine"
  for r in 0 1; do
    HOME=$out "$exe" fleet --rank "$r" --ranks 2 --out "$out/fleet" --no-history --quiet >/dev/null
  done
  "$exe" fleet report "$out/fleet" --quiet >/dev/null
  ref=$out/fleet/reference.json
fi
say "the FMA peak (best of 5)"
"$BUILD/bench/bench_gemm" --benchmark_filter='peak' --benchmark_repetitions=5 --benchmark_format=json 2>/dev/null \
  >"$out/peak.json"
say "$RUNS runs of: detaudit healthcheck --reference $ref ${BUDGET:+--budget $BUDGET}"
# The checks record into a history of their own (as a node's would, defaults on: the first check is recorded, the
# same answer again is not), never the user's.
DETAUDIT_HISTORY=$out/history.db /usr/bin/python3 - "$exe" "$ref" "$RUNS" "${BUDGET:-}" "$out/peak.json" <<'PY'
import json, statistics, subprocess, sys, time
exe, ref, runs, budget, peak_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
peak = max(b["GFLOP/s"] for b in json.load(open(peak_file))["benchmarks"] if b.get("run_type") != "aggregate")
walls, cells, rates, lines = [], [], [], []
for i in range(runs):
    cmd = [exe, "healthcheck", "--reference", ref, "--format", "json"] + (["--budget", budget] if budget else [])
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    h = json.loads(p.stdout)["healthcheck"]
    if p.returncode != 0:
        sys.exit(f"healthcheck-bench: run {i + 1} exited {p.returncode}: {h['line']}")
    walls.append(wall)
    cells.append(h["cells"])
    rates.append(h["gflop_per_s"])
    lines.append(h["line"])
med = statistics.median(walls)
rate = statistics.median(rates)
print(f"| healthcheck, {runs} runs | median | range |")
print("|---|---|---|")
print(f"| wall time, start-up included | {med:.2f} s | {min(walls):.2f}-{max(walls):.2f} s |")
print(f"| cells judged | {statistics.median(cells):.0f} | {min(cells)}-{max(cells)} |")
print(f"| FLOP/s of the runs judged | {rate:.1f} GFLOP/s | {min(rates):.1f}-{max(rates):.1f} |")
print(f"| FMA peak (two threads) | {peak:.0f} GFLOP/s | share {rate / peak:.1%} |")
print(f"\nthe line of the median run: {lines[sorted(range(runs), key=lambda i: walls[i])[runs // 2]]}")
PY
