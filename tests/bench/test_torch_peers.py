"""`korch bench --peers torch-eager --torch-model pad_pool_net`: PyTorch eager (bench/gpu_peers.py --serve,
one child process for all rounds) timed beside a small CPU artifact in the same rounds.

Times nothing that matters (one round of two runs): checks that the peer ran, that its row and JSON
entry are there with what the peer process reported (torch version, TF32 off, the inputs), and
that the output says every row is host to host; then the torch-compile peer's way through, with the
eager model standing in for torch.compile. Skipped, with the reason, where the Python the peers run
on has no torch. The peers' Python is this test's (KORCH_PYTHON)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
KORCH = os.environ.get("KORCH_BIN") or str(REPO / "build" / "korch")
MODEL = "pad_pool_net"  # 1x3x30x30: the whole test takes seconds (candy: half a minute)


def torch_missing():
    r = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    return r.returncode != 0 and (r.stderr.strip().splitlines() or ["import torch failed"])[-1]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """The model compiled for the CPU (analytic costs: nothing measured), and the environment."""
    missing = torch_missing()
    if missing:
        pytest.skip(f"no torch in {sys.executable} ({missing}): the PyTorch peers cannot run")
    import export_models
    onnx_file = export_models.export(MODEL, 1, verbose=False)
    tmp = tmp_path_factory.mktemp("torch_peers")
    env = dict(os.environ, KORCH_CACHE_DIR=str(tmp / "cache"), KORCH_PROGRESS="0", KORCH_PYTHON=sys.executable)
    art = tmp / f"{MODEL}.korch"
    r = subprocess.run([KORCH, "compile", str(onnx_file), "--cost", "analytic", "-o", str(art)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return art, env


def bench(tmp_path, artifact, *args):
    art, env = artifact
    js = tmp_path / "bench.json"
    r = subprocess.run([KORCH, "bench", "--artifact", str(art), "--torch-model", MODEL, "--rounds", "1", "--runs", "2",
                        "--warmup", "1", "--no-unfused", "--json", str(js), "--work", str(tmp_path / "work"), *args],
                       capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    return out, json.loads(js.read_text())


def test_bench_torch_eager_peer(tmp_path, artifact):
    out, j = bench(tmp_path, artifact, "--peers", "torch-eager")
    row = [line for line in out.splitlines() if line.strip().startswith("torch-eager")]
    assert row and "korch speedup" in row[0] and "tf32 off" in row[0], out
    assert "host to host" in out and "host to host" in j["timing"], out
    assert j["torch-eager"]["median_ms"] > 0 and j["torch-eager"]["note"].startswith("torch "), j
    assert "torch-compile" not in j, j  # not asked for
    peer = j["torch_peers"]
    assert peer["ready"] and peer["model"] == MODEL and peer["batch"] == 1 and peer["tf32"] is False, peer
    assert peer["inputs"] == [{"shape": [1, 3, 30, 30], "dtype": "float32"}], peer
    assert peer["timer"] == "perf_counter, host to host", peer
    # The peer process was asked to quit and is gone; its stderr went to the work folder.
    assert (tmp_path / "work" / "torch_peers.stderr.txt").exists()


def test_bench_torch_compile_peer_plumbing(tmp_path, artifact):
    # torch.compile itself (absent from torch 1.x, minutes of Inductor on a CPU) is stood in for by
    # the eager model: what is tested is the compile peer's way through --serve and korch bench.
    shim = tmp_path / "gpu_peers_shim.py"
    shim.write_text("import runpy, sys, types\nimport torch\n"
                    "torch.compile = lambda m, dynamic=False: (lambda *a: m(*a))\n"
                    "torch._dynamo = types.SimpleNamespace(reset=lambda: None)\n"
                    f"sys.argv[0] = {str(REPO / 'bench' / 'gpu_peers.py')!r}\n"
                    "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    out, j = bench(tmp_path, artifact, "--peers", "torch-eager,torch-compile", "--torch-script", str(shim))
    assert j["torch-compile"]["median_ms"] > 0 and "matches eager" in j["torch-compile"]["note"], j
    assert j["torch_peers"]["compile_mode"] == "default (dynamic=False)" and j["torch_peers"]["compile_s"] >= 0, j
    assert j["faster_peer"] in ("torch-eager", "torch-compile")
    assert "compiled in" in out and "the faster peer" in out, out
