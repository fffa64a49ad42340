#!/usr/bin/env python3
"""The figures scripts/gpu-check.sh puts in its summary: for each claim only a GPU can settle, the number
that settles it, read from the results a step wrote (results.json, gpu_speed's JSON, the gpu tests' log).

  gpu_check_figures.py probe DIR         distinct outputs of the atomic cells; cuDNN's claims against the runs
  gpu_check_figures.py portable DIR      condition (d) across the design's targets: final weights and curves
  gpu_check_figures.py training DIR      the design's verdict lines and hardware noise per target
  gpu_check_figures.py speed FILE        device hash against a copy; tree, atomic, portable sums against CUB
  gpu_check_figures.py tests LOG         what the gpu tests printed about what they observed

Each line starts with two spaces and names its claim. Output is capped (the summary stays short); a
file that is missing or unreadable gives one line saying so, and the exit status is 0 either way.
Standard library only: the GPU machines have python3 but no extra packages.
"""
import json
import os
import re
import sys

MAX_LINES = 40


def out(lines, cap=MAX_LINES):
    for line in lines[:cap]:
        print("  " + line)
    if len(lines) > cap:
        print(f"  ... {len(lines) - cap} more lines in the tarball")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"{path}: {e.__class__.__name__}: {e}"


def distinct_text(o):
    status = o.get("status", "?")
    if status != "ok":
        reason = (o.get("reason") or "").splitlines()[0][:80] if o.get("reason") else ""
        return f"{status}{': ' + reason if reason else ''}"
    return f"{o.get('distinct', '?')} distinct in {o.get('repeats', '?')}"


