"""onnxruntime latency of one model, for `korch bench` (it runs this next to Korch in the same run).

  python bench/ort_latency.py MODEL.onnx --threads 2 --warmup 5 --runs 30 [--seed 0]

All graph optimisations on (ORT_ENABLE_ALL), intra-op threads = --threads, inter-op 1, sequential
execution; inputs U(-1, 1) floats / [0, 10) integers like Korch's --random-inputs. Prints one JSON
line: {"median_ms", "p10_ms", "p90_ms", "runs", "samples_ms", "ort_version"}.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(a.seed)
    types = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        t = types.get(i.type)
        if t is None:
            sys.exit(f"input {i.name}: type {i.type} not supported by this script")
        if t in (np.float32, np.float64):
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(t)
        elif t is np.bool_:
            feeds[i.name] = rng.integers(0, 2, shape).astype(t)
        else:
            feeds[i.name] = rng.integers(0, 10, shape).astype(t)
    for _ in range(a.warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
    print(json.dumps({"median_ms": statistics.median(times), "p10_ms": q(0.1), "p90_ms": q(0.9),
                      "runs": len(times), "samples_ms": times, "ort_version": ort.__version__}))


if __name__ == "__main__":
    main()
