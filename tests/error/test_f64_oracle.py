"""`korch run --backend reference --f64` (ir/precision.h) and the float64 rule of
scripts/compare_with_ort.py.

The float64 run must match numpy float64 math where the float32 run cannot (cancellation, an
exp/log chain), keep float32-only ops (QuantizeLinear...) in float32 and say so; the rule must pass a
float32 result as good as the reference and fail one perturbed by 1e-2.
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from test_cli_errors import KORCH, assert_clean_error, korch
from test_cli_errors import save_model as _save

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import compare_with_ort  # noqa: E402

ROWS, COLS, OUT = 8, 512, 16


def _w():
    return np.random.default_rng(3).uniform(-1, 1, (COLS, OUT)).astype(np.float32)


def ill_conditioned_model(path):
    """t = (x + 1e4) - 1e4;  y = Softmax(MatMul(Log(Exp(t) * 0.5 + 1e-3), w)) + ConstantOfShape + Cast(k)."""
    f = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)  # noqa: E731
    inits = [f("big", 1e4), f("half", 0.5), f("tiny", 1e-3), numpy_helper.from_array(_w(), "w"),
             numpy_helper.from_array(np.array([ROWS, OUT], dtype=np.int64), "dims"),
             numpy_helper.from_array(np.arange(OUT, dtype=np.int64), "k")]
    nodes = [
        helper.make_node("Add", ["x", "big"], ["xb"]),
        helper.make_node("Sub", ["xb", "big"], ["t"]),
        helper.make_node("Exp", ["t"], ["e"]),
        helper.make_node("Mul", ["e", "half"], ["eh"]),
        helper.make_node("Add", ["eh", "tiny"], ["et"]),
        helper.make_node("Log", ["et"], ["l"]),
        helper.make_node("MatMul", ["l", "w"], ["m"]),
        helper.make_node("Softmax", ["m"], ["s"], axis=-1),
        helper.make_node("ConstantOfShape", ["dims"], ["c"],
                         value=numpy_helper.from_array(np.array([0.25], dtype=np.float32))),
        helper.make_node("Cast", ["k"], ["kf"], to=TP.FLOAT),
        helper.make_node("Add", ["s", "c"], ["sc"]),
        helper.make_node("Add", ["sc", "kf"], ["y"]),
    ]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [ROWS, COLS])],
                 [helper.make_tensor_value_info("y", TP.FLOAT, [ROWS, OUT]),
                  helper.make_tensor_value_info("t", TP.FLOAT, [ROWS, COLS])], inits)


def numpy_f64(x):
    """ill_conditioned_model in numpy float64 (constants: their float32 values)."""
    c = lambda v: np.float64(np.float32(v))  # noqa: E731
    t = (x.astype(np.float64) + c(1e4)) - c(1e4)
    m = np.log(np.exp(t) * c(0.5) + c(1e-3)) @ _w().astype(np.float64)
    s = np.exp(m - m.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return s + 0.25 + np.arange(OUT), t


def rel(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


def test_f64_run_matches_numpy_float64(tmp_path):
    model = ill_conditioned_model(tmp_path / "m.onnx")
    r = korch("run", model, "--backend", "reference", "--f64", "--random-inputs", 0, "--outputs", tmp_path / "f64")
    assert r.returncode == 0, r.stderr
    assert "in float64" in r.stdout and "kept in float32" not in r.stdout, r.stdout
    r = korch("run", model, "--backend", "reference", "--random-inputs", 0, "--outputs", tmp_path / "f32")
    assert r.returncode == 0, r.stderr
    x = np.load(tmp_path / "f64" / "x.npy")
    assert x.dtype == np.float32 and np.array_equal(x, np.load(tmp_path / "f32" / "x.npy"))  # same inputs
    want_y, want_t = numpy_f64(x)
    for name, want in (("y", want_y), ("t", want_t)):
        got64, got32 = np.load(tmp_path / "f64" / f"{name}.npy"), np.load(tmp_path / "f32" / f"{name}.npy")
        assert got64.dtype == np.float64 and got32.dtype == np.float32
        e64, e32 = rel(got64, want), rel(got32, want)
        assert e64 < 1e-12, f"{name}: float64 run is {e64:.3g} from numpy float64"
        assert e32 > 1e4 * e64, f"{name}: float32 {e32:.3g} vs float64 {e64:.3g}: the case is not ill-conditioned"
    assert rel(np.load(tmp_path / "f32" / "t.npy"), want_t) > 1e-5  # float32 keeps ~3 decimals of x at 1e4


def test_f64_keeps_float32_only_ops_and_says_so(tmp_path):
    inits = [numpy_helper.from_array(np.array(0.125, dtype=np.float32), "scale"),
             numpy_helper.from_array(np.array(10, dtype=np.uint8), "zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["dq"], name="dequant"),
             helper.make_node("Mul", ["dq", "x"], ["y"])]
    model = _save(tmp_path / "q.onnx", nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [4, 8])],
                  [helper.make_tensor_value_info("y", TP.FLOAT, [4, 8])], inits)
    r = korch("run", model, "--backend", "reference", "--f64", "--random-inputs", 1, "--outputs", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "kept in float32 (no float64 version of the op): 2 node(s): quant (QuantizeLinear), " \
           "dequant (DequantizeLinear)" in r.stdout, r.stdout
    x = np.load(tmp_path / "o" / "x.npy").astype(np.float64)
    q = np.clip(np.round(x.astype(np.float32) / np.float32(0.125)) + 10, 0, 255)
    y = np.load(tmp_path / "o" / "y.npy")
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, (q - 10) * 0.125 * x)


def test_f64_needs_the_reference_backend(tmp_path):
    model = ill_conditioned_model(tmp_path / "m.onnx")
    r = korch("run", model, "--backend", "cpu", "--f64", "--random-inputs", 0, "--outputs", tmp_path / "o")
    assert_clean_error(r, "--f64", "--backend reference")


# ---- the float64 rule (compare_with_ort.f64_verdict / compare_f64) -------------------------------

def test_verdict_bounds():
    rng = np.random.default_rng(0)
    f64 = rng.standard_normal(1000)
    ort = (f64 * (1 + 1e-3 * rng.standard_normal(1000))).astype(np.float32)  # 1e-3 from f64
    close = (f64 * (1 + 5e-4 * rng.standard_normal(1000))).astype(np.float32)
    far = (f64 * (1 + 2e-3 * rng.standard_normal(1000))).astype(np.float32)
    v = compare_with_ort.f64_verdict
    assert v("o", close, ort, f64).ok          # nearer to f64 than onnxruntime: correct
    assert not v("o", far, ort, f64).ok        # twice as far as onnxruntime: wrong
    assert v("o", far, ort, f64, factor=3.0).ok
    # onnxruntime exact up to float32 rounding: the bound is the floor; within it passes.
    exact = f64.astype(np.float32)
    within = (f64 * (1 + 5e-5 * rng.standard_normal(1000))).astype(np.float32)
    assert v("o", close, exact, f64).bound == compare_with_ort.F64_FLOOR
    assert v("o", within, exact, f64).ok
    assert not v("o", close, exact, f64).ok   # 5e-4 from f64, onnxruntime ~3e-8
    assert not v("o", close.astype(np.float64), ort, f64).ok  # dtype differs from onnxruntime's
    c = v("o", ort, ort, f64)
    assert c.korch_ort == 0 and c.korch_f64 == c.ort_f64 and c.ok


def test_rule_passes_the_reference_and_fails_a_perturbed_result(tmp_path):
    model = ill_conditioned_model(tmp_path / "m.onnx")
    res = compare_with_ort.compare_f64(model, KORCH, seed=0, verbose=False)
    assert res.ok, res.checks
    assert [c.name for c in res.checks] == ["y", "t"]
    for c in res.checks:
        assert c.korch_f64 <= max(c.ort_f64, compare_with_ort.F64_FLOOR)
        assert c.ort_f64 > 0 and c.korch_f64 > 0
    _check_reference_and_perturbed(model, tmp_path)


def _check_reference_and_perturbed(model, tmp_path):
    """f64_verdict on Korch's float32 reference output 'y' passes; the same perturbed by 1e-2 fails."""
    import onnxruntime as ort

    for out, extra in (("f64", ["--f64"]), ("f32", [])):
        r = korch("run", model, "--backend", "reference", *extra, "--random-inputs", 0, "--outputs", tmp_path / out)
        assert r.returncode == 0, r.stderr
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    got = np.load(tmp_path / "f32" / "y.npy")
    ort_y = sess.run(["y"], {"x": np.load(tmp_path / "f32" / "x.npy")})[0]
    f64 = np.load(tmp_path / "f64" / "y.npy")
    assert compare_with_ort.f64_verdict("y", got, ort_y, f64).ok
    bad = (got * (1 + 1e-2 * np.random.default_rng(1).standard_normal(got.shape))).astype(np.float32)
    c = compare_with_ort.f64_verdict("y", bad, ort_y, f64)
    assert not c.ok and c.korch_f64 > 1e-3, c


