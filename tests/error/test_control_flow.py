"""If and Loop through the korch binary (frontend/control_flow.h), against onnxruntime.

An If on an input bound with --bind is inlined and a Loop with a constant trip count is unrolled:
`korch run --backend reference` must give onnxruntime's outputs. A condition that stays a runtime
value is a one-line error naming the node, the op and the input to bind.
"""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from test_cli_errors import assert_clean_error, korch
from test_cli_errors import save_model as _save


def _info(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def sample_rate_model(path):
    """y = If(sr == 16000) { MatMul(x, w) + 1 } else { Relu(x) * 2 }; the then-branch reads the
    main graph's w and has an initializer of its own."""
    one = helper.make_tensor("one", TP.FLOAT, [1], [1.0])
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["mm"]),
                                helper.make_node("Add", ["mm", "one"], ["t_out"])],
                               "then", [], [_info("t_out", TP.FLOAT, [2, 3])], initializer=[one])
    two = helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two_v", TP.FLOAT, [], [2.0]))
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), two,
                                helper.make_node("Mul", ["r", "two"], ["e_out"])],
                               "else", [], [_info("e_out", TP.FLOAT, [2, 3])])
    k = helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k_v", TP.INT64, [], [16000]))
    nodes = [k, helper.make_node("Equal", ["sr", "k"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["y"], name="pick_rate", then_branch=then_g, else_branch=else_g)]
    w = helper.make_tensor("w", TP.FLOAT, [3, 3], np.arange(9, dtype=np.float32) / 4 - 1)
    return _save(path, nodes, [_info("sr", TP.INT64, []), _info("x", TP.FLOAT, [2, 3])], [_info("y", TP.FLOAT, [2, 3])],
                 [w])


def loop_model(path):
    """acc = x; for i in range(5): acc = acc * 0.5 + sin(i); scan output: acc + x each iteration."""
    to_float = helper.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT)
    half = helper.make_tensor("half", TP.FLOAT, [], [0.5])
    body = helper.make_graph(
        [to_float, helper.make_node("Sin", ["fi"], ["s"]), helper.make_node("Mul", ["acc", "half"], ["h"]),
         helper.make_node("Add", ["h", "s"], ["acc_out"]), helper.make_node("Add", ["acc_out", "x"], ["scan_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [_info("i", TP.INT64, []), _info("c", TP.BOOL, []), _info("acc", TP.FLOAT, [4])],
        [_info("c_out", TP.BOOL, []), _info("acc_out", TP.FLOAT, [4]), _info("scan_out", TP.FLOAT, [4])],
        initializer=[half])
    m = helper.make_tensor("M", TP.INT64, [], [5])
    node = helper.make_node("Loop", ["M", "", "x"], ["acc_final", "scans"], name="halving", body=body)
    return _save(path, [node], [_info("x", TP.FLOAT, [4])],
                 [_info("acc_final", TP.FLOAT, [4]), _info("scans", TP.FLOAT, [5, 4])], [m])


def _ort(path, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _korch_run(model, tmp_path, inputs, *extra):
    ins, outs = tmp_path / "in", tmp_path / "out"
    ins.mkdir(exist_ok=True)
    for name, value in inputs.items():
        np.save(ins / f"{name}.npy", value)
    r = korch("run", model, "--backend", "reference", "--inputs", ins, "--outputs", outs, *extra)
    assert r.returncode == 0, r.stderr
    return outs


def test_if_on_bound_input_matches_onnxruntime(tmp_path):
    model = sample_rate_model(tmp_path / "if.onnx")
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3)).astype(np.float32)
    for sr in (16000, 8000):
        np.save(tmp_path / "sr.npy", np.array(sr, np.int64))
        outs = _korch_run(model, tmp_path, {"x": x}, "--bind", f"sr={tmp_path / 'sr.npy'}")
        want = _ort(model, {"sr": np.array(sr, np.int64), "x": x})["y"]
        np.testing.assert_allclose(np.load(outs / "y.npy"), want, rtol=1e-6, atol=1e-6)


def test_if_on_runtime_input_is_a_clean_error(tmp_path):
    model = sample_rate_model(tmp_path / "if.onnx")
    r = korch("inspect", model)
    assert_clean_error(r, str(model), "node 'pick_rate' (If", "'is16k'", "runtime input 'sr'", "--bind sr=")
    assert r.returncode == 3  # unsupported, like an unsupported operator


def test_loop_matches_onnxruntime(tmp_path):
    model = loop_model(tmp_path / "loop.onnx")
    x = np.array([1, -2, 3, 0.5], np.float32)
    outs = _korch_run(model, tmp_path, {"x": x})
    want = _ort(model, {"x": x})
    for name in ("acc_final", "scans"):
        got = np.load(outs / f"{name}.npy")
        assert got.shape == want[name].shape
        np.testing.assert_allclose(got, want[name], rtol=1e-6, atol=1e-6)