def probe(d):
    res, err = load(os.path.join(d, "results.json"))
    if err:
        return out([f"probe: no results ({err})"])
    obs = res.get("observations", [])
    lines = []
    # Atomic cells: a race can only be seen on a device; their distinct counts say whether it was.
    for o in obs:
        t, w = o.get("target", ""), o.get("workload", "")
        atomic = "order=atomic" in t or "pool=nondeterministic" in t
        if atomic and (w.startswith("reduce?op=softmax") or w.startswith("maxpool")):
            lines.append(f"atomics: {t} {w}: {distinct_text(o)}")
    # cuDNN: each algorithm's two claims (Find's determinism field, cudnn_ops.h's marks) against the runs,
    # aggregated over the workloads that ran it.
    algos = {}
    for o in obs:
        det = o.get("details") or {}
        if not o.get("target", "").startswith("cudnn") or "algo_name" not in det:
            continue
        key = (det.get("pass", "?"), det.get("algo_name", "?"))
        a = algos.setdefault(key, {"find": set(), "header": set(), "cells": 0, "varied": 0, "max": 0, "n": 0})
        a["find"].add(det.get("claimed_deterministic", "?"))
        a["header"].add(det.get("documented_deterministic", "?"))
        if o.get("status") == "ok":
            a["cells"] += 1
            k = int(o.get("distinct", 1))
            a["varied"] += k > 1
            a["max"] = max(a["max"], k)
            a["n"] = max(a["n"], int(o.get("repeats", 0)))
    for (pss, name), a in sorted(algos.items()):
        lines.append(f"cudnn {pss} {name}: Find claims deterministic={'/'.join(sorted(a['find']))}, "
                     f"cudnn_ops.h={'/'.join(sorted(a['header']))}; observed: {a['varied']} of {a['cells']} cells "
                     f"varied (at most {a['max']} distinct in {a['n']})")
    counts = {}
    for o in obs:
        counts[o.get("status", "?")] = counts.get(o.get("status", "?"), 0) + 1
    lines.insert(0, "probe cells: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    out(lines)


def design_runs(d):
    res, err = load(os.path.join(d, "results.json"))
    if err:
        return None, err
    return res.get("training", []), None


def portable(d):
    runs, err = design_runs(d)
    if err:
        return out([f"portable design: no results ({err})"])
    by_seed, not_ok = {}, {}
    for r in runs:
        if r.get("condition") != "d":
            continue
        if r.get("status", "ok") != "ok":
            reason = (r.get("reason") or "").splitlines()[0][:100] if r.get("reason") else ""
            not_ok.setdefault(r.get("target"), f"{r.get('status')}{': ' + reason if reason else ''}")
            continue
        by_seed.setdefault(r.get("seed"), []).append(r)
    lines, same = [], 0
    for seed, rs in sorted(by_seed.items(), key=lambda kv: str(kv[0])):
        wfp = {r.get("weights_fingerprint") for r in rs}
        cfp = {r.get("curve_fingerprint") for r in rs}
        ok = len({r.get("target") for r in rs}) >= 2 and len(wfp) == 1 and len(cfp) == 1 and None not in wfp
        same += ok
        per_target = {}
        for r in rs:
            per_target.setdefault(r.get("target"), set()).add(
                f"weights {str(r.get('weights_fingerprint'))[:12]} curve {str(r.get('curve_fingerprint'))[:12]}")
        lines.append(f"portable (d) seed {seed}, {len(rs)} runs: " + "; ".join(
            f"{t}: {', '.join(sorted(v))}" for t, v in sorted(per_target.items())) +
            (" -- identical" if ok else " -- one target only" if len(per_target) < 2 else " -- DIFFER"))
    for t, why in sorted(not_ok.items()):
        lines.append(f"portable (d) on {t}: no finished run ({why})")
    targets = {r.get("target") for rs in by_seed.values() for r in rs}
    lines.insert(0, f"portable training, condition (d): {same} of {len(by_seed)} seeds bitwise identical across "
                    f"{len(targets)} targets" + (" (a target did not run: nothing compared)" if not_ok else ""))
    out(lines)


def training(d):
    runs, err = design_runs(d)
    if err:
        return out([f"training: no results ({err})"])
    lines = []
    status = {}
    for r in runs:
        status[r.get("status", "ok")] = status.get(r.get("status", "ok"), 0) + 1
    lines.append(f"training runs: {len(runs)} (" + ", ".join(f"{v} {k}" for k, v in sorted(status.items())) + ")")
    speeds = {}
    for r in runs:
        if r.get("steps_per_second"):
            speeds.setdefault(r.get("target"), []).append(float(r["steps_per_second"]))
    for t, v in sorted(speeds.items()):
        lines.append(f"steps per second: {t}: {sum(v) / len(v):.3g} (mean of {len(v)} runs)")
    # The hardware noise rows of the report: sigma^2_hw and B_hw per target.
    try:
        with open(os.path.join(d, "report.md"), encoding="utf-8") as f:
            md = f.read().splitlines()
    except OSError as e:
        md = []
        lines.append(f"training: no report.md ({e})")
    on = False
    for line in md:
        if line.startswith("Hardware noise against SGD noise"):
            on = True
        elif on and line.startswith("## "):
            break
        if on and line.startswith("|") and not set(line) <= set("|- :"):
            lines.append("noise: " + re.sub(r"\s+", " ", line))
    out(lines, 20)


def speed(path):
    s, err = load(path)
    if err:
        return out([f"gpu speed: no output ({err})"])
    if "skipped" in s:
        return out([f"gpu speed: skipped: {s['skipped']}"])
    lines = []

    def section(label, d, describe):  # a gpu_speed section: its error, or its figure lines
        if "error" in d:
            lines.append(f"{label}: error: {d['error']}")
        elif d:
            lines.extend(describe(d))

    section("device hash", s.get("fingerprint", {}), lambda f: [
        f"device hash (keyed lanes): {f.get('device_hash_gbps')} GB/s against a device-to-device copy "
        f"{f.get('memcpy_d2d_gbps')} GB/s: ratio {f.get('ratio')} (goal {f.get('goal')})"])

    def sums(r):
        cub = (r.get("cub") or {}).get("ms")
        for k in ("tree", "atomic", "portable", "cub"):
            v = r.get(k) or {}
            ratio = f", {v['ms'] / cub:.2f}x CUB's time" if cub and v.get("ms") else ""
            yield f"sum of 2^28 {k}: {v.get('ms')} ms, {v.get('gbps')} GB/s, value {v.get('value')}{ratio}"

    section("sum of 2^28", s.get("sum_2_28", {}), sums)
    section("cudnn bwd_filter", s.get("cudnn_bwd_filter", {}), lambda c: [
        f"cudnn bwd_filter: fastest {c.get('fastest')}, fastest deterministic "
        f"{c.get('fastest_deterministic')}, cost of determinism {c.get('cost_of_determinism')}"])
    out(lines)


def tests(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            log = f.read().splitlines()
    except OSError as e:
        return out([f"gpu tests: no log ({e})"])
    lines = [l.strip() for l in log if re.match(r"^\[ (detect|kernels|portable|bf16x9|race) +\]", l)]
    lines += [l.strip() for l in log if re.match(r"^\[  FAILED  \] \S+\.\S+", l)]
    summary = [l.strip() for l in log if re.match(r"^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?", l)]
    out(summary + lines)


def main(argv):
    cmds = {"probe": probe, "portable": portable, "training": training, "speed": speed, "tests": tests}
    if len(argv) != 3 or argv[1] not in cmds:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cmds[argv[1]](argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
