#!/usr/bin/env bash
# Side by side, in one run: PredNet training steps per second on this CPU, detaudit's native backend
# (deterministic order=blocked and nondeterministic order=atomic, each with the direct convolutions and with
# conv=winograd, Winograd F(4x4,3x3)) against PyTorch (Debian's python3-torch)
# with the identical network (models/prednet.hpp's quick configuration: 1 x 64 x 64, stacks (1, 16, 32, 64),
# nt 10), batch (4), loss, optimizer (Adam 1e-3) and thread count. Needs bench_prednet built
# (make build) and python3-torch (apt-get install python3-torch).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
STEPS=${STEPS:-20}
[ -x "$BUILD/bench/bench_prednet" ] || { echo "prednet-vs-torch: $BUILD/bench/bench_prednet missing: run make build" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "prednet-vs-torch: python3-torch missing: apt-get install python3-torch" >&2; exit 2; }

ROUNDS=${ROUNDS:-3}
# The machines this runs on are often shared: each round runs the three measurements back to back, the
# ratios are taken within a round, and the median round is the figure to report.
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  echo "prednet-vs-torch: round $r/$ROUNDS" >&2
  mkdir "$results/$r"
  OMP_NUM_THREADS=$THREADS /usr/bin/python3 bench/prednet_torch.py --threads "$THREADS" --steps "$STEPS" --deterministic 1 \
    >"$results/$r/det.json"
  OMP_NUM_THREADS=$THREADS /usr/bin/python3 bench/prednet_torch.py --threads "$THREADS" --steps "$STEPS" --deterministic 0 \
    >"$results/$r/nondet.json"
  "$BUILD/bench/bench_prednet" --threads="$THREADS" --benchmark_filter=BM_train_step --benchmark_format=json --benchmark_min_time=3 \
    2>/dev/null >"$results/$r/ours.json"
done

/usr/bin/python3 - "$results" "$ROUNDS" <<'PY'
import json, os, sys
rounds = [{k: json.load(open(os.path.join(sys.argv[1], str(r), k + ".json"))) for k in ("det", "nondet", "ours")}
          for r in range(1, int(sys.argv[2]) + 1)]
ratios = {}
for i, r in enumerate(rounds, 1):
    td, tn = r["det"], r["nondet"]
    line = [f"round {i}: PyTorch {td['ms_per_step']:.1f} ms/step deterministic, {tn['ms_per_step']:.1f} default"]
    for b in r["ours"]["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"bench_prednet: {b['name']}: {b.get('error_message')}")
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        name = b["name"].split("/")[0].replace("BM_train_step_", "")
        ms = b["real_time"] * scale
        # blocked (deterministic) against PyTorch deterministic, atomic against its default; winograd_* likewise.
        deterministic = name.endswith("blocked")
        ref = td["ms_per_step"] if deterministic else tn["ms_per_step"]
        ratios.setdefault(name, []).append((ref / ms, ms, ref))
        line.append(f"{name} {ms:.1f} ms ({ref / ms:.2f}x)")
    print("; ".join(line))
print(f"PyTorch {rounds[0]['det']['version']}, {rounds[0]['det']['threads']} threads, PredNet quick (batch 4, nt 10); "
      f"median of {len(rounds)} rounds:")
for name, v in sorted(ratios.items()):
    ratio, ms, ref = sorted(v)[len(v) // 2]
    against = "deterministic" if name.endswith("blocked") else "default (nondeterministic)"
    print(f"detaudit {name}: {ms:.1f} ms/step vs PyTorch {against} {ref:.1f} ms/step = {ratio:.2f}x "
          f"PyTorch's steps per second (goal 2x; rounds {min(x[0] for x in v):.2f}x to {max(x[0] for x in v):.2f}x)")
PY
