#!/usr/bin/env python3
"""Compare Korch's reference interpreter with onnxruntime on one ONNX model.

    compare_with_ort.py MODEL.onnx [--korch build/korch] [--seed 0] [--tol 1e-4] [--threads 2]
    compare_with_ort.py MODEL.onnx --f64 [--backend reference|cpu] [--f64-factor 1] [--f64-floor 1e-4]

Runs ``<korch> run MODEL.onnx --backend reference --random-inputs SEED --outputs DIR``,
which writes every model input and every output as ``DIR/<name>.npy`` (``<name>``:
the ONNX tensor name with each char outside [A-Za-z0-9_.-] replaced by '_'). The
same inputs are fed to onnxruntime (CPU, graph optimizations disabled) and every
output is checked: rel = ||korch - ort||_2 / ||ort||_2 in float64 must be < tol.

Exit status: 0 all outputs within tol, 1 some output off (or missing),
2 korch binary missing or failed (its stderr is printed).
Library use: ``compare(model, korch, seed, tol, threads) -> Result``.

The float64 rule (``--f64``; library: ``compare_f64(...) -> F64Result``): a
fixed tolerance at model level mistakes float32 noise for a bug on an
ill-conditioned model (onnxruntime's own optimisation levels disagree by ~1e-3
on a trained detector) and could hide a bug on a well-conditioned one. So the
model also runs in float64 (``korch run --backend reference --f64``, the
interpreter with every float32 value widened), and each output of the Korch
run under test (``--backend``, default reference) counts as correct when
``rel(korch, f64) <= max(factor * rel(ort, f64), floor)``: no farther from
the float64 result than onnxruntime (float32, graph optimizations disabled)
is, times ``--f64-factor`` (1.0), and anything within ``--f64-floor`` (1e-4)
passes. All three distances (korch->f64, ort->f64, korch->ort) are printed.
It is an additional check: the fixed-tolerance one above is unchanged.
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
    return _run_korch(korch, [str(model), "--backend", "reference"], seed, out_dir)[0]


def _run_korch(korch: Path, args: list[str], seed: int, out_dir: Path) -> tuple[float, str]:
    """``korch run ARGS --random-inputs SEED --outputs OUT_DIR``: (wall seconds, stdout)."""
    if not korch.is_file() or not os.access(korch, os.X_OK):
        raise KorchError(f"korch binary not found or not executable: {korch} "
                         "(build it first, or pass --korch / set KORCH_BIN)")
    cmd = [str(korch), "run", *args, "--random-inputs", str(seed), "--outputs", str(out_dir)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise KorchError(f"korch failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"--- stderr ---\n{proc.stderr.rstrip()}")
    return wall, proc.stdout


def _ort_run(model: Path, feeds_dir: Path, threads: int,
             bound: dict[str, Path] | None = None) -> tuple[list[str], list[np.ndarray], float]:
    """onnxruntime (CPU, graph optimizations disabled) on the inputs korch wrote to
    ``feeds_dir`` (an input korch had bound to a file, ``bound``, from that file):
    (output names, outputs, seconds)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        f = (bound or {}).get(i.name) or feeds_dir / npy_name(i.name)
        if not f.is_file():
            raise KorchError(f"korch did not write input '{i.name}' as {f.name}")
        feeds[i.name] = np.load(f)
    names = [o.name for o in sess.get_outputs()]
    t0 = time.perf_counter()
    outs = sess.run(names, feeds)
    return names, outs, time.perf_counter() - t0


def compare(model: Path | str, korch: Path | str | None = None, seed: int = 0,
            tol: float = 1e-4, threads: int = 2, verbose: bool = True) -> Result:
    """Run korch and onnxruntime on ``model`` with korch's random inputs and
    check each output. Raises KorchError when korch is missing or fails."""
    model = Path(model)
    korch = Path(korch) if korch else default_korch()
    res = Result()
    log = print if verbose else (lambda *a, **k: None)
    with tempfile.TemporaryDirectory(prefix="korch_cmp_") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        res.korch_s = run_korch(korch, model, seed, out)
        names, ort_outs, res.ort_s = _ort_run(model, out, threads)

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


# --------------------------------------------------------------------------- #
# The float64 rule
# --------------------------------------------------------------------------- #
F64_FACTOR = 1.0   # korch may be this many times farther from f64 than onnxruntime is
F64_FLOOR = 1e-4   # a distance to f64 this small always passes


@dataclass
class F64Check:
    """One output under the float64 rule: relative L2 distances (float64 math)."""
    name: str
    korch_f64: float   # the Korch result under test -> the float64 reference
    ort_f64: float     # onnxruntime -> the float64 reference
    korch_ort: float   # the Korch result -> onnxruntime (what the fixed-tolerance check measures)
    bound: float       # max(factor * ort_f64, floor)
    ok: bool
    note: str = ""


