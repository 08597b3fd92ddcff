"""Latency of one model in a peer runtime, for `korch bench` (it runs this next to Korch in the same run).

  python bench/peer_latency.py MODEL.onnx --peer onnxruntime|openvino --threads 2 --warmup 5 --runs 30 [--seed 0]
                                [--feeds FEEDS.json]

onnxruntime: all graph optimisations (ORT_ENABLE_ALL), intra-op threads = --threads, inter-op 1,
sequential execution, CPUExecutionProvider.
openvino: Core().compile_model(MODEL, "CPU") with PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS =
--threads, INFERENCE_PRECISION_HINT=f32 (no bf16/fp16 down-conversion), one stream; the model is
read from the ONNX file directly (when its ONNX frontend rejects a Dropout, from a copy with the
identity Dropouts as Identity, said in the version).
Both: fp32. --feeds (what `korch bench` passes): a JSON object naming the .npy file of each input,
the very arrays Korch runs (so the shapes it was compiled for) plus the values --bind gave; an
input it does not name is an error. Without --feeds: inputs U(-1, 1) floats / [0, 10) integers /
{0, 1} booleans like Korch's --random-inputs, dynamic dims as 1. Prints one JSON line: {"peer", "version", "median_ms", "p10_ms",
"p90_ms", "runs", "samples_ms"}. Exits 3 with one line when the peer is not installed.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_samples  # noqa: E402

TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
         "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def random_feed(rng, name, type_name, shape):
    t = TYPES.get(type_name)
    if t is None:
        sys.exit(f"input {name}: type {type_name} not supported by this script")
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in shape]
    if t in (np.float32, np.float64):
        return rng.uniform(-1, 1, shape).astype(t)
    if t is np.bool_:
        return rng.integers(0, 2, shape).astype(t)
    return rng.integers(0, 10, shape).astype(t)


def make_feeds(rng, feeds, inputs):
    """{name: array} for inputs [(name, type name, shape)]: from the --feeds files, else random."""
    if feeds is None:
        return {n: random_feed(rng, n, t, s) for n, t, s in inputs}
    out = {}
    for n, _, _ in inputs:
        if n not in feeds:
            sys.exit(f"input '{n}' has no value in --feeds: an input bound when the artifact was compiled "
                     f"needs korch bench --bind {n}=FILE.npy too")
        out[n] = np.load(feeds[n])
    return out


def onnxruntime_session(model, threads, rng, feeds, profile_prefix=None):
    """(session, feeds, version) as the peer runs; profile_prefix: its profiler on, writing there."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    x = make_feeds(rng, feeds, [(i.name, i.type, i.shape) for i in sess.get_inputs()])
    return sess, x, ort.__version__


def onnxruntime_runner(model, threads, rng, feeds):
    sess, x, version = onnxruntime_session(model, threads, rng, feeds)
    return (lambda: sess.run(None, x)), version


def identity_dropouts_as_identity(m):
    """Dropouts of ONNX model `m` (a ModelProto, changed in place) that are identities (no
    training_mode input, or a constant false one, or a constant ratio of 0; the mask output unread)
    become Identity. Returns how many. OpenVINO's ONNX frontend rejects a training_mode of true even
    with a ratio of 0 (torchvision's swin_t as exported: "Conversion is failed for: Dropout-17",
    "Training mode is not supported"); ONNX Runtime and Korch run them, as the identity they are."""
    from onnx import numpy_helper
    consts = {}
    for n in m.graph.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    for t in m.graph.initializer:
        consts[t.name] = numpy_helper.to_array(t)
    read = {i for n in m.graph.node for i in n.input} | {o.name for o in m.graph.output}
    changed = 0
    for n in m.graph.node:
        if n.op_type != "Dropout" or (len(n.output) > 1 and n.output[1] and n.output[1] in read):
            continue
        def const(i):  # the constant value of input i, None when absent, "?" when not a constant
            if len(n.input) <= i or not n.input[i]:
                return None
            return np.asarray(consts[n.input[i]]).reshape(-1)[0] if n.input[i] in consts else "?"
        ratio, training = const(1), const(2)
        zero_ratio = ratio is not None and not isinstance(ratio, str) and float(ratio) == 0.0
        inference = training is None or (not isinstance(training, str) and not bool(training))
        if not (zero_ratio or inference):
            continue
        data = n.input[0]
        out = n.output[0]
        del n.input[:]
        del n.output[:]
        del n.attribute[:]
        n.op_type = "Identity"
        n.input.append(data)
        n.output.append(out)
        changed += 1
    return changed


def openvino_request(model, threads, rng, feeds_given, extra_config=None):
    """(infer request, feeds by port, version) as the peer runs; extra_config adds to its configuration
    (PERF_COUNT for a profile)."""
    import openvino as ov
    # Input names and types from the ONNX file itself, so both peers get the same feeds.
    import onnx
    m = onnx.load(model, load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    names = {1: "tensor(float)", 11: "tensor(double)", 7: "tensor(int64)", 6: "tensor(int32)", 9: "tensor(bool)"}
    ins = []
    for i in m.graph.input:
        if i.name in init:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        ins.append((i.name, names.get(tt.elem_type, str(tt.elem_type)), shape))
    feeds = make_feeds(rng, feeds_given, ins)
    core = ov.Core()
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
              "NUM_STREAMS": 1, **(extra_config or {})}
    note = ""
    try:
        compiled = core.compile_model(model, "CPU", config)
    except RuntimeError as e:
        # Its ONNX frontend rejects Dropouts that ONNX Runtime and Korch run: give it the same model
        # with those inference no-ops as Identity (said in the version note), else fail as before.
        if "Dropout" not in str(e):
            raise
        import tempfile
        full = onnx.load(model)
        changed = identity_dropouts_as_identity(full)
        if not changed:
            raise
        with tempfile.TemporaryDirectory() as d:
            path = f"{d}/model.onnx"
            onnx.save(full, path)
            compiled = core.compile_model(path, "CPU", config)
        note = f" (its {changed} Dropouts that are identities run as Identity)"
    req = compiled.create_infer_request()
    by_port = {}
    for port in compiled.inputs:
        hit = [n for n in port.get_names() if n in feeds]
        if not hit:
            sys.exit(f"openvino input {port.get_any_name()} has no ONNX input of that name")
        by_port[port] = feeds[hit[0]]
    return req, by_port, ov.__version__.split("-")[0] + note


def openvino_runner(model, threads, rng, feeds_given):
    req, by_port, version = openvino_request(model, threads, rng, feeds_given)
    return (lambda: req.infer(by_port)), version


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--peer", default="onnxruntime", choices=["onnxruntime", "openvino"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--feeds", default=None, help="JSON object: input name -> .npy file")
    a = ap.parse_args()
    feeds = None
    if a.feeds:
        with open(a.feeds) as f:
            feeds = json.load(f)
    rng = np.random.default_rng(a.seed)
    try:
        run, version = {"onnxruntime": onnxruntime_runner, "openvino": openvino_runner}[a.peer](a.model, a.threads, rng, feeds)
    except ModuleNotFoundError as e:
        print(f"{a.peer} is not installed for {sys.executable} ({e})")
        sys.exit(3)
    times = sorted(timed_samples(run, a.warmup, a.runs))
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
    print(json.dumps({"peer": a.peer, "version": version, "median_ms": statistics.median(times), "p10_ms": q(0.1),
                      "p90_ms": q(0.9), "runs": len(times), "samples_ms": times}))


if __name__ == "__main__":
    main()
