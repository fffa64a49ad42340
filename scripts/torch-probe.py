#!/usr/bin/env python3
"""Run the workloads of a `detaudit export` directory through PyTorch and write the outputs for
`detaudit import DIR --name NAME`.

    scripts/torch-probe.py DIR [--device cpu|cuda] [--repeats N] [--deterministic] [--benchmark] [--threads N]

Per workload of DIR/manifest.json it loads the exported inputs as they are, runs the op as a PyTorch user
would (torch.matmul, torch.nn.functional.conv2d and its backward passes through autograd, torch.sum,
torch.dot, torch.linalg.norm, torch.softmax, max_pool2d and its backward), once untimed and then N
times, and writes repeat r's output to <id>.out.<r>.npy (batchinv: also <id>.rows.npy, the sampled rows
computed alone) and DIR/producer.json (what ran, and the seconds of each repeat). Outputs of an earlier
run of the same workloads are removed first.

--deterministic calls torch.use_deterministic_algorithms(True) (on CUDA with CUBLAS_WORKSPACE_CONFIG
set as cuBLAS requires); --benchmark sets torch.backends.cudnn.benchmark = True. Import each setting
under a name of its own, e.g. torch-cpu and torch-cpu-det.

A workload the manifest describes in a way this script does not know (another op, pass or key, another
manifest schema) is refused with exit 2 and one line, rather than guessed. Needs numpy and torch only.
"""
import argparse
import json
import os
import sys
import time

SCHEMA = "detaudit-export/1"
# The spec keys of each op this script maps; any other key could change what the op means.
KNOWN_KEYS = {
    "matmul": {"m", "n", "k", "ta", "tb", "dtype", "dist", "seed"},
    "batchinv": {"m", "n", "k", "rows", "dist", "seed"},
    "conv2d": {"n", "c", "h", "w", "k", "r", "s", "stride", "pad", "pass", "dist", "seed"},
    "reduce": {"op", "n", "cols", "dist", "seed"},
    "maxpool": {"n", "c", "h", "w", "window", "stride", "pass", "dist", "seed"},
}


class Refusal(Exception):
    """Something this script will not run: printed as one line, exit 2."""


