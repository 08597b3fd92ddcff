#!/usr/bin/env python3
"""Trained models that third parties ship inside PyPI packages, through Korch's CPU backend, judged
by the float64 rule against onnxruntime (issue 16's acceptance).

    .venv/bin/python bench/wild_models.py [--models a,b] [--cost analytic|measured] [--bench]
                                          [--out bench/results/wild_models.md]

Each package is downloaded once with `pip download --no-deps PACKAGE==VERSION` into
$KORCH_CACHE_DIR/wild (default ~/.cache/korch/wild) and its ONNX files unpacked there; nothing is
committed. Every model then runs `scripts/compare_with_ort.py`'s float64 rule: `korch run --backend
reference --f64` is the ground truth, and the Korch CPU artifact (`korch run --backend cpu`, seeded
random inputs) passes when it is no farther from it than onnxruntime (float32, graph optimizations
off) is, or within 1e-4. Symbolic dimensions are fixed with --shape and setting inputs bound with
--bind, as a user would. A model Korch refuses is a row with the error. Two rows are quantized here
from a shipped model with onnxruntime.quantization (the packages ship one dynamically quantized
model, none in QDQ form). --bench adds `korch bench --artifact` medians against onnxruntime and
OpenVINO (2 threads, alternating rounds).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import compare_with_ort  # noqa: E402

PIP = [sys.executable, "-m", "pip"]


@dataclass
class Model:
    name: str
    package: str            # PACKAGE==VERSION
    member: str             # the ONNX file inside the wheel
    what: str               # what it is, for the table
    shapes: list[str] = field(default_factory=list)
    binds: dict[str, object] = field(default_factory=dict)  # input -> value written to .npy
    quantize: str = ""      # "", "qdq": quantize_static (QDQ, random calibration) before the run


MODELS = [
    Model("ppocr_det", "rapidocr_onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          "text detection (PP-OCRv4, DB)", ["x=1x3x640x640"]),
    Model("ppocr_rec", "rapidocr_onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          "text recognition (PP-OCRv4, SVTR)", ["x=1x3x48x320"]),
    Model("ppocr_cls", "rapidocr_onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "text direction classifier (MobileNetV3)", ["x=1x3x48x192"]),
    Model("ppocr_cls_qdq", "rapidocr_onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "the classifier, static QDQ (quantized here)", ["x=1x3x48x192"], quantize="qdq"),
    Model("ddddocr_rec", "ddddocr==1.6.1", "ddddocr/common.onnx", "captcha OCR, CNN + bidirectional LSTM",
          ["image_width=160"]),
    Model("ddddocr_rec_dynq", "ddddocr==1.6.1", "ddddocr/common_old.onnx",
          "captcha OCR, dynamically quantized (ConvInteger, uint8 weights, DynamicQuantizeLSTM)", ["image_width=160"]),
    Model("ddddocr_det", "ddddocr==1.6.1", "ddddocr/common_det.onnx", "detector (YOLOX-style)"),
    Model("magika", "magika==1.0.3", "magika/models/standard_v3_3/model.onnx", "file-type classifier on bytes",
          ["unk__214=1"]),
    Model("silero_vad", "silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx",
          "voice activity (If on the sample rate, opset 16)", ["input=1x512", "state=2x1x128"], {"sr": 16000}),
    Model("silero_vad_op18", "silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
          "voice activity (If, opset 18)", ["input=1x512", "state=2x1x128"], {"sr": 16000}),
    Model("silero_vad_op15", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
          "voice activity (three Ifs, opset 15)", ["input=1x512", "state=2x1x128"], {"sr": 16000}),
    Model("silero_vad_half", "silero-vad==6.2.3", "silero_vad/data/silero_vad_half.onnx",
          "voice activity, float16 weights", ["input=1x512", "state=2x1x128"]),
]


def cache_dir() -> Path:
    base = Path(os.environ.get("KORCH_CACHE_DIR") or Path.home() / ".cache" / "korch")
    return base / "wild"


def fetch(m: Model) -> Path:
    """The model's ONNX file, downloaded and unpacked once."""
    root = cache_dir()
    pkg, ver = m.package.split("==")
    dest = root / f"{pkg}-{ver}" / m.member
    if dest.is_file():
        return dest
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(PIP + ["download", "--no-deps", "--only-binary", ":all:", "-d", str(wheels), m.package],
                   check=True, capture_output=True)
    norm = pkg.replace("-", "_").lower()
    whl = next(w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{norm}-{ver}-"))
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if info.filename.endswith(".onnx"):
                z.extract(info, root / f"{pkg}-{ver}")
    return dest


def quantize_qdq(src: Path, shapes: list[str]) -> Path:
    """quantize_static (QDQ, uint8 activations, int8 weights, reduce_range) with 4 seeded random
    calibration batches of the --shape given for the input."""
    from onnxruntime import quantization
    import onnx

    dst = src.with_name(src.stem + ".qdq.onnx")
    if dst.is_file():
        return dst
    name, dims = shapes[0].split("=")
    shape = [int(d) for d in dims.split("x")]
    # Fix the symbolic dims first: the quantizer's shape inference needs them.
    model = onnx.load(src)
    for d, v in zip(model.graph.input[0].type.tensor_type.shape.dim, shape):
        d.dim_value = v
    fixed = src.with_name(src.stem + ".fixed.onnx")
    onnx.save(model, fixed)
    rng = np.random.default_rng(16)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: rng.uniform(0, 1, shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    quantization.quantize_static(fixed, dst, Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8, reduce_range=True)
    return dst


def korch_bench(korch: Path, art: Path, load_args: tuple[str, ...], runs: int, rounds: int) -> dict:
    """`korch bench` of the artifact the checked run kept (the --bind values go to the peers)."""
    env = dict(os.environ, KORCH_PROGRESS="0")
    binds = [a for flag, v in zip(load_args, load_args[1:]) if flag == "--bind" for a in (flag, v)]
    r = subprocess.run([str(korch), "bench", "--artifact", str(art), "--runs", str(runs), "--rounds", str(rounds),
                        "--no-unfused", *binds], capture_output=True, text=True, env=env)
    out = {}
    for line in r.stdout.splitlines():
        mm = re.match(r"\s+(korch|onnxruntime|openvino)\s+([0-9.]+)", line)
        if mm:
            out[mm.group(1)] = float(mm.group(2))
        mm = re.match(r"\s+(onnxruntime|openvino)\s+\S+ did not run: (.*)", line)
        if mm:
            out[mm.group(1) + "_note"] = mm.group(2).strip()
    if r.returncode != 0 and not out:
        out["error"] = (r.stderr.strip().splitlines() or ["bench failed"])[-1]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--korch", type=Path, default=compare_with_ort.default_korch())
    ap.add_argument("--cost", choices=["analytic", "measured"], default="analytic")
    ap.add_argument("--bench", action="store_true", help="also time the artifacts against the peers")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    args = ap.parse_args(argv)
    import onnxruntime
    onnxruntime.set_default_logger_severity(3)  # the shipped models' unused-initializer warnings
    wanted = [s for s in args.models.split(",") if s]
    models = [m for m in MODELS if not wanted or m.name in wanted]
    if wanted and len(models) != len(wanted):
        ap.error(f"unknown model in {wanted}; known: {', '.join(m.name for m in MODELS)}")

    rows = []
    for m in models:
        t0 = time.perf_counter()
        row = {"name": m.name, "what": m.what, "package": m.package}
        try:
            path = fetch(m)
            if m.quantize == "qdq":
                path = quantize_qdq(path, m.shapes)
            load = tuple(a for s in m.shapes for a in ("--shape", s))
            for inp, value in m.binds.items():
                f = cache_dir() / f"bind_{inp}_{value}.npy"
                np.save(f, np.array(value, dtype=np.int64))
                load += ("--bind", f"{inp}={f}")
            # The artifact the checked run compiled is the one --bench times (not a second compile).
            art = cache_dir() / "artifacts" / path.stem
            res = compare_with_ort.compare_f64(path, args.korch, 0, "cpu",
                                               ("--cost", args.cost, "--save-artifact", str(art)),
                                               verbose=False, load_args=load)
            worst = max(res.checks, key=lambda c: c.korch_f64 / max(c.bound, 1e-30))
            row.update(ok=res.ok, outputs=len(res.checks), korch_f64=worst.korch_f64, ort_f64=worst.ort_f64,
                       korch_ort=worst.korch_ort, note=worst.note)
            if args.bench and res.ok:
                row.update(korch_bench(args.korch, art, load, args.runs, args.rounds))
        except compare_with_ort.KorchError as e:
            msg = [l for l in str(e).splitlines() if l.startswith("korch: error")]
            row.update(ok=False, error=(msg[-1] if msg else str(e).splitlines()[0]))
        except subprocess.CalledProcessError as e:
            row.update(ok=False, error=f"{' '.join(map(str, e.cmd[:3]))} failed: {(e.stderr or b'')[-300:]!r}")
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(json.dumps(row), flush=True)

    lines = [f"Command: `.venv/bin/python bench/wild_models.py --cost {args.cost}{' --bench' if args.bench else ''}`  ",
             "Rule: each output of the Korch CPU artifact is no farther (relative L2) from `korch run --backend reference --f64` "
             "than onnxruntime (graph optimizations off) is, or within 1e-4; the worst output of each model is shown.", "",
             "| model | package | what | result | korch→f64 | ort→f64 | korch→ort | seconds |"
             + (" korch ms | onnxruntime ms | openvino ms | vs faster peer |" if args.bench else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|---|---|" if args.bench else "")]
    for r in rows:
        if "error" in r:
            cells = ["refused: " + r["error"].replace("|", "\\|"), "-", "-", "-"]
        else:
            cells = ["OK" if r["ok"] else "FAIL", f"{r['korch_f64']:.2e}", f"{r['ort_f64']:.2e}", f"{r['korch_ort']:.2e}"]
        line = f"| {r['name']} | {r['package']} | {r['what']} | " + " | ".join(cells) + f" | {r['seconds']:.0f} |"
        if args.bench:
            line += " " + " | ".join(f"{r[k]:.2f}" if k in r else "-" for k in ("korch", "onnxruntime", "openvino")) + " |"
            peers = [r[k] for k in ("onnxruntime", "openvino") if k in r]
            line += f" {min(peers) / r['korch']:.2f}x |" if peers and "korch" in r else " - |"
        lines.append(line)
    ok = sum(1 for r in rows if r.get("ok"))
    lines += ["", f"{ok} of {len(rows)} models pass."]
    notes = [f"- {r['name']}: {k.split('_')[0]} did not run: {r[k]}" for r in rows for k in ("onnxruntime_note", "openvino_note")
             if k in r]
    if notes:
        lines += ["", "Peers that did not run:"] + notes
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
