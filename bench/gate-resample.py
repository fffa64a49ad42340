#!/usr/bin/env python3
"""The training gate measured on real runs: `check` over resampled baseline/new pairs of the default design.

Usage: bench/gate-resample.py POOL [--pairs N] [--detaudit PATH] [--work DIR] [--seed S]

POOL is a results directory of `detaudit train autoencoder --seeds 3 --replicates R` with R >= 4 (the
default design's 3 seeds, more replicates than it runs). Each pair draws, without overlap, the default
design's runs from the pool twice: per seed 2 + 2 replicates of (a), and 6 + 6 of (c)'s runs of its one
seed; (b), (d) and (e) are deterministic and the same in both. The first of the pair is saved as a baseline
(`detaudit baseline save`), the second checked against it (`detaudit check --format json`), unchanged and
with every (a) run's curve, and so its final loss, moved:
  - by +5%, +20% and +50%;
  - by the shift the unchanged check states it detects with power 0.8 (its own finding's number).
It prints, per variant, how many checks failed the (a) and (c) cells, how many exited 2 (a cell not
judged), and the stated-shift catch rate. Nothing here is timed; the runs are the pool's, unchanged but for
the moved curves.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys


def load(pool):
    with open(os.path.join(pool, "results.json")) as f:
        return json.load(f)


def window_mean(curve, window):
    # As detaudit's loader checks a curve that never passed through a float: the doubles, summed in order.
    w = min(max(window, 1), len(curve))
    s = 0.0
    for x in curve[len(curve) - w:]:
        s += x
    return s / w


def moved(run, window, factor=None, add=None):
    r = dict(run)
    curve = [x * factor if factor is not None else x + add for x in run["curve"]]
    r["curve"] = curve
    r["final_loss"] = window_mean(curve, window)
    r.pop("curve_fingerprint", None)  # the curve is no longer the worker's
    return r


def draw(doc, rng):
    """Two disjoint default designs (3 seeds x 2 replicates) from the pool: (base, new) lists of runs."""
    by = {}
    for r in doc["training"]:
        if r.get("status") != "ok":
            continue
        by.setdefault((r["condition"], r["target"], r["seed"]), []).append(r)
    base, new = [], []
    for (cond, target, seed), runs in sorted(by.items()):
        runs = sorted(runs, key=lambda r: r["replicate"])
        if cond in ("a", "c"):
            k = 2 if cond == "a" else 6
            if len(runs) < 2 * k:
                sys.exit(f"gate-resample: ({cond}) {target} seed {seed} has {len(runs)} runs; {2 * k} are needed")
            pick = rng.sample(runs, 2 * k)
            for side, part in ((base, pick[:k]), (new, pick[k:])):
                for i, r in enumerate(part):
                    r = dict(r)
                    r["replicate"] = i
                    r["key"] = f"{cond}|{target}|{seed}|{i}"
                    side.append(r)
        else:
            base.extend(runs)
            new.extend(runs)
    return base, new


def write(doc, runs, path):
    d = dict(doc)
    d["training"] = runs
    d["plan"] = json.loads(json.dumps(doc["plan"]))
    d["plan"]["design"]["replicates"] = 2
    d["plan"]["runs"] = len(runs)
    d["analysis"] = {}
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "results.json"), "w") as f:
        json.dump(d, f)


def check(exe, base_dir, new_dir):
    r = subprocess.run([exe, "check", new_dir, "--baseline", os.path.join(base_dir, "baseline.json"),
                        "--no-history", "--format", "json"], capture_output=True, text=True)
    try:
        out = json.loads(r.stdout)
    except json.JSONDecodeError:
        sys.exit(f"gate-resample: check printed no JSON (exit {r.returncode}): {r.stderr.strip()}")
    findings = out.get("check", {}).get("findings", [])
    return r.returncode, findings


def cell_verdicts(findings, cond):
    return [f for f in findings if f["workload"].endswith(f"({cond})") and
            f["kind"] in ("training_shift", "training_not_judged")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pool")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--detaudit", default=os.path.join(os.path.dirname(__file__), "..", "build", "detaudit"))
    ap.add_argument("--work", default="/tmp/detaudit-gate-resample")
    ap.add_argument("--seed", type=int, default=20261205)
    a = ap.parse_args()
    doc = load(a.pool)
    window = doc["plan"]["design"]["window"]
    rng = random.Random(a.seed)
    shutil.rmtree(a.work, ignore_errors=True)
    variants = ["unchanged", "+5%", "+20%", "+50%", "stated shift"]
    tally = {v: {"checks": 0, "a_fail": 0, "c_fail": 0, "exit2": 0, "a_cells": 0, "a_cells_fail": 0} for v in variants}
    p_values = []
    for k in range(a.pairs):
        base, new = draw(doc, rng)
        bdir = os.path.join(a.work, f"{k}-base")
        write(doc, base, bdir)
        r = subprocess.run([a.detaudit, "baseline", "save", bdir], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gate-resample: baseline save failed: {r.stderr.strip()}")
        stated = {}
        for v in variants:
            runs = new
            if v.startswith("+"):
                factor = 1 + float(v[1:-1]) / 100
                runs = [moved(x, window, factor=factor) if x["condition"] == "a" else x for x in new]
            elif v == "stated shift":
                runs = [moved(x, window, add=stated[x["target"]]) if x["condition"] == "a" and x["target"] in stated
                        else x for x in new]
            ndir = os.path.join(a.work, f"{k}-{v.replace('%', 'pct').replace(' ', '-').replace('+', 'plus')}")
            write(doc, runs, ndir)
            code, findings = check(a.detaudit, bdir, ndir)
            t = tally[v]
            t["checks"] += 1
            t["exit2"] += code == 2
            fa = cell_verdicts(findings, "a")
            fc = cell_verdicts(findings, "c")
            t["a_fail"] += any(f["verdict"] == "FAIL" for f in fa)
            t["c_fail"] += any(f["verdict"] == "FAIL" for f in fc)
            t["a_cells"] += len(fa)
            t["a_cells_fail"] += sum(f["verdict"] == "FAIL" for f in fa)
            if v == "unchanged":
                for f in fa:
                    m = re.search(r"detects a shift of ([0-9.e+-]+)", f["message"])
                    if m:
                        stated[f["target"]] = float(m.group(1))
                    m = re.search(r"permutation p = ([0-9.e+-]+)", f["message"])
                    if m:
                        p_values.append(float(m.group(1)))
        print(f"pair {k + 1}/{a.pairs}: stated shifts {', '.join(f'{s:.3g}' for s in stated.values()) or 'none'}",
              file=sys.stderr)
    print(f"{a.pairs} baseline/new pairs of the default design (3 seeds x 2 replicates; (c) 6 + 6 runs) from {a.pool}")
    print("| variant | checks | (a) FAILed | (c) FAILed | exit 2 (not judged) | (a) cells failed |")
    print("|---|---|---|---|---|---|")
    for v in variants:
        t = tally[v]
        print(f"| {v} | {t['checks']} | {t['a_fail']} | {t['c_fail']} | {t['exit2']} | "
              f"{t['a_cells_fail']} of {t['a_cells']} |")
    if p_values:
        print(f"unchanged (a) p-values: min {min(p_values):.3g}, median {sorted(p_values)[len(p_values) // 2]:.3g}")


if __name__ == "__main__":
    main()
