#!/usr/bin/env bash
# Every speed ratio the project tracks, measured side by side in one run on this machine, printed as one
# markdown table with each goal and whether it is met:
#   - autoencoder step, order=blocked, against PyTorch with use_deterministic_algorithms(True);
#   - autoencoder step, order=portable (CPU = GPU bits) against order=blocked;
#   - PredNet quick step, the best deterministic detaudit (blocked, direct or conv=winograd) against
#     deterministic PyTorch;
#   - sgemm 1024^3, order=blocked against OpenBLAS; order=portable against blocked (512^3 and 1024^3);
#   - the machine's FMA peak (bench_gemm's BM_peak_fma, the best of five), and each gemm's share of it.
# Every measurement runs several times (the gemms five, the training steps three, on both sides) and the
# fastest run counts: these machines are shared, other tenants only ever add time, and single runs move
# by 10-40%.
# Needs `make build` (bench_train, bench_prednet, bench_gemm) and python3-torch for the PyTorch rows
# (apt-get install python3-torch; without it those rows say so). THREADS (2) as in every benchmark here.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
for b in bench_train bench_prednet bench_gemm; do
  [ -x "$BUILD/bench/$b" ] || { echo "speed-table: $BUILD/bench/$b missing: run make build" >&2; exit 2; }
done
torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || torch=0
[ "$torch" = 1 ] || echo "speed-table: python3-torch missing (apt-get install python3-torch): no PyTorch rows" >&2

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
say() { echo "speed-table: $*" >&2; }
torch_runs() {  # torch_runs NAME STEPS: bench/NAME.py three times, deterministic, into $out/NAME.{1,2,3}.json
  for i in 1 2 3; do
    OMP_NUM_THREADS=$THREADS /usr/bin/python3 "bench/$1.py" --threads "$THREADS" --steps "$2" --deterministic 1 \
      >"$out/$1.$i.json"
  done
}
if [ "$torch" = 1 ]; then
  say "PyTorch autoencoder (deterministic), three runs"
  torch_runs ae_torch 100
fi
say "detaudit autoencoder (blocked, portable)"
"$BUILD/bench/bench_train" --benchmark_filter='blocked|portable' --benchmark_repetitions=3 \
  --benchmark_format=json 2>/dev/null >"$out/ae.json"
if [ "$torch" = 1 ]; then
  say "PyTorch PredNet (deterministic), three runs"
  torch_runs prednet_torch 20
fi
say "detaudit PredNet (blocked: direct and winograd)"
"$BUILD/bench/bench_prednet" --threads="$THREADS" --benchmark_filter='BM_train_step_(winograd_)?blocked' \
  --benchmark_repetitions=3 --benchmark_format=json --benchmark_min_time=3 2>/dev/null >"$out/prednet.json"
say "gemm (blocked, portable, OpenBLAS) and the FMA peak"
"$BUILD/bench/bench_gemm" --benchmark_filter='blocked/(512|1024)|portable/(512|1024)|openblas_sgemm/1024' \
  --benchmark_repetitions=5 --benchmark_format=json 2>/dev/null >"$out/gemm.json"
"$BUILD/bench/bench_gemm" --benchmark_filter='peak' --benchmark_repetitions=5 --benchmark_format=json 2>/dev/null \
  >"$out/peak.json"

/usr/bin/python3 - "$out" "$torch" <<'PY'
import json, os, platform, sys
d, torch = sys.argv[1], sys.argv[2] == "1"
def load(name):
    return json.load(open(os.path.join(d, name)))
