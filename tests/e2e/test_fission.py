"""Fission on real models: `korch fission MODEL -o PRIM.onnx` must compute the same function.

Two independent checks per model, on the same seeded inputs:
  * Korch's reference interpreter on PRIM.onnx vs on the original model (rel L2 < 1e-4);
  * onnxruntime on PRIM.onnx vs on the original (rel L2 < 1e-4): primitives are standard ONNX ops.
"""
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import compare_with_ort
import export_models

TOL = 1e-4
MODELS = ["candy", "efficientvit_b0", "yolox_nano", "transformer_encoder", "resnet18", "mobilenet_v3_small",
          "shufflenet_v2_x1_0", "squeezenet1_0"]
SLOW = ["segformer_b0", "swin_t", "yolov4", "convnext_tiny"]


def _korch_run(korch, model, out):
    r = subprocess.run([str(korch), "run", str(model), "--backend", "reference", "--random-inputs", "0",
                        "--outputs", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def _ort(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    return {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, feeds))}


def _rel(a, b):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def _check(name, extra=()):
    korch = compare_with_ort.default_korch()
    assert korch.is_file(), f"korch binary missing: {korch}"
    model = export_models.export(name)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        prim = tmp / "prim.onnx"
        r = subprocess.run([str(korch), "fission", str(model), "-o", str(prim), *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        print(r.stdout)
        a = _korch_run(korch, model, tmp / "a")
        b = _korch_run(korch, prim, tmp / "b")
        import onnx

        m = onnx.load(str(model), load_external_data=False)
        feeds = {i.name: np.load(a / compare_with_ort.npy_name(i.name)) for i in m.graph.input}
        ort_a, ort_b = _ort(model, feeds), _ort(prim, feeds)
        for o in m.graph.output:
            f = compare_with_ort.npy_name(o.name)
            ref, got = np.load(a / f), np.load(b / f)
            assert ref.shape == got.shape
            assert _rel(got, ref) < TOL, f"{o.name}: interpreter on PRIM.onnx differs: {_rel(got, ref):.3e}"
            assert _rel(ort_b[o.name], ort_a[o.name]) < TOL, f"{o.name}: onnxruntime on PRIM.onnx differs"


@pytest.mark.parametrize("name", MODELS)
def test_fission_preserves_function(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_fission_preserves_function_slow(name):
    _check(name)


def _extra_param(name):
    spec = export_models.MODELS[name]
    marks = [pytest.mark.extra] + ([pytest.mark.slow] if spec.slow else [])
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_extra_param(n) for n in export_models.EXTRA])
def test_fission_preserves_function_extra(name):
    _check(name)


# The rewrite alternatives (reduce-sum as MatMul, scales across MatMul, transposes into Einsum,
# MatMul merges, squeeze-and-excitation Convs as reductions...) are the orchestrator's to choose;
# applying every one must keep the function too.
@pytest.mark.parametrize("name", ["transformer_encoder", "text_encoder", "mobilenet_v3_small",
                                  pytest.param("segformer_b0", marks=pytest.mark.slow),
                                  pytest.param("vit_b_16", marks=pytest.mark.slow),
                                  pytest.param("googlenet", marks=pytest.mark.slow)])
def test_alternatives_preserve_function(name):
    _check(name, ("--apply-alternative", "all"))
