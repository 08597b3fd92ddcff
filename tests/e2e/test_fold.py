"""`korch fold` writes the model after Korch's frontend (shape inference, constant folding,
Identity/Dropout removal, dead code elimination) as ONNX. onnxruntime runs the original and the
folded model on the same random inputs: the outputs must agree, which checks that the frontend's
rewrites preserve the function independently of Korch's own interpreter."""
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest

import compare_with_ort
import export_models

MODELS = ["candy", "efficientvit_b0", "yolox_nano", "transformer_encoder", "swin_t", "segformer_b0"]


def _ort_run(path, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return [o.name for o in sess.get_outputs()], sess.run(None, feeds)


@pytest.mark.parametrize("name", MODELS)
def test_folded_model_matches_original_in_onnxruntime(name):
    korch = compare_with_ort.default_korch()
    assert korch.is_file(), f"korch binary missing: {korch}"
    model = export_models.export(name)
    with tempfile.TemporaryDirectory() as tmp:
        folded = Path(tmp) / "folded.onnx"
        r = subprocess.run([str(korch), "fold", str(model), "-o", str(folded)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        onnx.checker.check_model(str(folded))
        orig = onnx.load(str(model), load_external_data=False)
        rng = np.random.default_rng(0)
        feeds = {}
        for i in orig.graph.input:
            dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = rng.uniform(-1, 1, dims).astype(np.float32)
        names_a, outs_a = _ort_run(model, feeds)
        names_b, outs_b = _ort_run(folded, feeds)
        assert names_a == names_b
        for n, a, b in zip(names_a, outs_a, outs_b):
            rel = np.linalg.norm((a - b).astype(np.float64)) / max(np.linalg.norm(a.astype(np.float64)), 1e-30)
            assert a.shape == b.shape and rel < 1e-5, f"{n}: rel {rel:.3e}"
        assert len(onnx.load(str(folded)).graph.node) <= len(orig.graph.node)
