"""`--json` on inspect, compile, run and explain: one JSON document on stdout and nothing else;
errors stay one stderr line with an empty stdout.

Runs the real `korch` binary (KORCH_BIN) with a private kernel cache and tuning database.
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
    env = dict(os.environ, KORCH_CACHE_DIR=os.environ.get("KORCH_TEST_CACHE_DIR", "/tmp/korch-cli-error-tests"))
    env.pop("KORCH_PROGRESS", None)  # progress bars on: --json must still keep them off stdout
    return subprocess.run([KORCH, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def doc(r):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # the whole of stdout is one document


def assert_json_error(r, rc=2):
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = [l for l in r.stderr.splitlines() if l]
    assert len(lines) == 1 and lines[0].startswith("korch: error: "), r.stderr


def add_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Mul", ["s", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x, b], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    d = tmp_path_factory.mktemp("json") / "art"
    return d, doc(korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "-o", d, "--json"))


def test_inspect_json(tmp_path):
    p = add_model(tmp_path / "m.onnx")
    j = doc(korch("inspect", p, "--json"))
    assert j["model"] == str(p) and j["opset"] == 17 and j["nodes"] == 3
    assert [(i["name"], i["dtype"], i["shape"]) for i in j["inputs"]] == [("x", "f32", [2, 3]), ("b", "f32", [3])]
    assert [(o["name"], o["shape"]) for o in j["outputs"]] == [("y", [2, 3])]
    assert j["operators"] == {"Add": 1, "Mul": 1, "Relu": 1}
    assert j["parameter_bytes"] == 12 and isinstance(j["flops"], (int, float))
    assert j["fission"]["operators"] == 3 and j["fission_error"] is None
    assert j["tensors"] is None
    t = doc(korch("inspect", p, "--json", "--tensors"))["tensors"]
    assert [(v["name"], v["shape"], v["op_type"]) for v in t] == [("s", [2, 3], "Add"), ("m", [2, 3], "Mul"),
                                                                  ("y", [2, 3], "Relu")]


def test_compile_json(artifact, tmp_path):
    d, j = artifact
    plan = json.loads((d / "plan.json").read_text())
    assert j["kernels"] == len(plan["kernels"]) and j["primitives"] == plan["graph"]["primitives"]
    assert j["artifact_dir"] == str(d) and j["target"] == "cpu" and j["costs"] == "analytic"
    assert j["solver"]["status"] == plan["solver"]["status"] and j["solver"]["seconds"] >= 0
    assert j["verify"]["kernels"] == j["kernels"] and j["tuning"] is None and j["closed_loop"] is None
    assert isinstance(j["memory"]["weights_bytes"], int) and j["memory"]["weights_bytes"] > 0
    assert j["timing_s"]["total"] > 0 and j["plan"]["plan_s"] > 0
    # Without --json the text is what it was (-q: the summary alone).
    r = korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "-o", tmp_path / "t", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("compiled builtin:tiny_convnet for cpu") and "{" not in r.stdout
    assert j["model_check"] is None  # not asked
    # --check: the artifact against the reference interpreter, in the document and as a line.
    c = doc(korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "-o", tmp_path / "c", "--check", "--json"))
    assert c["model_check"]["passed"] and 0 <= c["model_check"]["worst_rel_l2_error"] < 1e-4
    assert c["timing_s"]["check"] > 0
    r = korch("compile", "builtin:tiny_convnet", "--cost", "analytic", "-o", tmp_path / "c", "--check", "-q")
    assert r.returncode == 0 and "checked: the artifact matches the reference interpreter" in r.stdout, r.stdout


def test_compile_json_measured(tmp_path):
    p = add_model(tmp_path / "m.onnx")
    j = doc(korch("compile", p, "--cost", "measured", "-o", tmp_path / "a", "--json"))
    assert j["costs"] == "measured" and j["tuning"]["signatures"] >= 1
    assert j["kernels"] >= 1 and j["closed_loop"]["measured_s"] > 0
    # Where a cold compile's time went, and how the kept run was settled.
    seconds = j["tuning"]["seconds"]
    assert set(seconds) == {"signatures", "generate", "reference", "compile", "measure"}
    assert all(v >= 0 for v in seconds.values())
    assert seconds["measure"] > 0 or j["tuning"]["measured"] == 0  # (the database may hold them all)
    loop = j["closed_loop"]
    assert 0 < loop["kept_run_scale"] <= 1 and loop["kept_run_drift"] >= 1
    assert 0.9 <= loop["kept_run_to_whole_runs"] <= 1.1 and loop["kept_run_pace"] == 0  # (the tests take no probes)
    assert loop["fastest_round_beside_first"] is None or loop["fastest_round_beside_first"]["first_s"] > 0


def test_run_artifact_json(artifact, tmp_path):
    d, c = artifact
    j = doc(korch("run", "--artifact", d, "--random-inputs", "1", "--outputs", tmp_path / "o", "--json"))
    assert j["backend"] == "artifact" and j["device"] == "cpu" and j["kernels"] == c["kernels"]
    assert j["artifact"] == str(d) and j["threads"] == 2 and j["wall_s"] > 0
    assert j["inputs"] and j["outputs"]
    for t in j["inputs"] + j["outputs"]:
        assert Path(t["file"]).parent == tmp_path / "o"
        assert list(np.load(t["file"]).shape) == t["shape"]


def test_run_reference_and_cpu_json(tmp_path):
    p = add_model(tmp_path / "m.onnx")
    j = doc(korch("run", p, "--random-inputs", "0", "--outputs", tmp_path / "r", "--json"))
    assert j["backend"] == "reference" and j["nodes"] == 3 and j["threads"] is None
    assert [i["name"] for i in j["inputs"]] == ["x", "b"]
    (out,) = j["outputs"]
    assert out["name"] == "y" and np.load(out["file"]).shape == (2, 3)
    ref = np.load(out["file"])
    j = doc(korch("run", p, "--backend", "cpu", "--cost", "analytic", "--check", "--random-inputs", "0",
                  "--outputs", tmp_path / "c", "--json"))
    assert j["backend"] == "cpu" and j["kernels"] >= 1 and j["compile"]["kernels"] == j["kernels"]
    assert j["compile"]["artifact_dir"] is None  # the temporary artifact is gone
    assert j["check"]["passed"] and set(j["check"]["rel_l2_error"]) == {"y"}
    assert j["check"]["worst_rel_l2_error"] < 1e-4
    np.testing.assert_allclose(np.load(j["outputs"][0]["file"]), ref, rtol=1e-5)


def test_explain_json(artifact):
    d, c = artifact
    plan = json.loads((d / "plan.json").read_text())
    j = doc(korch("explain", d, "--json"))
    assert j["kernel_count"] == len(plan["kernels"]) == len(j["kernels"]) == c["kernels"]
    assert j["plan_s"] == pytest.approx(plan["cost"]["plan_s"])
    assert sum(k["share"] for k in j["kernels"]) == pytest.approx(1, rel=1e-6)
    assert [k["step"] for k in j["kernels"]] == list(range(len(plan["kernels"])))
    assert j["solver"]["status"] == plan["solver"]["status"]
    top = doc(korch("explain", d, "--json", "--top", "1"))["kernels"]
    assert len(top) == 1 and top[0]["cost_s"] == max(k["cost_s"] for k in plan["kernels"])


def test_explain_gives_the_gain_of_the_runs_beside_the_unfused_plan(artifact, tmp_path):
    # After the closed loop, plan.json's unfused_s was timed beside the plan's whole runs
    # (beside_unfused_s): the gain is their ratio, as compile printed it, not unfused_s over a
    # prediction taken in another state of the machine.
    import shutil
    d = tmp_path / "art"
    shutil.copytree(artifact[0], d)
    plan = json.loads((d / "plan.json").read_text())
    plan["cost"].update(plan_s=2.0e-3, unfused_s=1.8e-3, beside_unfused_s=1.2e-3)
    (d / "plan.json").write_text(json.dumps(plan))
    j = doc(korch("explain", d, "--json"))
    assert j["speedup"] == pytest.approx(1.5) and j["beside_unfused_s"] == pytest.approx(1.2e-3)
    r = korch("explain", d)
    assert r.returncode == 0 and "1200.0 us against 1800.0 us (1.50x)" in r.stdout, r.stdout
    assert doc(korch("explain", artifact[0], "--json"))["beside_unfused_s"] is None  # analytic: none


def test_json_errors_stay_one_stderr_line(tmp_path):
    assert_json_error(korch("inspect", tmp_path / "nope.onnx", "--json"))
    assert_json_error(korch("compile", tmp_path / "nope.onnx", "-o", tmp_path / "a", "--json"))
    assert_json_error(korch("run", "--artifact", tmp_path, "--random-inputs", "0", "--outputs", tmp_path / "o",
                            "--json"))
    assert_json_error(korch("explain", tmp_path, "--json"))
    r = korch("inspect", add_model(tmp_path / "m.onnx"), "--json", "--ir")  # an argument error (CLI11's words)
    assert r.returncode == 2 and r.stdout == "" and "--ir" in r.stderr, r.stderr
