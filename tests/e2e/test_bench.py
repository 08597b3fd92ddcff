"""`korch bench`: Korch, onnxruntime, OpenVINO and the unfused plan in the same alternating rounds.

Times nothing that matters (a tiny model, few runs): checks that every system ran, that the JSON
names the faster peer, and that a peer asked for with --peers that cannot run fails the bench
(with its reason, in the JSON too) while a default peer that cannot run is only reported, and
that the unfused plan is built with the artifact's cost source.
"""
import json
import os
import subprocess

import pytest

import compare_with_ort

KORCH = str(compare_with_ort.default_korch())


def bench(tmp_path, *args, env=None, ok=True, cost="analytic"):
    js = tmp_path / "bench.json"
    env = dict(env or os.environ, KORCH_CACHE_DIR=str(tmp_path / "cache"), KORCH_PROGRESS="0")
    r = subprocess.run([KORCH, "bench", "builtin:tiny_convnet", "--runs", "3", "--rounds", "2", "--warmup", "1",
                        "--cost", cost, "--json", str(js), *args], capture_output=True, text=True, env=env,
                       timeout=600)
    assert (r.returncode == 0) == ok, r.stdout + r.stderr
    return r.stdout + r.stderr, json.loads(js.read_text())


def test_bench_peers(tmp_path):
    out, j = bench(tmp_path)
    for system in ("korch", "onnxruntime", "openvino", "korch_unfused"):
        assert system in j and j[system].get("median_ms", 0) > 0, (system, out)
    assert j["onnxruntime"]["note"].startswith("onnxruntime ") and j["openvino"]["note"].startswith("openvino ")
    faster = min(("onnxruntime", "openvino"), key=lambda p: j[p]["median_ms"])
    assert j["faster_peer"] == faster
    assert "the faster peer" in out and "korch speedup" in out
    # Two rounds of three runs each: every timed run counted once per system.
    assert "2 rounds x 3 runs" in out
    # Each system's round medians, and each speedup paired by round (the mean of two round ratios).
    for system in ("korch", "onnxruntime", "openvino", "korch_unfused"):
        assert len(j[system]["round_medians_ms"]) == 2, (system, j[system])
    k = j["korch"]["round_medians_ms"]
    assert j["korch"]["round_range"] == max(k) / min(k), j["korch"]
    for p in ("onnxruntime", "openvino"):
        ratios = [a / b for a, b in zip(j[p]["round_medians_ms"], k)]
        assert abs(j[p]["speedup_paired"] - sum(ratios) / 2) < 1e-9 * j[p]["speedup_paired"], j[p]
    assert j["korch_unfused"]["gain_paired"] > 0 and "paired by round" in out
    # The machine's pace before each round: its probe over the fastest the database has seen (the
    # first probe of a fresh database is its own best: 1).
    pace = j["korch"]["pace_by_round"]
    assert len(pace) == 2 and all(p >= 1 for p in pace), pace
    assert "machine pace before each round" in out
    # And around each system's runs: the slower of the probes either side, so never below the round's
    # first probe for Korch, whose runs come first; paired over the rounds at pace for both.
    for system in ("korch", "onnxruntime", "openvino", "korch_unfused"):
        around = j[system]["pace_around_runs"]
        assert len(around) == 2 and all(p >= 1 for p in around), (system, around)
    assert all(a >= p for a, p in zip(j["korch"]["pace_around_runs"], pace)), j["korch"]
    assert "where both systems' runs met the machine at its pace: onnxruntime" in out, out
    assert j["korch_unfused"]["cost_model"].startswith("analytic"), j["korch_unfused"]  # as the artifact's


@pytest.mark.timing  # measured costs: run serially (tests/CMakeLists.txt)
def test_bench_unfused_plan_takes_the_artifacts_measured_variants(tmp_path):
    # With measured costs the unfused plan's kernels are the variants the tuning database measured
    # fastest (Winograd, layout formats), as compile's own unfused baseline: with analytic costs
    # candy's unfused plan ran without its Winograd convolutions, 2x slower than compile's, and bench
    # printed a 2.35x fusion gain where compile printed 1.21x.
    out, j = bench(tmp_path, "--peers", "none", cost="measured")
    assert j["korch_unfused"]["cost_model"].startswith("measured"), j["korch_unfused"]
    assert j["korch_unfused"]["median_ms"] > 0 and j["korch_unfused"]["agreement"] < 1e-4, out


def test_bench_without_peers_and_with_a_missing_one(tmp_path):
    out, j = bench(tmp_path, "--peers", "none", "--no-unfused")
    assert "onnxruntime" not in j and "openvino" not in j and "faster_peer" not in j
    # A Python without the peers. Asked for by name: the row and the JSON say why, and the bench
    # fails (its numbers are still printed and written). By default: reported, not fatal.
    env = dict(os.environ, KORCH_PYTHON="/bin/false")
    out, j = bench(tmp_path, "--peers", "openvino", "--no-unfused", env=env, ok=False)
    assert "error" in j["openvino"] and "openvino did not run" in out, out
    assert "korch: error: --peers openvino did not run" in out, out
    assert j["korch"]["median_ms"] > 0
    out, j = bench(tmp_path, "--no-unfused", env=env)
    assert "error" in j["openvino"] and "error" in j["onnxruntime"], j
