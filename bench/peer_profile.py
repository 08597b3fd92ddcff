#!/usr/bin/env python3
"""Where each system spends a run, by operator class: Korch's kernels (`korch bench --per-kernel`, one
clock read between kernels), OpenVINO's executed layers (its PERF_COUNT profile) and ONNX Runtime's
nodes (its profiler), on the same model, threads and fp32 settings as bench/peer_latency.py.

    .venv/bin/python bench/peer_profile.py --models regnet_y_400mf,swin_t [--runs 30] [--out F.md]
        [--artifacts DIR]   (Korch artifacts DIR/MODEL, compiled there when absent)

Classes: conv (Conv and what is fused into it), matmul (MatMul/Gemm/FullyConnected and fused
epilogues), layout (Transpose/Reshape/Concat/Slice/reorders: data movement only), reduce (kernels
with a reduction: norms, softmax, pooling, means), elementwise (the rest). Each system fuses
differently, so a class holds what that system ran in it (Korch's Conv+Add+Relu kernel is conv;
OpenVINO's Convolution with its fused Eltwise is conv too; an unfused Add is elementwise). A
profile's per-layer times add to about its whole run (each line says the sum and the run's median,
both with the profiler on: OpenVINO's and ONNX Runtime's profilers cost a little per layer).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "scripts"))
import bench_common  # noqa: E402
import peer_latency  # noqa: E402

CLASSES = ["conv", "matmul", "layout", "reduce", "elementwise"]
LINEAR = {"Conv": "conv", "ConvTranspose": "conv", "MatMul": "matmul", "Gemm": "matmul"}
LAYOUT = {"Transpose", "Reshape", "Concat", "Slice", "Split", "Gather", "Pad", "Flatten", "Squeeze", "Unsqueeze",
          "Expand", "Identity", "Reorder", "ReorderInput", "ReorderOutput", "Tile", "Roll", "ShuffleChannels",
          "StridedSlice", "Broadcast", "DepthToSpace", "SpaceToDepth", "ShapeOf", "Convert"}
REDUCE = {"MVN", "Softmax", "SoftMax", "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "MaxPool",
          "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Pooling", "NormalizeL2", "ReduceL2",
          "BatchNormalization", "InstanceNormalization", "SkipLayerNormalization", "LogSoftmax"}


def peer_class(op):
    """The class of one peer layer or node, by its operator type."""
    if op in ("Convolution", "GroupConvolution", "Deconvolution", "Conv", "FusedConv", "NchwcConv", "ConvTranspose"):
        return "conv"
    if op in ("MatMul", "FullyConnected", "Gemm", "FusedMatMul", "FusedGemm", "MatMulNBits"):
        return "matmul"
    if op in LAYOUT:
        return "layout"
    if op in REDUCE or op.startswith("Reduce") or "Pool" in op:
        return "reduce"
    return "elementwise"


def korch_class(primitives):
    """The class of one Korch kernel, by the primitives it computes (plan.json)."""
    for p in primitives:
        if p["kind"] == "linear":
            return LINEAR.get(p["op_type"], "matmul")
    kinds = {p["kind"] for p in primitives}
    if "reduce" in kinds:
        return "reduce"
    if kinds <= {"layout", "broadcast"}:
        return "layout"
    return "elementwise"


def korch_profile(korch, model, art, runs):
    if not (Path(art) / "plan.json").exists():
        bench_common.run([korch, "compile", model, "-o", art, "-q"], os.environ.copy())
    with tempfile.TemporaryDirectory() as d:
        out = f"{d}/b.json"
        bench_common.run([korch, "bench", "--artifact", art, "--peers", "none", "--no-unfused", "--rounds", "1",
                          "--runs", runs, "--per-kernel", "100000", "--json", out], os.environ.copy())
        j = json.loads(Path(out).read_text())
    plan = json.loads((Path(art) / "plan.json").read_text())["kernels"]
    by = defaultdict(lambda: [0.0, 0])
    for k in j["kernels"]:
        c = korch_class(plan[k["step"]]["primitives"]) if k["step"] < len(plan) else "elementwise"
        by[c][0] += k["median_ms"]
        by[c][1] += 1
    whole = j["korch"]["median_ms"] if "korch" in j else float("nan")
    return by, whole


def openvino_profile(model, threads, runs):
    req, feeds, _ = peer_latency.openvino_request(model, threads, np.random.default_rng(0), None,
                                                  {"PERF_COUNT": True})
    by = defaultdict(lambda: [0.0, 0])
    per_run = []
    for i in range(runs + 3):
        req.infer(feeds)
        if i < 3:
            continue
        one = defaultdict(float)
        for p in req.get_profiling_info():
            if str(p.status).endswith("EXECUTED") and "NOT" not in str(p.status):
                one[(p.node_name, p.node_type)] += p.real_time.total_seconds() * 1e3
        per_run.append(one)
    for key in per_run[0]:
        c = peer_class(key[1])
        by[c][0] += statistics.median(r.get(key, 0.0) for r in per_run)
        by[c][1] += 1
    return by, statistics.median(bench_common.timed_samples(lambda: req.infer(feeds), 3, runs))


def onnxruntime_profile(model, threads, runs):
    with tempfile.TemporaryDirectory() as d:
        sess, x, _ = peer_latency.onnxruntime_session(model, threads, np.random.default_rng(0), None,
                                                     profile_prefix=f"{d}/ort")
        whole = statistics.median(bench_common.timed_samples(lambda: sess.run(None, x), 3, runs))
        path = sess.end_profiling()
        events = json.loads(Path(path).read_text())
    times = defaultdict(list)
    op_of = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[e["name"]].append(e["dur"] / 1e3)
            op_of[e["name"]] = e.get("args", {}).get("op_name", "?")
    by = defaultdict(lambda: [0.0, 0])
    for name, ts in times.items():
        c = peer_class(op_of[name])
        by[c][0] += statistics.median(ts[3:] if len(ts) > 3 else ts)
        by[c][1] += 1
    return by, whole


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--artifacts", default=None, help="Folder of Korch artifacts (DIR/MODEL), compiled when absent")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    korch = ROOT / "build" / "korch"
    art_root = a.artifacts or tempfile.mkdtemp(prefix="korch-profile-")
    lines = [f"Command: `.venv/bin/python bench/peer_profile.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {bench_common.cpu_name()}, {os.cpu_count()} cores; {a.threads} threads, fp32, batch 1.  ",
             "ms per run by class: the per-layer medians over the runs summed, (layers or kernels run); "
             "whole = the median whole run with the profiler on.", ""]
    for m in a.models.split(","):
        model = str(ROOT / ".cache" / "models" / f"{m}.onnx")
        k, kw = korch_profile(korch, model, f"{art_root}/{m}", a.runs)
        o, ow = openvino_profile(model, a.threads, a.runs)
        r, rw = onnxruntime_profile(model, a.threads, a.runs)
        lines += [f"### {m}", "", "| class | korch ms | openvino ms | onnxruntime ms |", "|---|---|---|---|"]
        for c in CLASSES:
            cell = lambda by: f"{by[c][0]:.3f} ({by[c][1]})" if by[c][1] else "-"
            lines.append(f"| {c} | {cell(k)} | {cell(o)} | {cell(r)} |")
        tot = lambda by: sum(v[0] for v in by.values())
        lines.append(f"| sum | {tot(k):.3f} | {tot(o):.3f} | {tot(r):.3f} |")
        lines.append(f"| whole | {kw:.3f} | {ow:.3f} | {rw:.3f} |")
        lines.append("")
        print("\n".join(lines[-10:]), flush=True)
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
