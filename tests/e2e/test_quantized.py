"""Quantized models (issue 16): onnxruntime.quantization's output through Korch against onnxruntime.

A small float model (Conv + Relu + MatMul, seeded weights) is quantized three ways:
  * quantize_dynamic: DynamicQuantizeLinear + ConvInteger / MatMulInteger + Cast + Mul;
  * quantize_static, QOperator format: QuantizeLinear + QLinearConv / QLinearMatMul + DequantizeLinear;
  * quantize_static, QDQ format: QuantizeLinear / DequantizeLinear around float Conv / MatMul.
`korch run --backend reference` and onnxruntime (graph optimizations off, so it runs the nodes as
written instead of fusing QDQ pairs into its own integer kernels) get the same seeded input. Every
integer tensor (the quantized activations and the int32 accumulators, exposed as graph outputs) must
agree exactly wherever its inputs agree exactly; the float output within 1e-4 relative L2. Then
`korch compile --cost analytic` + `korch run --artifact` must reproduce the reference run, with every
kernel native: fission splits the quantized ops into int8 linear primitives (oneDNN) and
elementwise loop kernels, and no kernel runs the reference interpreter. In the QDQ format the float
Conv/MatMul on dequantized int8 operands runs as an int8 kernel too (fission's
integer_linear_from_qdq), whose exact integer sum rounds differently from the float graph: its
quantized values may move by one quantum against the reference, and its output must pass the
float64 rule (no farther from `run --backend reference --f64` than onnxruntime is).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import compare_with_ort  # noqa: E402

KORCH = os.environ.get("KORCH_BIN", str(Path(__file__).resolve().parents[2] / "build" / "korch"))
TOL = 1e-4
INTEGER_OPS = {"DynamicQuantizeLinear", "QuantizeLinear", "ConvInteger", "MatMulInteger", "QLinearConv",
               "QLinearMatMul"}


def korch(*args, env):
    r = subprocess.run([KORCH, *map(str, args)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"korch {' '.join(map(str, args))} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def npy(name):
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in name) + ".npy"


def rel_l2(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def float_model(path):
    """x [1, 3, 10, 10] -> Conv 3x3 (8 channels, pads 1) + bias -> Relu -> MatMul [10, 6] -> y [1, 8, 10, 6]."""
    rng = np.random.default_rng(16)
    w = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, (8,)).astype(np.float32)
    m = rng.normal(0, 0.5, (10, 6)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "m"], ["y"], name="matmul")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 6])],
                          initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                                       numpy_helper.from_array(m, "m")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


class Reader(quantization.CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(7)
        self.batches = iter([{"x": rng.uniform(-1, 1, (1, 3, 10, 10)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


def quantize(kind, src, dst):
    ops = ["Conv", "MatMul"]
    # int8 weights with uint8 activations: 7-bit weights (reduce_range), as onnxruntime's quantizer
    # recommends for x86 without VNNI, whose u8s8 kernels (vpmaddubsw) saturate pairs of products at
    # int16: onnxruntime then differs from exact integer arithmetic (seen on an AVX2 EPYC: MatMulInteger
    # off by 5671 in 2 of 480 elements), and the comparison would call the exact reference wrong.
    if kind == "dynamic":
        quantization.quantize_dynamic(src, dst, op_types_to_quantize=ops, weight_type=quantization.QuantType.QUInt8)
    elif kind == "dynamic_int8_per_channel":  # per-column b_zero_point on MatMulInteger (Conv stays per tensor)
        quantization.quantize_dynamic(src, dst, op_types_to_quantize=ops, weight_type=quantization.QuantType.QInt8,
                                      per_channel=True, reduce_range=True)
    else:
        fmt = quantization.QuantFormat.QOperator if kind == "static_qoperator" else quantization.QuantFormat.QDQ
        quantization.quantize_static(src, dst, Reader(), quant_format=fmt, op_types_to_quantize=ops,
                                     activation_type=quantization.QuantType.QUInt8,
                                     weight_type=quantization.QuantType.QInt8, reduce_range=True)
    return dst


def expose_integer_ops(path):
    """Makes every integer op's inputs and outputs graph outputs; returns [(op, inputs, outputs)] in
    graph order and the names of the initializers."""
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
    have = {o.name for o in m.graph.output} | {i.name for i in m.graph.input}
    inits = {i.name for i in m.graph.initializer}
    ops = []
    for n in m.graph.node:
        if n.op_type not in INTEGER_OPS:
            continue
        ins, outs = [i for i in n.input if i], [o for o in n.output if o]
        for t in ins + outs:
            if t not in have and t not in inits:
                m.graph.output.append(helper.make_tensor_value_info(t, types[t], None))
                have.add(t)
        ops.append((n.op_type, ins, outs))
    onnx.save(m, path)
    return ops, inits


def check_exact(ops, inits, got, want, what):
    """Integer-op outputs must equal wherever all of the op's inputs are equal (bitwise); returns the
    number of ops checked that way and the outputs that differed (on differing inputs)."""
    equal = {"x"} | inits
    checked, differing = 0, []
    for op, ins, outs in ops:
        for t in ins:
            if t not in equal and t in got and np.array_equal(got[t], want[t]):
                equal.add(t)
        inputs_equal = all(t in equal for t in ins)
        checked += inputs_equal
        for t in outs:
            a, b = got[t], want[t]
            assert a.dtype == b.dtype and a.shape == b.shape, f"{t}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
            if np.array_equal(a, b):
                equal.add(t)
                continue
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            msg = f"{op} output {t}: {np.count_nonzero(d)} of {d.size} elements differ (max {d.max():g})"
            assert not inputs_equal, f"{what}: {msg} on identical inputs"
            differing.append(msg)
    return checked, differing


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


@pytest.mark.parametrize("kind", ["dynamic", "dynamic_int8_per_channel", "static_qoperator", "static_qdq"])
def test_quantized_model_matches_onnxruntime(kind, tmp_path):
    env = dict(os.environ, KORCH_CACHE_DIR=str(tmp_path / "cache"), KORCH_PROGRESS="0")
    model = quantize(kind, float_model(tmp_path / "float.onnx"), tmp_path / "quant.onnx")
    ops = {n.op_type for n in onnx.load(model).graph.node}
    expected = {"dynamic": {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"},
                "dynamic_int8_per_channel": {"ConvInteger", "MatMulInteger"},
                "static_qoperator": {"QLinearConv", "QLinearMatMul"},
                "static_qdq": {"QuantizeLinear", "DequantizeLinear", "Conv", "MatMul"}}[kind]
    assert expected <= ops, f"quantizer wrote {sorted(ops)}"
    ops, inits = expose_integer_ops(model)
    assert ops

    ref = tmp_path / "ref"
    korch("run", model, "--backend", "reference", "--random-inputs", 1, "--outputs", ref, env=env)
    x = np.load(ref / "x.npy")
    want = ort_run(model, {"x": x})
    got = {name: np.load(ref / npy(name)) for name in want}
    checked, differing = check_exact(ops, inits, got, want, "reference vs onnxruntime")
    assert checked >= 1, "no integer op saw identical inputs"
    print(f"{kind}: {checked} of {len(ops)} integer ops on identical inputs, all exact; differing: {differing}")

    y, y_ort = got["y"], want["y"]
    assert y.std() > 0 and y_ort.std() > 0, "degenerate output"
    err = rel_l2(y, y_ort)
    assert err <= TOL, f"y: relative L2 {err:.3g} vs onnxruntime ({differing})"
    print(f"{kind}: y relative L2 vs onnxruntime {err:.3g}")

    # The compiled artifact (analytic costs) on the same input reproduces the reference run.
    art = tmp_path / "art"
    korch("compile", model, "--cost", "analytic", "-o", art, env=env)
    kernels = json.loads((art / "program.json").read_text())["kernels"]
    reference = sorted(k["note"].split(" ")[0] for k in kernels if "reference_graph" in k["recipe"])
    linear = [k for k in kernels if "linear" in k["recipe"] and "dtypes" in k["recipe"]["linear"]]
    assert not reference, f"kernels run by the reference interpreter: {reference}"
    # uint8 weights whose zero point does not fold into int8 (dynamic, QUInt8) add a ConvInteger with
    # all-ones weights (the receptive-field sum; MatMulInteger's is a ReduceSum loop kernel).
    want_linear = 3 if kind == "dynamic" else 2
    assert len(linear) == want_linear, f"{len(linear)} int8 library kernels, want {want_linear}"
    out = tmp_path / "art_out"
    korch("run", "--artifact", art, "--inputs", ref, "--outputs", out, env=env)
    have = {name: np.load(out / npy(name)) for name in want}
    assert have["y"].std() > 0
    if kind != "static_qdq":
        check_exact(ops, inits, have, got, "artifact vs reference")
        assert rel_l2(have["y"], y) <= TOL
    else:  # the int8 Conv/MatMul replace float ones: quantized values may move by one quantum
        for op, ins, outs in ops:
            for t in outs:
                d = np.abs(have[t].astype(np.int64) - got[t].astype(np.int64))
                assert d.max() <= 1 and np.count_nonzero(d) <= max(1, d.size // 100), f"{op} {t}: {np.count_nonzero(d)} differ, max {d.max()}"
        # The model-level rule (scripts/compare_with_ort.py): no farther from the float64
        # interpreter than onnxruntime running the float QDQ graph is (or within 1e-4).
        f64 = tmp_path / "f64"
        korch("run", model, "--backend", "reference", "--f64", "--inputs", ref, "--outputs", f64, env=env)
        verdict = compare_with_ort.f64_verdict("y", have["y"], y_ort, np.load(f64 / npy("y")))
        print(f"{kind}: artifact y {verdict}")
        assert verdict.ok, verdict


def lstm_model(path):
    """x [5, 2, 6] -> bidirectional LSTM (hidden 4, bias, initial states) -> Y, Y_h, Y_c."""
    rng = np.random.default_rng(21)
    nd, hidden, inp = 2, 4, 6
    w = rng.normal(0, 0.4, (nd, 4 * hidden, inp)).astype(np.float32)
    r = rng.normal(0, 0.4, (nd, 4 * hidden, hidden)).astype(np.float32)
    b = rng.normal(0, 0.1, (nd, 8 * hidden)).astype(np.float32)
    h0 = rng.normal(0, 0.5, (nd, 2, hidden)).astype(np.float32)
    c0 = rng.normal(0, 0.5, (nd, 2, hidden)).astype(np.float32)
    node = helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh", "yc"], name="lstm",
                            hidden_size=hidden, direction="bidirectional")
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, nd, 2, hidden]),
           helper.make_tensor_value_info("yh", TensorProto.FLOAT, [nd, 2, hidden]),
           helper.make_tensor_value_info("yc", TensorProto.FLOAT, [nd, 2, hidden])]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, inp])], out,
                          initializer=[numpy_helper.from_array(a, n) for a, n in
                                       [(w, "w"), (r, "r"), (b, "b"), (h0, "h0"), (c0, "c0")]])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamic_quantized_lstm_matches_onnxruntime(per_channel, tmp_path):
    """quantize_dynamic turns LSTM into onnxruntime's com.microsoft DynamicQuantizeLSTM (int8 weights,
    the input and each step's hidden state quantized to uint8 on the fly). Korch's reference follows
    onnxruntime's arithmetic (exact integer products, the same scales and rounding), so only the
    activation functions' last bits differ: within 1e-4 of onnxruntime. The artifact runs the op as
    the CPU's own step (runtime/cpu/cpu_quant_lstm_step.h: the reference's arithmetic, its integer
    products computed faster) and reproduces the reference exactly."""
    env = dict(os.environ, KORCH_CACHE_DIR=str(tmp_path / "cache"), KORCH_PROGRESS="0")
    model = tmp_path / "quant.onnx"
    # int8 weights (the quantizer writes int8 for LSTM whatever weight_type says); per_channel gives
    # every gate column its own scale. reduce_range: see quantize() above.
    quantization.quantize_dynamic(lstm_model(tmp_path / "float.onnx"), model, op_types_to_quantize=["LSTM"],
                                  weight_type=quantization.QuantType.QInt8, per_channel=per_channel,
                                  reduce_range=True)
    nodes = onnx.load(model).graph.node
    assert [(n.op_type, n.domain) for n in nodes] == [("DynamicQuantizeLSTM", "com.microsoft")], \
        f"quantizer wrote {[(n.op_type, n.domain) for n in nodes]}"

    ref = tmp_path / "ref"
    korch("run", model, "--backend", "reference", "--random-inputs", 3, "--outputs", ref, env=env)
    want = ort_run(model, {"x": np.load(ref / "x.npy")})
    for name, w in want.items():
        got = np.load(ref / npy(name))
        assert got.shape == w.shape and w.std() > 0.05, f"{name}: {got.shape} vs {w.shape}, std {w.std()}"
        err = rel_l2(got, w)
        print(f"per_channel={per_channel} {name}: relative L2 vs onnxruntime {err:.3g}")
        assert err <= TOL, f"{name}: relative L2 {err:.3g} vs onnxruntime"
    # Without the integer arithmetic (weights dequantized, a float LSTM) the result is measurably
    # different, so the check above does see the quantization.
    float_y = ort_run(tmp_path / "float.onnx", {"x": np.load(ref / "x.npy")})["y"]
    assert rel_l2(float_y, want["y"]) > 10 * TOL, "quantization left no trace: the check would be vacuous"

    art = tmp_path / "art"
    korch("compile", model, "--cost", "analytic", "-o", art, env=env)
    kernels = json.loads((art / "program.json").read_text())["kernels"]
    # The CPU's own step for the op (int16 pair products, the reference's arithmetic otherwise),
    # not the interpreter: and its output is the reference's, bit for bit.
    assert not [k for k in kernels if "reference_graph" in k["recipe"]], [k["note"] for k in kernels]
    assert [k["recipe"]["linear"]["op"] for k in kernels if "linear" in k["recipe"]] == ["DynamicQuantizeLSTM"]
    out = tmp_path / "art_out"
    korch("run", "--artifact", art, "--inputs", ref, "--outputs", out, env=env)
    for name in want:
        assert np.array_equal(np.load(out / npy(name)), np.load(ref / npy(name))), name
