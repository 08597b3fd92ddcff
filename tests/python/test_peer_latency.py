"""bench/peer_latency.py: the model OpenVINO is given when its ONNX frontend rejects a Dropout."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[2]


def peer_latency():
    spec = importlib.util.spec_from_file_location("peer_latency", ROOT / "bench" / "peer_latency.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dropout_model(training, ratio=0.1):
    """x -> Softmax -> Dropout(ratio, training_mode a Constant node, mask output) -> Mul by 2."""
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], axis=-1),
        helper.make_node("Constant", [], ["ratio"], value=helper.make_tensor("r", TensorProto.FLOAT, [], [ratio])),
        helper.make_node("Constant", [], ["train"], value=helper.make_tensor("t", TensorProto.BOOL, [], [training])),
        helper.make_node("Dropout", ["s", "ratio", "train"], ["d", "mask"]),
        helper.make_node("Mul", ["d", "two"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("training,ratio", [(False, 0.1), (True, 0.0)])  # the second: swin_t's
def test_inference_dropouts_become_identity_and_the_model_computes_the_same(training, ratio):
    pl = peer_latency()
    m = dropout_model(training, ratio)
    before = m.SerializeToString()
    assert pl.identity_dropouts_as_identity(m) == 1
    onnx.checker.check_model(m)
    assert [n.op_type for n in m.graph.node].count("Identity") == 1
    assert "Dropout" not in [n.op_type for n in m.graph.node]
    ort = pytest.importorskip("onnxruntime")
    x = {"x": np.random.default_rng(0).uniform(-1, 1, (2, 5)).astype(np.float32)}
    want = ort.InferenceSession(before, providers=["CPUExecutionProvider"]).run(None, x)[0]
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]
    np.testing.assert_array_equal(got, want)
    assert np.std(want) > 0.01  # a softmax of random inputs, doubled: not a constant


def test_training_mode_dropouts_that_drop_and_read_masks_stay():
    pl = peer_latency()
    assert pl.identity_dropouts_as_identity(dropout_model(True)) == 0
    m = dropout_model(False)
    m.graph.output.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 5]))
    assert pl.identity_dropouts_as_identity(m) == 0
