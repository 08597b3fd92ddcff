#!/usr/bin/env python3
"""The first run after an idle gap against back-to-back runs: Korch's artifact, onnxruntime and
OpenVINO in one process, each after the same sleep, in turn. Question it answers: do Korch's
OpenMP workers, asleep after the gap, cost its first run more than the peers' thread pools cost
theirs? (bench/results/omp_wait_policy.md)

    .venv/bin/python bench/idle_latency.py --model .cache/models/mobilenet_v2.onnx --artifact A [--gap 0.2 --rounds 15]

Per round and system: sleep --gap seconds, time one run, then ten back to back (their median);
medians over the rounds. Korch's inputs are random (seeded); the peers' come from peer_latency.py's
random feeds for the same input names and shapes.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "build" / "python"))
from bench_common import timed_samples  # noqa: E402
from peer_latency import onnxruntime_runner, openvino_runner  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--gap", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import korch
    exe = korch.load(a.artifact, threads=a.threads)
    rng = np.random.default_rng(0)
    x = {i.name: rng.standard_normal(tuple(i.shape)).astype(np.float32) for i in exe.inputs}
    runs = {"korch": lambda: exe.run(x)}
    runs["onnxruntime"] = onnxruntime_runner(a.model, a.threads, rng, None)[0]
    runs["openvino"] = openvino_runner(a.model, a.threads, rng, None)[0]
    for run in runs.values():
        timed_samples(run, 20, 0)
    first = {k: [] for k in runs}
    steady = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, run in runs.items():
            time.sleep(a.gap)
            first[k] += timed_samples(run, 0, 1)
            steady[k].append(statistics.median(timed_samples(run, 0, 10)))
    print(f"{Path(a.model).name}, {a.threads} threads, gap {a.gap} s, {a.rounds} rounds (ms, medians):")
    for k in runs:
        f, s = statistics.median(first[k]), statistics.median(steady[k])
        print(f"  {k:12s} back to back {s:8.3f}   first after the gap {f:8.3f}   ({f / s:.2f}x)")


if __name__ == "__main__":
    main()