@dataclass
class F64Result:
    checks: list[F64Check] = field(default_factory=list)
    backend: str = "reference"
    kept_f32: str = ""   # nodes the float64 run kept in float32 (korch's note), if any

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def f64_verdict(name: str, got: np.ndarray, ort_out: np.ndarray, f64_out: np.ndarray,
                factor: float = F64_FACTOR, floor: float = F64_FLOOR) -> F64Check:
    """The model-level rule for one output: ``got`` (a float32 Korch result) is
    correct when ``rel(got, f64) <= max(factor * rel(ort, f64), floor)``. A shape
    or dtype (got vs onnxruntime) mismatch fails."""
    if got.shape != ort_out.shape or got.shape != f64_out.shape:
        return F64Check(name, float("inf"), float("inf"), float("inf"), floor, False,
                        f"shapes korch {got.shape} ort {ort_out.shape} f64 {f64_out.shape}")
    k_f, o_f, k_o = rel_error(got, f64_out)[0], rel_error(ort_out, f64_out)[0], rel_error(got, ort_out)[0]
    bound = max(factor * o_f, floor)
    note = "" if got.dtype == ort_out.dtype else f"dtype {got.dtype} != ort {ort_out.dtype}"
    return F64Check(name, k_f, o_f, k_o, bound, k_f <= bound and not note, note)


def compare_f64(model: Path | str, korch: Path | str | None = None, seed: int = 0,
                backend: str = "reference", korch_args: tuple[str, ...] = (), threads: int = 2,
                factor: float = F64_FACTOR, floor: float = F64_FLOOR, verbose: bool = True,
                load_args: tuple[str, ...] = ()) -> F64Result:
    """The float64 rule on ``model`` with korch's seeded inputs: runs
    ``korch run --backend reference --f64`` (the reference), onnxruntime, and
    ``korch run --backend BACKEND KORCH_ARGS`` (the result under test; both korch
    runs draw the same inputs from SEED and take LOAD_ARGS, such as ``--shape``
    and ``--bind``), and checks every output with ``f64_verdict``. Raises KorchError when korch is missing or fails."""
    model = Path(model)
    korch = Path(korch) if korch else default_korch()
    res = F64Result(backend=backend)
    log = print if verbose else (lambda *a, **k: None)
    with tempfile.TemporaryDirectory(prefix="korch_f64_") as tmp:
        ref, out = Path(tmp) / "f64", Path(tmp) / "out"
        ref.mkdir()
        out.mkdir()
        _, said = _run_korch(korch, [str(model), *load_args, "--backend", "reference", "--f64"], seed, ref)
        res.kept_f32 = next((l for l in said.splitlines() if l.startswith("kept in float32")), "")
        _run_korch(korch, [str(model), *load_args, "--backend", backend, *korch_args], seed, out)
        bound = {v.split("=", 1)[0]: Path(v.split("=", 1)[1])
                 for flag, v in zip(load_args, load_args[1:]) if flag == "--bind"}
        names, ort_outs, _ = _ort_run(model, out, threads, bound)
        for name, want in zip(names, ort_outs):
            files = [d / npy_name(name) for d in (out, ref)]
            missing = [f"{f.parent.name}/{f.name}" for f in files if not f.is_file()]
            if missing:
                inf = float("inf")
                res.checks.append(F64Check(name, inf, inf, inf, floor, False, "missing " + ", ".join(missing)))
                continue
            got, f64 = (np.load(f) for f in files)
            res.checks.append(f64_verdict(name, got, want, f64, factor, floor))
    for c in res.checks:
        log(f"{'OK  ' if c.ok else 'FAIL'} {c.name:32s} korch->f64 {c.korch_f64:.3e}  ort->f64 {c.ort_f64:.3e}  "
            f"korch->ort {c.korch_ort:.3e}  bound {c.bound:.3e}{'  ' + c.note if c.note else ''}")
    log(f"f64 rule: korch ({backend}) -> f64 <= max({factor:g} x ort -> f64, {floor:g})"
        + (f"; {res.kept_f32}" if res.kept_f32 else ""))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--korch", type=Path, default=None,
                    help=f"korch binary (default $KORCH_BIN or {default_korch()})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    ap.add_argument("--f64", action="store_true",
                    help="apply the float64 rule instead of --tol (see above)")
    ap.add_argument("--backend", default="reference",
                    help="--f64: the korch backend under test (reference, cpu)")
    ap.add_argument("--f64-factor", type=float, default=F64_FACTOR)
    ap.add_argument("--f64-floor", type=float, default=F64_FLOOR)
    ap.add_argument("--shape", action="append", default=[],
                    help="--f64: passed to both korch runs (korch run --shape), repeatable")
    ap.add_argument("--bind", action="append", default=[],
                    help="--f64: passed to both korch runs (korch run --bind NAME=FILE.npy), repeatable")
    args = ap.parse_args(argv)
    if not args.model.is_file():
        ap.error(f"no such model: {args.model}")
    try:
        if args.f64:
            load = tuple(a for v in args.shape for a in ("--shape", v)) + \
                tuple(a for v in args.bind for a in ("--bind", v))
            res = compare_f64(args.model, args.korch, args.seed, args.backend, threads=args.threads,
                              factor=args.f64_factor, floor=args.f64_floor, load_args=load)
        else:
            res = compare(args.model, args.korch, args.seed, args.tol, args.threads)
    except KorchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