def big_sum_model(path):
    """y = ReduceSum(x * 1e3 + 1e5, axis 1) - 4096e5 over [64, 4096]: every row sum cancels to
    ~1e-4 of its terms, so float32 accumulation order shows at ~1e-3 (relative L2)."""
    f = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)  # noqa: E731
    nodes = [helper.make_node("Mul", ["x", "k"], ["a"]), helper.make_node("Add", ["a", "off"], ["b"]),
             helper.make_node("ReduceSum", ["b", "axes"], ["s"], keepdims=0),
             helper.make_node("Sub", ["s", "total"], ["y"])]
    inits = [f("k", 1e3), f("off", 1e5), f("total", 4096 * 1e5),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [64, 4096])],
                 [helper.make_tensor_value_info("y", TP.FLOAT, [64])], inits)


def test_rule_tells_float32_noise_from_a_bug(tmp_path):
    """Korch and onnxruntime differ by ~1e-3 here (the fixed 1e-4 check fails), yet Korch is nearer
    to the float64 result than onnxruntime is: the f64 rule passes it, and still fails 1e-2 noise."""
    model = big_sum_model(tmp_path / "sum.onnx")
    fixed = compare_with_ort.compare(model, KORCH, seed=0, tol=1e-4, verbose=False)
    assert not fixed.ok and fixed.checks[0].rel_err > 1e-4, fixed.checks
    res = compare_with_ort.compare_f64(model, KORCH, seed=0, verbose=False)
    (c,) = res.checks
    assert res.ok and c.korch_ort > 1e-4 and c.korch_f64 < c.ort_f64, c
    _check_reference_and_perturbed(model, tmp_path)
