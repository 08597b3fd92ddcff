"""Malformed input gives a one-line error naming the problem and a non-zero exit, never a crash.

Each case builds its bad input in a temp dir and runs the real `korch` binary (KORCH_BIN).
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

KORCH = os.environ.get("KORCH_BIN", str(Path(__file__).resolve().parents[2] / "build" / "korch"))


def korch(*args):
    # A private tuning database and kernel cache: compiles here measure tiny kernels.
    env = dict(os.environ, KORCH_CACHE_DIR=os.environ.get("KORCH_TEST_CACHE_DIR", "/tmp/korch-cli-error-tests"),
               KORCH_PROGRESS="0")
    return subprocess.run([KORCH, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def assert_clean_error(r, *needles):
    assert r.returncode not in (0,), r.stdout
    assert 0 < r.returncode < 128, f"crashed: rc={r.returncode} stderr={r.stderr}"
    lines = [l for l in r.stderr.strip().splitlines() if l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("korch: error: "), r.stderr
    assert "internal error" not in r.stderr
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"


def save_model(path, nodes, inputs, outputs, initializers=()):
    """An opset-17 model of `nodes`, checked by onnx, saved to `path`."""
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def relu_model(path, op="Relu", dims=(2, 3)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node(op, ["x"], ["y"], name="the_node")
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_missing_file(tmp_path):
    assert_clean_error(korch("inspect", tmp_path / "nope.onnx"), "nope.onnx", "no such file")


def test_truncated_file(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    data = p.read_bytes()
    for cut in (len(data) // 3, len(data) - 7):
        t = tmp_path / f"t{cut}.onnx"
        t.write_bytes(data[:cut])
        assert_clean_error(korch("inspect", t), str(t))


def test_garbage_file(tmp_path):
    p = tmp_path / "g.onnx"
    p.write_bytes(os.urandom(4096))
    assert_clean_error(korch("inspect", p), str(p))


def test_unsupported_op_names_op_node_opset_and_path(tmp_path):
    p = relu_model(tmp_path / "m.onnx", op="NoSuchOp")
    r = korch("run", p, "--random-inputs", "0", "--outputs", tmp_path / "out")
    assert_clean_error(r, "NoSuchOp", "the_node", str(p))
    assert r.returncode == 3


def test_symbolic_dim_needs_shape(tmp_path):
    p = relu_model(tmp_path / "m.onnx", dims=("batch", 3))
    assert_clean_error(korch("inspect", p), "symbolic dimension 'batch'", "--shape x=", "--shape batch=N")


def test_named_and_minus_one_dims_are_fixed_by_shape(tmp_path):
    # --shape batch=2 fixes the dimension named 'batch'; a -1 dimension takes --shape x=...
    p = relu_model(tmp_path / "m.onnx", dims=("batch", 3))
    r = korch("inspect", p, "--shape", "batch=2")
    assert r.returncode == 0, r.stderr
    assert "f32[2,3]" in r.stdout, r.stdout
    q = relu_model(tmp_path / "q.onnx", dims=(-1, 3))
    assert_clean_error(korch("inspect", q), "dynamic dimension (-1)", "--shape x=")
    r = korch("inspect", q, "--shape", "x=4x3")
    assert r.returncode == 0, r.stderr
    assert "f32[4,3]" in r.stdout, r.stdout


def test_wrong_input_shape_in_npy(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    ins = tmp_path / "in"
    ins.mkdir()
    np.save(ins / "x.npy", np.zeros((3, 3), np.float32))
    assert_clean_error(korch("run", p, "--inputs", ins, "--outputs", tmp_path / "out"), "input 'x'", "f32[3,3]", "f32[2,3]")


def test_wrong_input_dtype_in_npy(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    ins = tmp_path / "in"
    ins.mkdir()
    np.save(ins / "x.npy", np.zeros((2, 3), np.int64))
    assert_clean_error(korch("run", p, "--inputs", ins, "--outputs", tmp_path / "out"), "input 'x'", "i64[2,3]")


def test_missing_and_corrupt_npy(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    ins = tmp_path / "in"
    ins.mkdir()
    assert_clean_error(korch("run", p, "--inputs", ins, "--outputs", tmp_path / "out"), "x.npy")
    (ins / "x.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    assert_clean_error(korch("run", p, "--inputs", ins, "--outputs", tmp_path / "out"), "x.npy")
    np.save(ins / "x.npy", np.zeros((2, 3), np.float32))
    raw = (ins / "x.npy").read_bytes()
    (ins / "x.npy").write_bytes(raw[:-5])
    assert_clean_error(korch("run", p, "--inputs", ins, "--outputs", tmp_path / "out"), "truncated")


def test_bad_shape_option(tmp_path):
    p = relu_model(tmp_path / "m.onnx", dims=("batch", 3))
    assert_clean_error(korch("inspect", p, "--shape", "x=2xfoo"), "malformed shape")
    assert_clean_error(korch("inspect", p, "--shape", "y=2x3"), "'y'")
    assert_clean_error(korch("inspect", p, "--shape", "x=2x4"), "conflicts")


def test_bad_attribute_is_an_error_not_a_crash(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Transpose", ["x"], ["y"], name="tp", perm=[0, 1, 7, 2])
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    assert_clean_error(korch("inspect", tmp_path / "m.onnx"), "tp", "Transpose")


def test_good_model_runs(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    r = korch("run", p, "--random-inputs", "3", "--outputs", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    x = np.load(tmp_path / "out" / "x.npy")
    y = np.load(tmp_path / "out" / "y.npy")
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_readme_operator_table_is_current():
    """README's operator table is `korch ops --markdown` verbatim (regenerate it when ops change)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    begin, end = "<!-- ops-table-begin -->\n", "\n<!-- ops-table-end -->"
    table = readme[readme.index(begin) + len(begin):readme.index(end)]
    r = korch("ops", "--markdown")
    assert r.returncode == 0
    assert table == r.stdout.strip(), "README operator table is stale: paste `build/korch ops --markdown` into it"


