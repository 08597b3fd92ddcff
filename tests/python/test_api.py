"""The Python API (python/korch): compile, run, save, load, errors, against onnxruntime.

Runs with build/python on PYTHONPATH (ctest sets it; scripts/build.sh also puts it on the .venv's path).
Compiles use analytic costs (fast: no candidate is timed) except one measured compile of a tiny model
into a private tuning database.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import korch

TOL = 1e-4


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def ort_run(model_bytes, feed):
    s = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))


def random_feed(infos, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in infos}


def assert_matches(got, want):
    assert set(got) == set(want)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        assert got[name].dtype == w.dtype, name
        # Non-degenerate: a zero or constant output would make the comparison vacuous.
        assert np.std(w) > 1e-6, f"{name} is degenerate"
        assert rel_l2(got[name], w) < TOL, (name, rel_l2(got[name], w))


def gelu_mlp(path=None, n=4, d=16, h=32, seed=1):
    rng = np.random.default_rng(seed)
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [d, h], rng.standard_normal((d, h)).astype(np.float32).ravel())
    b1 = helper.make_tensor("b1", TensorProto.FLOAT, [h], rng.standard_normal(h).astype(np.float32))
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [h, d], rng.standard_normal((h, d)).astype(np.float32).ravel())
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Tanh", ["a1"], ["t"]),
        helper.make_node("Mul", ["t", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "x"], ["y"]),
    ]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d])], [w1, b1, w2, half])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    if path:
        onnx.save(m, path)
    return m


def test_error_is_an_exception_class():
    assert issubclass(korch.Error, Exception)


def test_builtin_compile_run_matches_onnxruntime():
    assert "tiny_convnet" in korch.builtin_models()
    exe = korch.compile("builtin:tiny_convnet", cost="analytic")
    assert exe.device == "cpu" and exe.kernel_count > 0
    (x,) = exe.inputs
    assert isinstance(x, korch.TensorInfo) and x.dtype == np.float32 and len(x.shape) == 4
    assert [o.name for o in exe.outputs]
    feed = random_feed(exe.inputs)
    got = exe.run(feed)
    assert_matches(got, ort_run(korch.builtin_model_bytes("tiny_convnet"), feed))
    assert exe.plan["kernels"], "plan.json lists the kernels"
    assert exe.manifest["device"] == "cpu"


def test_rewrite_choices_on_and_off():
    # tiny_transformer offers five rewrite sites; the plan picks some, and either way it computes
    # what onnxruntime computes. Off: nothing offered.
    feed = None
    for choices in (True, False):
        exe = korch.compile("builtin:tiny_transformer", cost="analytic", rewrite_choices=choices)
        r = exe.summary["rewrites"]
        assert r["offered"] == (5 if choices else 0) and (r["chosen"] != []) == choices, r
        assert exe.plan["rewrites"]["offered"] == r["offered"]
        feed = feed or random_feed(exe.inputs, seed=4)
        assert_matches(exe.run(feed), ort_run(korch.builtin_model_bytes("tiny_transformer"), feed))


def test_model_proto_with_named_dim_save_and_load(tmp_path):
    m = gelu_mlp()
    exe = korch.compile(m, shapes={"batch": 3}, cost="analytic", output=tmp_path / "a")
    assert exe.inputs[0].shape == (3, 16)
    feed = random_feed(exe.inputs, seed=2)
    want = ort_run(m.SerializeToString(), feed)
    assert_matches(exe.run(feed), want)
    saved = exe.save(tmp_path / "copy")
    del exe
    again = korch.load(saved, threads=1)
    assert_matches(again.run(feed), want)
    # The reference interpreter through the API agrees too.
    assert_matches(korch.run_reference(m, feed, shapes={"batch": 3}), want)


def test_temporary_artifact_goes_with_the_executable():
    exe = korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic")
    d = exe.artifact_dir
    assert os.path.isfile(os.path.join(d, "manifest.json"))
    del exe
    import gc

    gc.collect()
    assert not os.path.exists(d)


def test_check_runs_the_artifact_against_the_reference(tmp_path):
    exe = korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic", check=True, output=tmp_path / "a")
    assert 0 <= exe.summary["worst_rel_l2_error"] < 1e-4
    assert exe.manifest["model_check"]["passed"]
    assert "worst_rel_l2_error" not in korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic").summary


def test_measured_compile_records_predicted_and_measured(tmp_path):
    exe = korch.compile(gelu_mlp(), shapes={"batch": 2}, tuning_db=tmp_path / "t.db", time_limit=5)
    s = exe.summary
    assert s["predicted_seconds"] > 0 and s["measured_seconds"] > 0
    assert (tmp_path / "t.db").exists()
    feed = random_feed(exe.inputs, seed=3)
    assert_matches(exe.run(feed), ort_run(gelu_mlp().SerializeToString(), feed))


def test_path_and_bound_input(tmp_path):
    p = tmp_path / "m.onnx"
    gelu_mlp(p)
    x = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
    exe = korch.compile(str(p), binds={"x": x}, cost="analytic")
    assert exe.inputs == []  # the bound input folded into the graph
    assert_matches(exe.run({}), ort_run(p.read_bytes(), {"x": x}))


def test_errors_carry_the_message(tmp_path):
    with pytest.raises(korch.Error, match="nope.onnx"):
        korch.compile(tmp_path / "nope.onnx")
    with pytest.raises(korch.Error, match="not a Korch artifact|manifest"):
        korch.load(tmp_path)
    with pytest.raises(korch.Error, match="unsupported operator 'FancyOp'"):
        g = helper.make_graph([helper.make_node("FancyOp", ["x"], ["y"], name="n0")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        korch.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(korch.Error, match="batch"):
        korch.compile(gelu_mlp(), cost="analytic")  # the dynamic dimension is not fixed
    with pytest.raises(korch.Error, match="cost="):
        korch.compile(gelu_mlp(), shapes={"batch": 1}, cost="fast")
    with pytest.raises(korch.Error, match="memory budget of 64 bytes"):
        korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic", memory_budget=64)
    with pytest.raises(ValueError, match="0 bytes or more"):
        korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic", memory_budget=-1)

    exe = korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic")
    with pytest.raises(korch.Error, match="no value for input 'x'"):
        exe.run({})
    with pytest.raises(korch.Error, match="'z' is not an input"):
        exe.run({"x": np.zeros((2, 16), np.float32), "z": np.zeros(1)})
    with pytest.raises(korch.Error, match="input 'x' expects"):
        exe.run({"x": np.zeros((2, 16), np.float64)})
    with pytest.raises(korch.Error, match="input 'x' expects"):
        exe.run({"x": np.zeros((3, 16), np.float32)})
    with pytest.raises(korch.Error, match="not a Korch artifact"):
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "notes.txt").write_text("mine")
        exe.save(tmp_path / "busy")


def test_non_contiguous_input_is_read_by_value():
    exe = korch.compile(gelu_mlp(), shapes={"batch": 2}, cost="analytic")
    base = np.random.default_rng(5).standard_normal((16, 2)).astype(np.float32)
    x = base.T  # a transposed view: strides are not C order
    assert not x.flags["C_CONTIGUOUS"]
    assert_matches(exe.run({"x": x}), ort_run(gelu_mlp().SerializeToString(), {"x": np.ascontiguousarray(x)}))


def test_cuda_artifact_on_the_emulator():
    exe = korch.compile(gelu_mlp(), device="cuda", shapes={"batch": 2})
    assert exe.device == "cuda-emulator"
    feed = random_feed(exe.inputs, seed=6)
    assert_matches(exe.run(feed), ort_run(gelu_mlp().SerializeToString(), feed))


def test_importable_from_the_venv_without_pythonpath():
    """scripts/build.sh puts build/python on the project .venv's path (README: Python API)."""
    venv_py = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
    if not venv_py.exists():
        pytest.skip("no project .venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(venv_py), "-c", "import korch; print(korch.__file__)"], capture_output=True, text=True,
                       env=env, cwd="/")
    assert r.returncode == 0, r.stderr
