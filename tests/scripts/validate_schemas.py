#!/usr/bin/env python3
"""Every document detaudit writes, and every subcommand's --format json, validated against schemas/.

Usage: validate_schemas.py DETAUDIT_EXE SCHEMA_DIR

Runs the subcommands as a user would (small plans, generated data, a history of its own), validates each
stdout object against cli.schema.json and the documents embedded in it (check's report, qualify.json,
fleet.json) and each file written (results.json of a probe and of a training design, baseline.json,
qualify.json, node.json, fleet.json, reference.json, the export manifest, diverge.json, healthcheck's object)
against its own schema. Then the
schemas are shown to catch a change: the same documents, each edited the way an older or careless writer
would (verdict counts in upper case, a fingerprint too short, an unknown observation field, a verdict no
detaudit gives), must fail. Exit 0 all held, 1 a document broke its schema (each named), 2 could not run.
"""
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("validate_schemas: python3-jsonschema is not installed (Debian: python3-jsonschema)", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    exe, schema_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    schemas = {}
    for name in sorted(os.listdir(schema_dir)):
        if name.endswith(".schema.json"):
            with open(os.path.join(schema_dir, name)) as f:
                s = json.load(f)
            jsonschema.Draft202012Validator.check_schema(s)
            schemas[name[: -len(".schema.json")]] = jsonschema.Draft202012Validator(s)
    work = tempfile.mkdtemp(prefix="detaudit-schemas-")
    env = dict(os.environ, DETAUDIT_HISTORY=os.path.join(work, "history.db"), NO_COLOR="1")
    failures = []
    checked = []

    def validate(kind, doc, where):
        errors = sorted(schemas[kind].iter_errors(doc), key=lambda e: list(e.path))
        checked.append(where)
        for e in errors[:3]:
            failures.append(f"{where} ({kind}.schema.json): {'/'.join(map(str, e.path)) or '(top)'}: {e.message[:200]}")

    def run(args, kind_of_stdout="cli", expect=(0,)):
        p = subprocess.run([exe] + args, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if p.returncode not in expect:
            failures.append(f"detaudit {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[:300]}")
            return None
        if kind_of_stdout is None:
            return None
        try:
            j = json.loads(p.stdout)
        except ValueError:
            failures.append(f"detaudit {' '.join(args)}: stdout is not one JSON object: {p.stdout[:200]!r}")
            return None
        validate("cli", j, "detaudit " + " ".join(args))
        return j

    def load(rel):
        with open(os.path.join(work, rel)) as f:
            return json.load(f)

    # Generated data: 256 28x28 images and labels (raw IDX), for training and diverge.
    data = os.path.join(work, "data")
    os.makedirs(data)
    with open(os.path.join(data, "train-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, 256, 28, 28))
        f.write(bytes((i * 37 + i // 784) % 256 for i in range(256 * 784)))
    with open(os.path.join(data, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, 256))
        f.write(bytes(i % 10 for i in range(256)))

    small = ["--targets", "cpu-ref,cpu?order=blocked&threads=1,cpu?order=atomic&threads=2",
             "--workloads", "matmul?m=8&n=8&k=80,batchinv?m=8&n=16&k=40&rows=3", "--repeats", "2"]
    run(["probe"] + small + ["--out", "P", "--format", "json"])
    validate("results", load("P/results.json"), "P/results.json")
    run(["baseline", "save", "P", "--format", "json"])
    validate("baseline", load("P/baseline.json"), "P/baseline.json")
    # Another run of the same cells: a copy with its own start (one run named twice, or copied whole, is refused by
    # compare; the run a baseline was saved from is no run to check against it).
    shutil.copytree(os.path.join(work, "P"), os.path.join(work, "P2"))
    p2 = load("P2/results.json")
    p2["started_at"] = "2020-01-01T00:00:00Z"
    for o in p2["observations"]:  # its own times (the same outputs timed alike are one run)
        o["seconds"] = [t * 1.5 + 1e-9 for t in o.get("seconds", [])]
    with open(os.path.join(work, "P2/results.json"), "w") as f:
        json.dump(p2, f)
    j = run(["check", "P2", "--baseline", "P/baseline.json", "--format", "json"])
    if j:
        validate("check", j["check"], "check's report")
    run(["compare", "P", "P2", "--format", "json"])
    run(["report", "P", "--format", "json"])
    run(["env", "--format", "json"])
    run(["history", "--format", "json"])
    run(["qualify", "--list", "--format", "json"])
    j = run(["qualify", "--targets", "cpu?order=blocked&threads=1", "--out", "Q", "--format", "json"], expect=(0, 1))
    if j:
        validate("qualify", j["qualify"], "qualify's summary")
    validate("qualify", load("Q/qualify.json"), "Q/qualify.json")
    train = ["--targets", "cpu?threads=2", "--seeds", "1", "--batches", "2", "--window", "1", "--replicates", "1",
             "--data", data]
    run(["train", "autoencoder"] + train + ["--out", "T", "--format", "json"])
    validate("results", load("T/results.json"), "T/results.json")
    run(["baseline", "save", "T", "--format", "json"])
    validate("baseline", load("T/baseline.json"), "T/baseline.json")
    run(["analyze", "T", "--out", "A", "--format", "json"])
    validate("results", load("A/results.json"), "A/results.json")
    run(["diverge", "--targets", "cpu?order=blocked&threads=2", "--steps", "2", "--batch-size", "8", "--data", data,
         "--out", "V", "--format", "json"])
    validate("diverge", load("V/diverge.json"), "V/diverge.json")
    run(["export", "reduce?op=sum&n=100", "--out", "X", "--format", "json"])
    manifest = load("X/manifest.json")
    validate("export", manifest, "X/manifest.json")
    wid = manifest["workloads"][0]["id"]
    shutil.copy(os.path.join(work, "X", wid + ".oracle.npy"), os.path.join(work, "X", wid + ".out.0.npy"))
    run(["import", "X", "--name", "mine", "--format", "json"])
    validate("results", load("X/results.json"), "X/results.json")
    for r in (0, 1):
        run(["fleet", "--rank", str(r), "--ranks", "2", "--targets", "cpu-ref", "--workloads", "reduce?op=sum&n=100",
             "--repeats", "2", "--out", "F"], kind_of_stdout=None)
    j = run(["fleet", "report", "F", "--format", "json"])
    if j:
        validate("fleet", j["fleet"], "fleet report's object")
    validate("fleet", load("F/fleet.json"), "F/fleet.json")
    validate("reference", load("F/reference.json"), "F/reference.json")
    run(["fleet", "merge", "--out", "F/site.json", "F/reference.json", "--format", "json"])
    validate("reference", load("F/site.json"), "F/site.json")
    j = run(["healthcheck", "--reference", "F/reference.json", "--budget", "0.5", "--format", "json"])
    if j:
        validate("healthcheck", j["healthcheck"], "healthcheck's object")
    health = j["healthcheck"] if j else None
    for rank_dir in sorted(os.listdir(os.path.join(work, "F", "ranks"))):
        validate("fleet-node", load(f"F/ranks/{rank_dir}/node.json"), f"F/ranks/{rank_dir}/node.json")
        validate("results", load(f"F/ranks/{rank_dir}/probe/results.json"), f"F/ranks/{rank_dir}/probe/results.json")
    # Could not run: still one object, with the error.
    run(["compare", "nowhere", "P", "--format", "json"], expect=(2,))
    run(["probe", "--repeats", "0", "--format", "json"], expect=(2,))

    held = len(failures) == 0
    # The schemas catch a change (each edit must fail its schema).
    results, base, check = load("P/results.json"), load("P/baseline.json"), None
    edits = []
    r = copy.deepcopy(results)
    r["observations"][0]["fingerprints"][0] = r["observations"][0]["fingerprints"][0][:30]
    edits.append(("results", r, "a fingerprint of 30 hex digits"))
    r = copy.deepcopy(results)
    r["observations"][0]["verdcit"] = "PASS"
    edits.append(("results", r, "an unknown observation field"))
    r = copy.deepcopy(results)
    r["observations"][0]["verdict"] = "MAYBE"
    edits.append(("results", r, "a verdict no detaudit gives"))
    b = copy.deepcopy(base)
    b["entries"][0]["err_ratio"] = -3
    edits.append(("baseline", b, "a negative error ratio"))
    q = load("Q/qualify.json")
    q["counts"] = {k.upper(): v for k, v in q["counts"].items()}
    edits.append(("qualify", q, "counts in upper case (detaudit-qualify/1)"))
    ref = load("F/reference.json")
    ref["cells"][0]["nodes"] = 1
    edits.append(("reference", ref, "known-good bits of one node"))
    if health:
        h = copy.deepcopy(health)
        h["status"] = "FAIL"
        edits.append(("healthcheck", h, "a FAIL without a finding"))
        h = copy.deepcopy(health)
        h["findings"] = [{"kind": "bits", "action": "PANIC", "workload": "w", "target": "t", "reference": "a",
                          "here": "b", "line": "x", "logical_cpu": 0, "core": 0, "package": 0}]
        edits.append(("healthcheck", h, "an action no finding has"))
    c = {"schema": "detaudit-cli/1", "command": "check", "exit_code": 2, "reports": {}}
    edits.append(("cli", c, "exit 2 without its error"))
    for kind, doc, what in edits:
        if schemas[kind].is_valid(doc):
            failures.append(f"{kind}.schema.json accepts {what}: it would not catch that change")

    shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    print(f"validate_schemas: {len(checked)} documents against {len(schemas)} schemas; "
          f"{len(edits)} edited documents refused: {'held' if held and not failures else 'FAILED'}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
