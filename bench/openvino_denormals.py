#!/usr/bin/env python3
"""OpenVINO on one ONNX model with its CPU_DENORMALS_OPTIMIZATION (FTZ/DAZ) off (its default) and on,
configured otherwise as bench/peer_latency.py does (latency hint, 2 threads, f32, one stream), in 5
alternating rounds of 20 runs after warm-up; prints each configuration's round medians (ms).

    .venv/bin/python bench/openvino_denormals.py .cache/models/swin_t.onnx
"""
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import openvino as ov

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_latency  # noqa: E402


def main():
    full = onnx.load(sys.argv[1])
    peer_latency.identity_dropouts_as_identity(full)  # as peer_latency gives it to OpenVINO
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/model.onnx"
        onnx.save(full, path)
        core = ov.Core()
        base = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                "NUM_STREAMS": 1}
        requests = {}
        for name, extra in (("default", {}), ("denormals_optimization", {"CPU_DENORMALS_OPTIMIZATION": True})):
            compiled = core.compile_model(path, "CPU", {**base, **extra})
            x = np.random.default_rng(0).standard_normal(tuple(compiled.inputs[0].shape)).astype(np.float32)
            req, feeds = compiled.create_infer_request(), {compiled.inputs[0]: x}
            for _ in range(3):
                req.infer(feeds)
            requests[name] = (req, feeds)
        rounds = {name: [] for name in requests}
        for _ in range(5):
            for name, (req, feeds) in requests.items():
                times = []
                for _ in range(20):
                    t = time.perf_counter()
                    req.infer(feeds)
                    times.append(time.perf_counter() - t)
                rounds[name].append(statistics.median(times) * 1e3)
    for name, ms in rounds.items():
        print(f"openvino {name}: median {statistics.median(ms):.2f} ms (rounds: {', '.join(f'{m:.2f}' for m in ms)})")


if __name__ == "__main__":
    main()