def test_runtime_shape_input_needs_bind(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    s = helper.make_tensor_value_info("target", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape0")
    m = helper.make_model(helper.make_graph([node], "g", [x, s], [y]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    assert_clean_error(korch("inspect", tmp_path / "m.onnx"), "reshape0", "compile-time constant")
    np.save(tmp_path / "target.npy", np.array([3, 4], np.int64))
    ins = tmp_path / "in"
    ins.mkdir()
    xv = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.save(ins / "x.npy", xv)
    r = korch("run", tmp_path / "m.onnx", "--bind", f"target={tmp_path / 'target.npy'}", "--inputs", ins,
              "--outputs", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), xv.reshape(3, 4))
    assert_clean_error(korch("inspect", tmp_path / "m.onnx", "--bind", "nope=missing.npy"), "missing.npy")
    assert_clean_error(korch("inspect", tmp_path / "m.onnx", "--bind", f"nope={tmp_path / 'target.npy'}"), "'nope'")


# korch compile / explain (kernel orchestration)
def test_compile_missing_model(tmp_path):
    assert_clean_error(korch("compile", tmp_path / "nope.onnx", "-o", tmp_path / "art"), "nope.onnx")


def test_compile_measured_costs_not_yet_on_cuda(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    r = korch("compile", p, "--device", "cuda", "--cost", "measured", "-o", tmp_path / "art")
    assert_clean_error(r, "cuda", "analytic")
    assert r.returncode == 3


def test_bench_needs_model_or_artifact(tmp_path):
    assert_clean_error(korch("bench"), "MODEL", "--artifact")
    assert_clean_error(korch("bench", "--artifact", tmp_path / "nope"), "nope")


def test_compile_bad_device_spec(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    spec = tmp_path / "spec.json"
    spec.write_text('{"name": "x", "dram_bandwidth": -1}')
    assert_clean_error(korch("compile", p, "--device-spec", spec, "-o", tmp_path / "art"), "spec.json")


def test_compile_then_explain(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    r = korch("compile", p, "-o", tmp_path / "art")
    assert r.returncode == 0, r.stderr
    e = korch("explain", tmp_path / "art")
    assert e.returncode == 0, e.stderr
    assert "1 primitives -> 1 kernels" in e.stdout


def test_explain_not_an_artifact(tmp_path):
    assert_clean_error(korch("explain", tmp_path), "plan.json", "korch compile")
    (tmp_path / "plan.json").write_text("{not json")
    assert_clean_error(korch("explain", tmp_path), "plan.json", "malformed")
    (tmp_path / "plan.json").write_text('{"format": "something-else"}')
    assert_clean_error(korch("explain", tmp_path), "not a Korch plan")


def test_typo_suggests_the_nearest_command():
    r = korch("compil", "m.onnx")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "unknown command 'compil'" in r.stderr and "did you mean 'compile'" in r.stderr, r.stderr


def test_help_command_and_argument_errors_exit_2(tmp_path):
    r = korch("help")
    assert r.returncode == 0, r.stderr
    assert "compile" in r.stdout and "bench" in r.stdout, r.stdout
    r = korch("help", "compile")
    assert r.returncode == 0, r.stderr
    assert "--max-kernel-size" in r.stdout, r.stdout
    p = relu_model(tmp_path / "m.onnx")
    for args in (("compile",), ("inspect", p, "--no-such-flag"), ("compile", p, "--max-fanout", "0", "-o", tmp_path / "a")):
        r = korch(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert r.stderr.strip(), args


def test_a_malformed_pace_wait_is_refused_from_the_flag_or_the_environment(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    r = korch("compile", p, "-o", tmp_path / "a", "--pace-wait", "abc")
    assert r.returncode == 2 and "--pace-wait" in r.stderr, (r.returncode, r.stderr)
    env = dict(os.environ, KORCH_PACE_WAIT="soon", KORCH_PROGRESS="0",
               KORCH_CACHE_DIR=os.environ.get("KORCH_TEST_CACHE_DIR", "/tmp/korch-cli-error-tests"))
    r = subprocess.run([KORCH, "compile", str(p), "-o", str(tmp_path / "b")], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 2 and "$KORCH_PACE_WAIT" in r.stderr, (r.returncode, r.stderr)
    assert not (tmp_path / "b").exists()


def test_more_threads_than_cores_is_said(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    many = str((os.cpu_count() or 1) + 1)
    r = korch("run", p, "--backend", "cpu", "--cost", "analytic", "--random-inputs", "0", "--outputs", tmp_path / "o",
              "--threads", many)
    assert r.returncode == 0, r.stderr
    assert f"--threads {many} is more than this machine's" in r.stderr, r.stderr
    r = korch("run", p, "--backend", "cpu", "--cost", "analytic", "--random-inputs", "0", "--outputs", tmp_path / "o2",
              "--threads", "1")
    assert "warning" not in r.stderr, r.stderr


def test_compile_refuses_a_foreign_non_empty_folder(tmp_path):
    p = relu_model(tmp_path / "m.onnx")
    out = tmp_path / "src"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = ("compile", p, "--cost", "analytic", "-o", out, "-q")
    assert_clean_error(korch(*args), str(out), "notes.txt", "not a Korch artifact", "--force")
    assert korch(*args, "--force").returncode == 0
    assert (out / "notes.txt").read_text() == "mine"
    art = tmp_path / "art"
    for _ in range(2):
        assert korch("compile", p, "--cost", "analytic", "-o", art, "-q").returncode == 0, "an artifact is rewritten"
    part = tmp_path / "part"
    (part / "kernels").mkdir(parents=True)  # what an interrupted compile leaves: Korch's names only
    (part / "weights.bin").write_bytes(b"")
    assert korch("compile", p, "--cost", "analytic", "-o", part, "-q").returncode == 0


def test_builtin_models_work_everywhere(tmp_path):
    for args in (("inspect", "builtin:tiny_convnet"), ("fold", "builtin:tiny_convnet", "-o", tmp_path / "f.onnx"),
                 ("fission", "builtin:tiny_convnet", "-o", tmp_path / "p.onnx")):
        r = korch(*args)
        assert r.returncode == 0, (args, r.stderr)


def test_bench_leaves_no_temporary_folder_on_failure(tmp_path):
    import glob
    import tempfile
    p = relu_model(tmp_path / "m.onnx", op="NoSuchOp")
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "korch-bench-*")))
    r = korch("bench", p, "--runs", "1", "--rounds", "1", "--peers", "none")
    assert r.returncode != 0
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), "korch-bench-*")))
    assert after <= before, after - before


def test_quiet_compile_draws_no_progress_bars(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KORCH_PROGRESS"}
    r = subprocess.run([KORCH, "compile", "builtin:tiny_convnet", "-o", str(tmp_path / "a"), "-q",
                        "--tuning-db", str(tmp_path / "t.db")], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "[#" not in r.stderr and "[." not in r.stderr, r.stderr


# An artifact's kernel library carries the x86 extensions it was compiled for (korch_kernels_isa);
# loaded on a CPU that lacks one, it is rebuilt for this CPU, or the error names what is missing.
def _artifact_needing(tmp_path, feature, keep_source):
    out = tmp_path / "art"
    r = korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    src = out / "kernels" / "kernels.cc"
    original = src.read_text()
    probe = 'const char* korch_kernels_isa() {\n  return ""\n'
    assert probe in original, "the library says which extensions it needs"
    src.write_text(original.replace(probe, probe + f'      " {feature}"\n'))
    b = subprocess.run(["sh", str(out / "kernels" / "build.sh")], capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    if not keep_source:
        src.write_text(original)
    return out


def test_library_built_for_another_cpu_is_rebuilt(tmp_path):
    out = _artifact_needing(tmp_path, "made_up_feature", keep_source=False)
    r = korch("run", "--artifact", out, "--random-inputs", "1", "--outputs", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "rebuilt its kernel library first" in r.stdout, r.stdout
    r = korch("run", "--artifact", out, "--random-inputs", "1", "--outputs", tmp_path / "o2")
    assert r.returncode == 0 and "rebuilt" not in r.stdout, r.stdout + r.stderr


def test_library_this_cpu_cannot_run_is_a_clear_error(tmp_path):
    out = _artifact_needing(tmp_path, "made_up_feature", keep_source=True)
    r = korch("run", "--artifact", out, "--random-inputs", "1", "--outputs", tmp_path / "o")
    assert_clean_error(r, "libkernels.so", "made_up_feature", "this CPU lacks")
    assert r.returncode == 3


def test_compile_memory_budget(tmp_path):
    # Within the unconstrained plan's peak: the same plan, the budget in manifest.json.
    r = korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "-o", tmp_path / "free")
    assert r.returncode == 0, r.stderr
    peak = json.loads((tmp_path / "free" / "manifest.json").read_text())["peak_intermediate_bytes"]
    r = korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "--memory-budget", peak, "-o", tmp_path / "art")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert m["memory_budget"] == peak and m["peak_intermediate_bytes"] <= peak
    assert f"within the budget of {peak} bytes" in r.stdout
    # Below what any plan can reach: one line naming the bound and the node that sets it.
    assert_clean_error(korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "--memory-budget", 1000, "-o",
                             tmp_path / "small"), "memory budget of 1000 bytes", "every plan peaks at", "Conv")
    r = korch("compile", "builtin:tiny_convnet", "--memory-budget", "-5", "-o", tmp_path / "neg")
    assert r.returncode != 0 and "0 bytes or more" in r.stderr, r.stderr
