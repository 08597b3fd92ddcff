"""`korch cache info|clear` and `korch devices`: what the machine and the cache hold, in a folder
of our own (KORCH_CACHE_DIR), never touching what is not Korch's."""
import json
import os
import subprocess
from pathlib import Path

from test_cli_errors import assert_clean_error, relu_model

KORCH = os.environ.get("KORCH_BIN", str(Path(__file__).resolve().parents[2] / "build" / "korch"))


def korch(cache, *args, **env):
    e = dict(os.environ, KORCH_CACHE_DIR=str(cache), KORCH_PROGRESS="0", **env)
    return subprocess.run([KORCH, *map(str, args)], capture_output=True, text=True, timeout=300, env=e)


def test_devices_lists_cpu_and_says_why_not_cuda(tmp_path):
    r = korch(tmp_path, "devices")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("cpu   compile, run, measured costs:"), r.stdout
    assert "cuda  " in r.stdout
    j = json.loads(korch(tmp_path, "devices", "--json").stdout)
    assert j["cpu"]["run"] and j["cpu"]["cores"] >= 1
    assert j["cuda"]["compile"] is True
    if not j["cuda"]["run"]:
        assert j["cuda"]["why_not"], j  # a machine without a GPU is told why


def test_cache_info_and_clear(tmp_path):
    cache = tmp_path / "cache"
    model = relu_model(tmp_path / "m.onnx")
    r = korch(cache, "compile", model, "-o", tmp_path / "art")
    assert r.returncode == 0, r.stderr
    (cache / "notes.txt").write_text("not korch's")
    info = json.loads(korch(cache, "cache", "info", "--json").stdout)
    assert info["root"] == str(cache)
    by_name = {e["name"]: e for e in info["entries"]}
    assert by_name["kernels"]["files"] > 0 and by_name["kernels"]["bytes"] > 0
    assert by_name["tuning.db"]["exists"] and by_name["tuning.db"]["records"] > 0
    text = korch(cache, "cache", "info").stdout
    assert "kernels" in text and "records" in text and "cap" in text

    r = korch(cache, "cache", "clear")
    assert r.returncode == 0, r.stderr
    assert "removed" in r.stdout
    assert not any((cache / "kernels").iterdir())
    assert (cache / "tuning.db").exists()  # measured costs only when asked by name
    assert (cache / "notes.txt").exists()
    # The artifact keeps its own library: it still runs.
    r = korch(cache, "run", "--artifact", tmp_path / "art", "--random-inputs", "1", "--outputs", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    r = korch(cache, "cache", "clear", "--tuning-db")
    assert r.returncode == 0 and not (cache / "tuning.db").exists(), r.stdout + r.stderr
    assert (cache / "notes.txt").exists()


def test_compile_keeps_the_kernel_cache_under_its_cap(tmp_path):
    cache = tmp_path / "cache"
    r = korch(cache, "compile", relu_model(tmp_path / "m.onnx"), "-o", tmp_path / "art", KORCH_CACHE_MAX_SIZE="0")
    assert r.returncode == 0, r.stderr
    assert "kernel cache over its" in r.stdout + r.stderr
    assert not [p for p in (cache / "kernels").iterdir() if ".tmp" not in p.name]


def test_bad_sizes_are_argument_errors(tmp_path):
    r = korch(tmp_path, "cache", "clear", "--keep", "lots")
    assert r.returncode == 2
    assert_clean_error(r, "--keep", "lots")
    r = korch(tmp_path, "compile", relu_model(tmp_path / "m.onnx"), "-o", tmp_path / "art", KORCH_CACHE_MAX_SIZE="big")
    assert_clean_error(r, "KORCH_CACHE_MAX_SIZE", "big")
