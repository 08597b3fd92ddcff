#!/usr/bin/env python3
"""What flushing denormals costs a run that has none: one Relu over 16 floats compiled with
--denormals keep and flush (analytic costs), each run 5000 times per round in alternating rounds
through the Python API; prints microseconds per run, each round's.

    .venv/bin/python bench/denormals_overhead.py
"""
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import korch


def main():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/relu16.onnx"
        onnx.save(m, path)
        exes = {mode: korch.compile(path, cost="analytic", denormals=mode) for mode in ("keep", "flush")}
        feeds = {"x": np.ones(16, np.float32)}
        for e in exes.values():
            for _ in range(2000):
                e.run(feeds)
        rounds = {mode: [] for mode in exes}
        for _ in range(5):
            for mode, e in exes.items():
                t = time.perf_counter()
                for _ in range(5000):
                    e.run(feeds)
                rounds[mode].append((time.perf_counter() - t) / 5000 * 1e6)
        for mode, us in rounds.items():
            print(f"--denormals {mode}: {sorted(us)[2]:.2f} us a run (rounds: {', '.join(f'{u:.2f}' for u in us)})")


if __name__ == "__main__":
    main()
