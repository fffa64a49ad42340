#!/usr/bin/env bash
# Side by side, in one run: autoencoder training steps per second on this CPU, detaudit's native
# backend (deterministic order=blocked and nondeterministic order=atomic) against PyTorch (Debian's
# python3-torch) with the identical architecture, batch size (64), optimizer (Adam) and thread count.
# Needs `make build` first and python3-torch (apt-get install python3-torch).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
STEPS=${STEPS:-100}
[ -x "$BUILD/bench/bench_train" ] || { echo "ae-vs-torch: $BUILD/bench/bench_train missing: run make build" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "ae-vs-torch: python3-torch missing: apt-get install python3-torch" >&2; exit 2; }

torch_det=$(OMP_NUM_THREADS=$THREADS /usr/bin/python3 bench/ae_torch.py --threads "$THREADS" --steps "$STEPS" --deterministic 1)
torch_nondet=$(OMP_NUM_THREADS=$THREADS /usr/bin/python3 bench/ae_torch.py --threads "$THREADS" --steps "$STEPS" --deterministic 0)
ours=$("$BUILD/bench/bench_train" --benchmark_format=json --benchmark_min_time=3 2>/dev/null)

/usr/bin/python3 - "$torch_det" "$torch_nondet" "$ours" <<'PY'
import json, sys
td, tn, ours = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
ms = {}
for b in ours["benchmarks"]:
    if "error_occurred" in b and b["error_occurred"]:
        sys.exit(f"bench_train: {b['name']}: {b.get('error_message')}")
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    ms[b["name"].split("/")[0]] = b["real_time"] * scale
print(f"PyTorch {td['version']} ({td['threads']} threads): {td['ms_per_step']:.1f} ms/step deterministic, "
      f"{tn['ms_per_step']:.1f} ms/step default")
for name, v in sorted(ms.items()):
    ref = td["ms_per_step"] if "blocked" in name.lower() else tn["ms_per_step"]
    print(f"detaudit {name}: {v:.1f} ms/step = {ref / v:.2f}x PyTorch's steps per second (goal 3x)")
PY