def load_manifest(d):
    path = os.path.join(d, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except OSError as e:
        raise Refusal(f"{path}: cannot open: {e.strerror}")
    except ValueError as e:
        raise Refusal(f"{path}: not valid JSON: {e}")
    if not isinstance(m, dict) or m.get("schema") != SCHEMA:
        raise Refusal(f"{path}: not a detaudit export manifest (expected \"schema\": \"{SCHEMA}\")")
    if not isinstance(m.get("workloads"), list) or not m["workloads"]:
        raise Refusal(f"{path}: \"workloads\" must be a non-empty list")
    return m


def check_mappable(w):
    op, params = w.get("op"), w.get("params", {})
    where = f"workload {w.get('spec')}"
    if op not in KNOWN_KEYS:
        raise Refusal(f"{where}: op '{op}' has no PyTorch mapping in this script; refusing rather than guessing")
    extra = set(params) - KNOWN_KEYS[op]
    if extra:
        raise Refusal(f"{where}: unknown key(s) {sorted(extra)} for {op}; refusing rather than guessing what they mean")
    if op == "conv2d" and params.get("pass") not in ("fwd", "bwd_data", "bwd_filter"):
        raise Refusal(f"{where}: conv2d pass '{params.get('pass')}' has no PyTorch mapping in this script")
    if op == "maxpool" and params.get("pass") not in ("fwd", "bwd"):
        raise Refusal(f"{where}: maxpool pass '{params.get('pass')}' has no PyTorch mapping in this script")
    if op == "reduce" and params.get("op") not in ("sum", "dot", "norm", "softmax"):
        raise Refusal(f"{where}: reduce op '{params.get('op')}' has no PyTorch mapping in this script")
    if op == "matmul" and params.get("dtype") not in ("f32", "f64"):
        raise Refusal(f"{where}: matmul dtype '{params.get('dtype')}' has no PyTorch mapping in this script")


def load_inputs(d, w, np, torch, device):
    """The exported arrays by name, as tensors on the device, checked against the manifest."""
    out = {}
    for a in w["inputs"]:
        path = os.path.join(d, a["file"])
        try:
            x = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise Refusal(f"{path}: cannot load: {e}")
        if x.dtype.str != a["dtype"] or list(x.shape) != a["shape"] or not x.flags["C_CONTIGUOUS"]:
            raise Refusal(f"{path}: {x.dtype.str} {list(x.shape)}, the manifest says {a['dtype']} {a['shape']}")
        out[a["name"]] = torch.from_numpy(x).to(device)
    return out


def make_op(w, t, torch):
    """A function of no arguments that runs the workload once and returns its output tensor."""
    F = torch.nn.functional
    op, p = w["op"], w["params"]
    i = lambda k: int(p[k])
    if op in ("matmul", "batchinv"):
        a = t["a"].t() if p.get("ta") == "t" else t["a"]
        b = t["b"].t() if p.get("tb") == "t" else t["b"]
        return lambda: torch.matmul(a, b)
    if op == "conv2d":
        stride, pad = i("stride"), i("pad")
        if p["pass"] == "fwd":
            return lambda: F.conv2d(t["x"], t["w"], stride=stride, padding=pad)
        if p["pass"] == "bwd_data":
            # What training runs: autograd's convolution backward with only the input's gradient asked for.
            # dx does not depend on x's values, which the export does not carry: zeros of its shape.
            x0 = torch.zeros((i("n"), i("c"), i("h"), i("w")), dtype=t["w"].dtype, device=t["w"].device)

            def bwd_data():
                x = x0.clone().requires_grad_(True)
                F.conv2d(x, t["w"], stride=stride, padding=pad).backward(t["dy"])
                return x.grad
            return bwd_data
        w0 = torch.zeros((i("k"), i("c"), i("r"), i("s")), dtype=t["x"].dtype, device=t["x"].device)

        def bwd_filter():
            wt = w0.clone().requires_grad_(True)
            F.conv2d(t["x"], wt, stride=stride, padding=pad).backward(t["dy"])
            return wt.grad
        return bwd_filter
    if op == "reduce":
        r = p["op"]
        if r == "sum":
            return lambda: torch.sum(t["x"])
        if r == "dot":
            return lambda: torch.dot(t["x"], t["y"])
        if r == "norm":
            return lambda: torch.linalg.norm(t["x"])
        return lambda: torch.softmax(t["x"], dim=-1)
    window, stride = i("window"), i("stride")
    if p["pass"] == "fwd":
        return lambda: F.max_pool2d(t["x"], window, stride)

    def pool_bwd():
        x = t["x"].clone().requires_grad_(True)
        F.max_pool2d(x, window, stride).backward(t["dy"])
        return x.grad
    return pool_bwd


def save(np, path, array):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        # Not np.ascontiguousarray: it makes a 0-dimensional array (a sum) one-dimensional.
        np.save(f, np.require(array, requirements="C"), allow_pickle=False)
    os.replace(tmp, path)


def run_workload(d, w, args, np, torch):
    t = load_inputs(d, w, np, torch, args.device)
    run = make_op(w, t, torch)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    oid = w["id"]
    for f in os.listdir(d):
        if f.startswith(oid + ".out.") or f == oid + ".rows.npy":
            os.remove(os.path.join(d, f))
    want = (w["output"]["dtype"], w["output"]["shape"])
    run()  # untimed warm-up: one-time setup (cudnn.benchmark's search, thread pools) stays out of the repeats
    sync()
    seconds = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        y = run()
        sync()
        seconds.append(time.perf_counter() - t0)
        a = y.detach().cpu().numpy()
        if (a.dtype.str, list(a.shape)) != want:
            raise Refusal(f"workload {w['spec']}: PyTorch gave {a.dtype.str} {list(a.shape)}, the manifest expects "
                          f"{want[0]} {want[1]}")
        save(np, os.path.join(d, w["output"]["file_pattern"].replace("{r}", str(r))), a)
    if "rows_output" in w:
        # Batch invariance: each sampled row of A alone (1 x k) times B, after the full product.
        rows = [torch.matmul(t["a"][i:i + 1], t["b"]) for i in w["rows_output"]["row_indices"]]
        sync()
        save(np, os.path.join(d, w["rows_output"]["file"]), torch.cat(rows).detach().cpu().numpy())
    return seconds


def producer(args, torch):
    det = "on" if args.deterministic else "off"
    details = {"framework": "torch", "torch_version": torch.__version__, "device": args.device,
               "deterministic_algorithms": det, "threads": str(torch.get_num_threads()),
               "mkldnn": str(torch.backends.mkldnn.is_available()).lower()}
    where = f"{args.device}, {torch.get_num_threads()} threads"
    if args.device == "cuda":
        details.update({"gpu": torch.cuda.get_device_name(0), "cuda": str(torch.version.cuda),
                        "cudnn": str(torch.backends.cudnn.version()),
                        "cudnn_benchmark": "on" if args.benchmark else "off"})
        where = f"{details['gpu']}, CUDA {details['cuda']}, cuDNN {details['cudnn']}, benchmark {details['cudnn_benchmark']}"
    return {"describe": f"PyTorch {torch.__version__} ({where}), use_deterministic_algorithms {det}",
            "details": details}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory written by `detaudit export`")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per workload (default 5)")
    ap.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    ap.add_argument("--benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: PyTorch's own)")
    args = ap.parse_args()
    try:
        if not 1 <= args.repeats <= 100000:
            raise Refusal("--repeats must be in 1..100000")
        m = load_manifest(args.dir)
        for w in m["workloads"]:
            check_mappable(w)
        if args.deterministic and args.device == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts: cuBLAS needs it
        try:
            import numpy as np
            import torch
        except ImportError as e:
            raise Refusal(f"needs numpy and torch: {e}")
        if args.device == "cuda" and not torch.cuda.is_available():
            raise Refusal("--device cuda: torch.cuda.is_available() is False")
        if args.threads > 0:
            torch.set_num_threads(args.threads)
        torch.use_deterministic_algorithms(args.deterministic)
        torch.backends.cudnn.benchmark = args.benchmark
        info = producer(args, torch)
        info["seconds"] = {}
        for w in m["workloads"]:
            info["seconds"][w["id"]] = run_workload(args.dir, w, args, np, torch)
            print(f"[torch-probe] {w['spec']}: {args.repeats} outputs", file=sys.stderr)
        with open(os.path.join(args.dir, "producer.json.tmp"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=1)
        os.replace(os.path.join(args.dir, "producer.json.tmp"), os.path.join(args.dir, "producer.json"))
    except Refusal as e:
        print(f"torch-probe.py: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a PyTorch error (a deterministic mode an op lacks, CUDA): one line
        print(f"torch-probe.py: error: PyTorch: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    print(f"{len(m['workloads'])} workloads run through PyTorch; import with: detaudit import {args.dir} --name NAME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