def runs(doc):
    # Each benchmark's repetitions, the fastest first.
    r = {}
    for b in doc["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"speed-table: {b['name']}: {b.get('error_message')}")
        if b.get("run_type") == "aggregate":
            continue
        name = b.get("run_name", b["name"]).split("/min_time")[0].replace("/real_time", "")
        r.setdefault(name, []).append(b)
    for v in r.values():
        v.sort(key=lambda b: b["real_time"])
    return r
def torch_best(name):
    # PyTorch's three runs: the fastest (its ms_per_step), as for detaudit's own.
    docs = [load(f"{name}.{i}.json") for i in (1, 2, 3)]
    return min(docs, key=lambda t: t["ms_per_step"])
def ms(b):
    return b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
ae, pn, gm = runs(load("ae.json")), runs(load("prednet.json")), runs(load("gemm.json"))
peak = max(b["GFLOP/s"] for v in runs(load("peak.json")).values() for b in v)
peak_label = next(iter(runs(load("peak.json")).values()))[0].get("label", "")
ctx = load("gemm.json")["context"]
rows = []
def row(measure, now, ratio, goal, met):
    rows.append((measure, now, f"{ratio:.2f}", goal, "met" if met else "NOT met"))
blocked, portable = ms(ae["BM_train_step_blocked"][0]), ms(ae["BM_train_step_portable"][0])
if torch:
    t = torch_best("ae_torch")
    row("autoencoder step, `order=blocked`, vs PyTorch deterministic",
        f"{blocked:.1f} vs {t['ms_per_step']:.1f} ms", t["ms_per_step"] / blocked, ">= 4x", t["ms_per_step"] / blocked >= 4)
else:
    rows.append(("autoencoder step, `order=blocked`, vs PyTorch deterministic", "no python3-torch", "-", ">= 4x", "-"))
row("autoencoder step, `order=portable` vs `blocked` (slowdown)", f"{portable:.1f} vs {blocked:.1f} ms",
    portable / blocked, "<= 1.5x", portable / blocked <= 1.5)
best = min((ms(v[0]), k.replace("BM_train_step_", "")) for k, v in pn.items())
if torch:
    t = torch_best("prednet_torch")
    row(f"PredNet quick step, best deterministic (`{best[1]}`), vs PyTorch deterministic",
        f"{best[0]:.0f} vs {t['ms_per_step']:.0f} ms", t["ms_per_step"] / best[0], ">= 2x", t["ms_per_step"] / best[0] >= 2)
else:
    rows.append((f"PredNet quick step, best deterministic (`{best[1]}`), vs PyTorch", f"{best[0]:.0f} ms", "-", ">= 2x", "-"))
gf = {k: v[0]["GFLOP/s"] for k, v in gm.items()}  # the fastest repetition
b1024, p1024 = gf["BM_native_gemm/blocked/1024"], gf["BM_native_gemm/portable/1024"]
b512, p512 = gf["BM_native_gemm/blocked/512"], gf["BM_native_gemm/portable/512"]
if "BM_openblas_sgemm/1024" in gf:
    ob = gf["BM_openblas_sgemm/1024"]
    row("sgemm 1024^3, `order=blocked`, vs OpenBLAS", f"{b1024:.0f} vs {ob:.0f} GFLOP/s", b1024 / ob, ">= 0.95",
        b1024 / ob >= 0.95)
row("sgemm 1024^3, `order=portable` vs `blocked`", f"{p1024:.0f} vs {b1024:.0f} GFLOP/s", p1024 / b1024, ">= 0.8",
    p1024 / b1024 >= 0.8)
row("sgemm 512^3, `order=portable` vs `blocked`", f"{p512:.0f} vs {b512:.0f} GFLOP/s", p512 / b512, ">= 0.8",
    p512 / b512 >= 0.8)
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
print(f"Machine: {model} ({isa}), {ctx.get('num_cpus')} CPUs, "
      f"{os.environ.get('THREADS', '2')} threads; FMA peak {peak:.0f} GFLOP/s ({peak_label}, best of 5)")
if torch:
    print(f"PyTorch {load('ae_torch.1.json')['version']}; every figure the fastest of its runs")
print()
print("| measure | now | ratio | goal | |")
print("|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
print()
print(f"Share of the FMA peak: sgemm 1024^3 blocked {b1024 / peak:.0%}, portable {p1024 / peak:.0%}"
      + (f", OpenBLAS {gf['BM_openblas_sgemm/1024'] / peak:.0%}" if "BM_openblas_sgemm/1024" in gf else ""))
PY
