#!/usr/bin/env python3
"""The paper's fission study on our peer: onnxruntime latency of the original model vs of the
primitive graph written by `korch fission` (PRIM.onnx), same session options, side by side in
one run.

    .venv/bin/python bench/fission_study.py [MODEL ...] [--runs 20] [--threads 2] [--out bench/results/fission_study.md]

For each model: both sessions are created with all graph optimizations on (ORT_ENABLE_ALL) and
`--threads` intra-op threads, warmed up, then timed alternately (original, primitive, original,
...) so machine noise hits both equally; medians and the interquartile range are reported. The
paper reports that fission alone gave TensorRT 1.24x on Segformer; this records what it gives
onnxruntime on this CPU, whatever it is.
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import export_models  # noqa: E402

PAPER = ["candy", "segformer_b0", "efficientvit_b0", "yolox_nano", "yolov4"]


def session(path, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=PAPER)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--korch", default=str(REPO / "build" / "korch"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "fission_study.md"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            model = export_models.export(name)
            prim = Path(tmp) / f"{name}_prim.onnx"
            r = subprocess.run([args.korch, "fission", str(model), "-o", str(prim)], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: korch fission failed: {r.stderr.strip()}")
                continue
            counts = r.stdout.splitlines()[0].replace("fission", "").strip()
            s_orig, s_prim = session(model, args.threads), session(prim, args.threads)
            rng = np.random.default_rng(0)
            feeds = {i.name: rng.uniform(-1, 1, i.shape).astype(np.float32) for i in s_orig.get_inputs()}
            for _ in range(3):
                s_orig.run(None, feeds)
                s_prim.run(None, feeds)
            t_orig, t_prim = [], []
            for _ in range(args.runs):
                for s, acc in ((s_orig, t_orig), (s_prim, t_prim)):
                    t0 = time.perf_counter()
                    s.run(None, feeds)
                    acc.append((time.perf_counter() - t0) * 1e3)
            mo, mp = np.median(t_orig), np.median(t_prim)
            iqr = lambda t: np.percentile(t, 75) - np.percentile(t, 25)  # noqa: E731
            rows.append((name, counts, mo, iqr(t_orig), mp, iqr(t_prim), mo / mp))
            print(f"{name:20s} original {mo:8.2f} ms (IQR {iqr(t_orig):.2f})  primitive {mp:8.2f} ms "
                  f"(IQR {iqr(t_prim):.2f})  speedup {mo / mp:.2f}x   [{counts}]", flush=True)
    cpu = subprocess.run(["sh", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    with open(args.out, "w") as f:
        f.write("# Fission study: onnxruntime on the original model vs on Korch's primitive graph\n\n")
        f.write(f"Command: `.venv/bin/python bench/fission_study.py {' '.join(args.models)} --runs {args.runs} "
                f"--threads {args.threads}`  \n")
        f.write(f"Date: {datetime.date.today()}; machine: {cpu}, {os.cpu_count()} cores; onnxruntime ORT_ENABLE_ALL, "
                f"{args.threads} threads, batch 1, fp32; medians of {args.runs} alternating runs after 3 warm-ups.\n\n")
        f.write("| model | fission (operators -> primitives) | original ms (IQR) | primitive ms (IQR) | original/primitive |\n")
        f.write("|---|---|---|---|---|\n")
        for n, c, mo, io, mp, ip, sp in rows:
            f.write(f"| {n} | {c} | {mo:.2f} ({io:.2f}) | {mp:.2f} ({ip:.2f}) | {sp:.2f}x |\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
