"""`korch run --artifact`: a hand-made artifact runs (and its missing library is rebuilt), and a
folder that is not an artifact gives a one-line error naming it.

The artifact is written by hand, in the format of src/runtime/artifact.cc, so this runs before the
compile command emits real ones.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

KORCH = os.environ.get("KORCH_BIN", str(Path(__file__).resolve().parents[2] / "build" / "korch"))


def korch(*args):
    return subprocess.run([KORCH, *map(str, args)], capture_output=True, text=True, timeout=120)


def assert_clean_error(r, *needles):
    assert r.returncode != 0, r.stdout
    assert 0 < r.returncode < 128, f"crashed: rc={r.returncode} stderr={r.stderr}"
    lines = [l for l in r.stderr.strip().splitlines() if l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("korch: error: "), r.stderr
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"


def buffer(i, kind, name, shape, **extra):
    n = int(np.prod(shape)) * 4
    return {"id": i, "kind": kind, "name": name, "dtype": "f32", "shape": shape, "bytes": n, **extra}


def ty(shape):
    return {"dtype": "f32", "shape": shape}


def weights_checksum(blob: bytes) -> str:
    """support/hash.h bytes_checksum: FNV-1a over little-endian 8-byte words, then the tail bytes."""
    mask = (1 << 64) - 1
    h = 1469598103934665603 ^ len(blob)
    whole = len(blob) // 8 * 8
    for i in range(0, whole, 8):
        h ^= int.from_bytes(blob[i:i + 8], "little")
        h = (h * 1099511628211) & mask
        h ^= h >> 29
    for c in blob[whole:]:
        h ^= c
        h = (h * 1099511628211) & mask
    return f"{h:016x}"


def write_artifact(d: Path):
    """y = (a + b) * w, one fused kernel, w a weight; outputs y and a copy of input b."""
    (d / "kernels").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"format": "korch-artifact", "version": 1, "device": "cpu"}))
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    blob = w.tobytes() + bytes(64 - w.nbytes)
    (d / "weights.bin").write_bytes(blob)
    program = {
        "format": "korch-program", "version": 1,
        "buffers": [buffer(0, "input", "in:a", [2, 3], index=0), buffer(1, "input", "b", [2, 3], index=1),
                    buffer(2, "output", "out/y", [2, 3], index=0), buffer(3, "output", "b", [2, 3], index=1, copy_from=1),
                    buffer(4, "weight", "w", [2, 3], offset=0)],
        "inputs": [0, 1], "outputs": [2, 3], "input_names": ["in:a", "b"], "output_names": ["out/y", "b"],
        "kernels": [{"recipe": {"symbol": "k0", "inputs": [ty([2, 3])] * 3, "outputs": [ty([2, 3])],
                                "scratch_bytes": []}, "args": [0, 1, 4, 2], "note": "Add, Mul"}],
        "arena_bytes": 0, "weights_bytes": 64, "weights_checksum": weights_checksum(blob),
        "memory": {"arena_bytes": 0, "unfused_arena_bytes": 64, "intermediate_bytes": 0, "weights_bytes": 64},
    }
    (d / "program.json").write_text(json.dumps(program))
    (d / "kernels" / "kernels.cc").write_text(
        'extern "C" void k0(void* const* args) {\n'
        "  const float* a = (const float*)args[0]; const float* b = (const float*)args[1];\n"
        "  const float* w = (const float*)args[2]; float* y = (float*)args[3];\n"
        "  for (int i = 0; i < 6; ++i) y[i] = (a[i] + b[i]) * w[i];\n}\n")
    (d / "kernels" / "build.sh").write_text(
        'set -e\ncase "$0" in */*) cd "${0%/*}" ;; esac\n'
        "g++ -O2 -fPIC -shared kernels.cc -o libkernels.so.tmp\nmv -f libkernels.so.tmp libkernels.so\n")
    return w


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the kernels")
def test_hand_made_artifact_runs(tmp_path):
    art = tmp_path / "art"
    w = write_artifact(art)
    ins = tmp_path / "ins"
    ins.mkdir()
    a = np.random.default_rng(0).standard_normal((2, 3), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((2, 3), dtype=np.float32)
    np.save(ins / "in_a.npy", a)
    np.save(ins / "b.npy", b)
    r = korch("run", "--artifact", art, "--inputs", ins, "--outputs", tmp_path / "out", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "rebuilt" in r.stdout  # no libkernels.so was shipped
    np.testing.assert_allclose(np.load(tmp_path / "out" / "out_y.npy"), (a + b) * w, rtol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "b.npy"), b)

    # Seeded inputs are written next to the outputs; the library now exists.
    r = korch("run", "--artifact", art, "--random-inputs", 3, "--outputs", tmp_path / "rnd")
    assert r.returncode == 0, r.stderr
    assert "rebuilt" not in r.stdout
    ra, rb = np.load(tmp_path / "rnd" / "in_a.npy"), np.load(tmp_path / "rnd" / "b.npy")
    np.testing.assert_allclose(np.load(tmp_path / "rnd" / "out_y.npy"), (ra + rb) * w, rtol=1e-6)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the kernels")
def test_artifact_wrong_input_shape(tmp_path):
    art = tmp_path / "art"
    write_artifact(art)
    ins = tmp_path / "ins"
    ins.mkdir()
    np.save(ins / "in_a.npy", np.zeros((2, 3), np.float32))
    np.save(ins / "b.npy", np.zeros((3, 2), np.float32))
    assert_clean_error(korch("run", "--artifact", art, "--inputs", ins, "--outputs", tmp_path / "o"), "'b'", "f32[2,3]")


def test_artifact_missing_dir(tmp_path):
    missing = tmp_path / "nope"
    r = korch("run", "--artifact", missing, "--random-inputs", 1, "--outputs", tmp_path / "out")
    assert_clean_error(r, str(missing), "does not exist")


def test_artifact_dir_without_manifest(tmp_path):
    r = korch("run", "--artifact", tmp_path, "--random-inputs", 1, "--outputs", tmp_path / "out")
    assert_clean_error(r, "not a Korch artifact", "manifest.json")


def test_artifact_corrupt_program(tmp_path):
    art = tmp_path / "art"
    write_artifact(art)
    (art / "program.json").write_text("{ not json")
    r = korch("run", "--artifact", art, "--random-inputs", 1, "--outputs", tmp_path / "out")
    assert_clean_error(r, "program.json")


def test_run_needs_model_or_artifact(tmp_path):
    assert_clean_error(korch("run", "--random-inputs", 1, "--outputs", tmp_path / "out"), "--artifact")
