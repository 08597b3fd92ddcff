#!/usr/bin/env python3
"""Compare Korch's reference interpreter with onnxruntime on one ONNX model.

    compare_with_ort.py MODEL.onnx [--korch build/korch] [--seed 0] [--tol 1e-4] [--threads 2]

Runs ``<korch> run MODEL.onnx --backend reference --random-inputs SEED --outputs DIR``,
which writes every model input and every output as ``DIR/<name>.npy`` (``<name>``:
the ONNX tensor name with each char outside [A-Za-z0-9_.-] replaced by '_'). The
same inputs are fed to onnxruntime (CPU, graph optimizations disabled) and every
output is checked: rel = ||korch - ort||_2 / ||ort||_2 in float64 must be < tol.

Exit status: 0 all outputs within tol, 1 some output off (or missing),
2 korch binary missing or failed (its stderr is printed).
Library use: ``compare(model, korch, seed, tol, threads) -> Result``.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def default_korch() -> Path:
    return Path(os.environ.get("KORCH_BIN") or REPO / "build" / "korch")


def npy_name(tensor_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tensor_name) + ".npy"


class KorchError(RuntimeError):
    """The korch binary is missing, failed, or broke the output contract."""


@dataclass
class OutputCheck:
    name: str
    rel_err: float
    max_abs: float
    ok: bool
    note: str = ""


@dataclass
class Result:
    checks: list[OutputCheck] = field(default_factory=list)
    korch_s: float = 0.0
    ort_s: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def rel_error(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(||got-want|| / ||want||, max |got-want|) in float64. Positions where both
    are NaN, or both the same infinity, count as equal; any other non-finite
    mismatch gives inf. An all-zero reference falls back to the absolute norm."""
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    same = (np.isnan(g) & np.isnan(w)) | (np.isinf(w) & (g == w))
    g, w = g[~same], w[~same]
    if not (np.isfinite(g).all() and np.isfinite(w).all()):
        return float("inf"), float("inf")
    if g.size == 0:
        return 0.0, 0.0
    diff = np.linalg.norm(g - w)
    ref = np.linalg.norm(w)
    return float(diff / ref if ref > 0 else diff), float(np.abs(g - w).max())


def run_korch(korch: Path, model: Path, seed: int, out_dir: Path) -> float:
    """Run the reference backend; return its wall time in seconds."""
    if not korch.is_file() or not os.access(korch, os.X_OK):
        raise KorchError(f"korch binary not found or not executable: {korch} "
                         "(build it first, or pass --korch / set KORCH_BIN)")
    cmd = [str(korch), "run", str(model), "--backend", "reference",
           "--random-inputs", str(seed), "--outputs", str(out_dir)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise KorchError(f"korch failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"--- stderr ---\n{proc.stderr.rstrip()}")
    return wall


def compare(model: Path | str, korch: Path | str | None = None, seed: int = 0,
            tol: float = 1e-4, threads: int = 2, verbose: bool = True) -> Result:
    """Run korch and onnxruntime on ``model`` with korch's random inputs and
    check each output. Raises KorchError when korch is missing or fails."""
    import onnxruntime as ort

    model = Path(model)
    korch = Path(korch) if korch else default_korch()
    res = Result()
    log = print if verbose else (lambda *a, **k: None)
    with tempfile.TemporaryDirectory(prefix="korch_cmp_") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        res.korch_s = run_korch(korch, model, seed, out)

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])

        feeds = {}
        for i in sess.get_inputs():
            f = out / npy_name(i.name)
            if not f.is_file():
                raise KorchError(f"korch did not write input '{i.name}' as {f.name}")
            feeds[i.name] = np.load(f)
        names = [o.name for o in sess.get_outputs()]
        t0 = time.perf_counter()
        ort_outs = sess.run(names, feeds)
        res.ort_s = time.perf_counter() - t0

        for name, want in zip(names, ort_outs):
            f = out / npy_name(name)
            if not f.is_file():
                res.checks.append(OutputCheck(name, float("inf"), float("inf"), False,
                                              f"missing {f.name}"))
                continue
            got = np.load(f)
            if got.shape != want.shape:
                res.checks.append(OutputCheck(name, float("inf"), float("inf"), False,
                                              f"shape {got.shape} != ort {want.shape}"))
                continue
            rel, mx = rel_error(got, want)
            note = "" if got.dtype == want.dtype else f"dtype {got.dtype} != ort {want.dtype}"
            res.checks.append(OutputCheck(name, rel, mx, rel < tol and not note, note))

    for c in res.checks:
        log(f"{'OK  ' if c.ok else 'FAIL'} {c.name:32s} rel {c.rel_err:.3e}  "
            f"max_abs {c.max_abs:.3e}{'  ' + c.note if c.note else ''}")
    log(f"korch {res.korch_s * 1e3:.1f} ms (wall, whole process)  "
        f"ort {res.ort_s * 1e3:.1f} ms ({threads} threads, no graph opt)  tol {tol:g}")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--korch", type=Path, default=None,
                    help=f"korch binary (default $KORCH_BIN or {default_korch()})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    args = ap.parse_args(argv)
    if not args.model.is_file():
        ap.error(f"no such model: {args.model}")
    try:
        res = compare(args.model, args.korch, args.seed, args.tol, args.threads)
    except KorchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
