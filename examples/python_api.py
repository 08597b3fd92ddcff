"""The Python API on one ONNX model: compile for this CPU, run, check against onnxruntime, save, load.

    .venv/bin/python examples/python_api.py MODEL.onnx [--cost measured|analytic] [--out DIR]

The main job (scripts/main_job.sh) runs it on an exported torchvision ResNet-18.
"""
import argparse
import sys
import time

import numpy as np
import onnxruntime as ort

import korch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--cost", choices=["measured", "analytic"], default=None)
    ap.add_argument("--out", default=None, help="keep the artifact in this folder")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    t0 = time.perf_counter()
    try:
        exe = korch.compile(args.model, cost=args.cost, threads=args.threads, output=args.out)
    except korch.Error as e:
        print(f"korch.Error: {e}", file=sys.stderr)
        return 2
    s = exe.summary
    print(f"korch.compile: {s['kernels']} kernels for {s['primitives']} primitives in {time.perf_counter() - t0:.1f} s; "
          f"predicted {s['predicted_seconds'] * 1e3:.2f} ms"
          + (f", measured {s['measured_seconds'] * 1e3:.2f} ms in the model" if s["measured_seconds"] else "")
          + f"; solver {s['solver_status']} (gap {100 * s['gap']:.3g}%)")
    print("inputs: ", exe.inputs)
    print("outputs:", exe.outputs)

    rng = np.random.default_rng(7)
    feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in exe.inputs}
    got = exe.run(feed)
    # Timed before onnxruntime starts: its idle thread pool would compete for the same cores.
    runs = []
    for _ in range(20):
        t = time.perf_counter()
        exe.run(feed)
        runs.append(time.perf_counter() - t)
    print(f"Executable.run: median {np.median(runs) * 1e3:.2f} ms over 20 runs (korch bench compares with the peers)")
    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    worst = 0.0
    for name, w in want.items():
        w64, g64 = w.astype(np.float64), got[name].astype(np.float64)
        if np.std(w64) <= 1e-6:
            print(f"{name}: onnxruntime's output is degenerate (constant); the comparison would be vacuous")
            return 1
        err = float(np.linalg.norm(g64 - w64) / max(np.linalg.norm(w64), 1e-30))
        worst = max(worst, err)
        print(f"{name}: relative L2 to onnxruntime {err:.2e}")
    if worst > 1e-4:
        print(f"FAIL: {worst:.2e} above 1e-4")
        return 1

    if args.out:
        again = korch.load(args.out, threads=args.threads)
        same = all(np.array_equal(again.run(feed)[k], got[k]) for k in got)
        print(f"korch.load({args.out!r}): {'same outputs' if same else 'DIFFERENT outputs'}")
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
