"""int8-quantized models: Korch vs onnxruntime vs OpenVINO on the same quantized ONNX file, plus a
correctness check of Korch against onnxruntime.

  .venv/bin/python bench/quantized_latency.py [--models resnet18,mobilenet_v2,...] [--kinds static_qdq,dynamic]
                                              [--runs 20] [--rounds 3] [--warmup 5] [--threads 2]
                                              [--cost measured|analytic] [--per-channel] [--korch PATH]
                                              [--out bench/results/quantized_latency.md]

For each model (default: bench_common.DEFAULT_MODELS) and kind:
  1. export the fp32 model (scripts/export_models.py, cached under .cache/models);
  2. quantize it with onnxruntime.quantization, cached as .cache/models/quantized/<model>_<kind>[_pc].onnx
     (git-ignored): static_qdq = quantize_static, QuantFormat.QDQ, activations QUInt8, weights QInt8,
     calibrated (MinMax) on 8 seeded batches (numpy default_rng(0)) drawn like Korch's --random-inputs and the
     peers' feeds (floats U(-1, 1), integers [0, 10)); dynamic = quantize_dynamic, weights QInt8. Both with
     reduce_range=True (7-bit weights: onnxruntime's u8s8 kernels without VNNI saturate pairs of products at
     int16 otherwise, see tests/e2e/test_quantized.py); per-tensor weights unless --per-channel.
     onnx.checker runs on the result;
  3. `korch compile` (timed; its kernel count and any line about reference-interpreter / unchecked kernels kept);
  4. correctness: `korch run --backend reference --random-inputs 1` writes seeded inputs, the artifact runs on
     them, onnxruntime runs them with ORT_ENABLE_ALL and with ORT_DISABLE_ALL. Reported: relative L2 (worst
     output) of Korch vs each, and of ORT-all vs ORT-none, the noise floor of quantized arithmetic (fusions
     change float rounding before a QuantizeLinear; one quantum flips are expected). Outputs must not be
     degenerate (std > 0);
  5. `korch bench --artifact` (no unfused plan): Korch, onnxruntime and OpenVINO in alternating rounds, each
     on the quantized file (bench/peer_latency.py: ORT_ENABLE_ALL; OpenVINO CPU with its int8 low-precision
     transformations on the Q/DQ pairs).
A step that fails gives the row an error and the run goes on. Results: --out (.md) and a .json next to it,
rewritten after every model.
"""
import argparse
import collections
import json
import logging
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import export_models  # noqa: E402
from bench_common import DEFAULT_MODELS, cpu_name  # noqa: E402

KINDS = ["static_qdq", "dynamic"]
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
             "QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearSigmoid",
             "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearSoftmax", "QGemm",
             "QAttention", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
ONNX_TYPES = {1: np.float32, 11: np.float64, 10: np.float16, 7: np.int64, 6: np.int32, 9: np.bool_}


def npy(name):
    """korch's .npy file name for a tensor name."""
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in name) + ".npy"


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def graph_inputs(model):
    """[(name, numpy dtype, shape)] of the model's real inputs (dynamic dims as 1)."""
    inits = {t.name for t in model.graph.initializer}
    out = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim]
        out.append((i.name, ONNX_TYPES.get(tt.elem_type, np.float32), shape))
    return out


def random_batch(rng, inputs):
    """Like Korch's --random-inputs and bench/peer_latency.py: floats U(-1, 1), integers [0, 10)."""
    feed = {}
    for name, t, shape in inputs:
        if np.issubdtype(t, np.floating):
            feed[name] = rng.uniform(-1, 1, shape).astype(t)
        elif t is np.bool_:
            feed[name] = rng.integers(0, 2, shape).astype(t)
        else:
            feed[name] = rng.integers(0, 10, shape).astype(t)
    return feed


def quantize(name, kind, src, per_channel, batches=8):
    """The quantized file for (model, kind), made unless cached and newer than its fp32 source."""
    import onnx
    from onnxruntime import quantization as q

    out_dir = ROOT / ".cache/models/quantized"
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / f"{name}_{kind}{'_pc' if per_channel else ''}.onnx"
    if dst.exists() and dst.stat().st_mtime >= Path(src).stat().st_mtime:
        return dst, True
    logging.getLogger().setLevel(logging.ERROR)  # "consider pre-processing before quantization", every model
    tmp = dst.with_suffix(f".onnx.{os.getpid()}.tmp")
    if kind == "dynamic":
        q.quantize_dynamic(str(src), str(tmp), weight_type=q.QuantType.QInt8, per_channel=per_channel,
                           reduce_range=True)
    elif kind == "static_qdq":
        inputs = graph_inputs(onnx.load(str(src), load_external_data=False))

        class Reader(q.CalibrationDataReader):
            def __init__(self):
                rng = np.random.default_rng(0)
                self.it = iter([random_batch(rng, inputs) for _ in range(batches)])

            def get_next(self):
                return next(self.it, None)

        q.quantize_static(str(src), str(tmp), Reader(), quant_format=q.QuantFormat.QDQ,
                          activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8,
                          per_channel=per_channel, reduce_range=True)
    else:
        raise ValueError(f"unknown kind {kind} (known: {', '.join(KINDS)})")
    tmp.replace(dst)
    return dst, False


def run(cmd, env, timeout):
    """Runs cmd; returns (stdout, seconds); raises with the tail of both streams on failure."""
    t0 = time.time()
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{Path(str(cmd[0])).name} {cmd[1]} timed out after {timeout} s")
    if r.returncode != 0:
        tail = (r.stdout[-1500:] + "\n" + r.stderr[-1500:]).strip()
        raise RuntimeError(f"{Path(str(cmd[0])).name} {cmd[1]} failed (rc {r.returncode}): {tail}")
    return r.stdout, time.time() - t0


def ort_outputs(path, feeds, level, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def worst(got, want):
    return max(rel_l2(got[k], want[k]) for k in want)


def check(model_path, art, work, korch, env, threads, timeout, row):
    """Step 4; fills row["check"]; raises on a failure that leaves nothing to compare."""
    import onnx
    import onnxruntime as ort
    ref = work / "ref"
    _, row["times_s"]["reference"] = run([korch, "run", model_path, "--backend", "reference", "--random-inputs", 1,
                                          "--threads", threads, "--outputs", ref], env, timeout)
    inputs = graph_inputs(onnx.load(str(model_path), load_external_data=False))
    feeds = {n: np.load(ref / npy(n)) for n, _, _ in inputs}
    out = work / "art_out"
    _, row["times_s"]["artifact_run"] = run([korch, "run", "--artifact", art, "--inputs", ref, "--outputs", out,
                                             "--threads", threads], env, timeout)
    t0 = time.time()
    ort_all = ort_outputs(model_path, feeds, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, threads)
    ort_none = ort_outputs(model_path, feeds, ort.GraphOptimizationLevel.ORT_DISABLE_ALL, threads)
    row["times_s"]["onnxruntime_check"] = time.time() - t0
    got = {k: np.load(out / npy(k)) for k in ort_all}
    reference = {k: np.load(ref / npy(k)) for k in ort_all}
    c = {"outputs": {k: list(v.shape) for k, v in ort_all.items()},
         "korch_vs_ort_all": worst(got, ort_all), "korch_vs_ort_none": worst(got, ort_none),
         "ort_all_vs_ort_none": worst(ort_all, ort_none),
         # Korch's reference interpreter (the semantics) vs ORT as written, and the artifact vs that interpreter
         # (what fused kernels' float rounding does ahead of (Dynamic)QuantizeLinear).
         "reference_vs_ort_none": worst(reference, ort_none), "korch_vs_reference": worst(got, reference),
         "std": {k: float(np.std(v.astype(np.float64))) for k, v in got.items()}}
    problems = [f"{k}: {what} output is degenerate (std 0)" for what, outs in (("Korch", got), ("ORT", ort_all))
                for k, v in outs.items() if not np.std(v.astype(np.float64)) > 0]
    problems += [f"{k}: Korch output has non-finite values" for k, v in got.items()
                 if np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all()]
    # Korch runs the nodes as written, like ORT_DISABLE_ALL; beyond a few times the noise floor is suspect.
    limit = max(3 * c["ort_all_vs_ort_none"], 1e-2)
    if c["korch_vs_ort_none"] > limit:
        problems.append(f"Korch vs ORT-none {c['korch_vs_ort_none']:.2e} > {limit:.2e} (3x the noise floor, at least 1e-2)")
    c["problems"] = problems
    row["check"] = c


def one(name, kind, a, korch, env, work):
    """One row; never raises."""
    import onnx
    row = {"model": name, "kind": kind, "times_s": {}, "notes": []}
    step = "export"
    try:
        t0 = time.time()
        src = export_models.export(name, verbose=False)
        row["times_s"]["export"] = time.time() - t0
        step = "quantize"
        t0 = time.time()
        qpath, cached = quantize(name, kind, src, a.per_channel)
        row["times_s"]["quantize"] = time.time() - t0
        row["quantized_model"] = str(qpath.relative_to(ROOT))
        row["quantized_cached"] = cached
        step = "onnx.checker"
        onnx.checker.check_model(str(qpath))
        m = onnx.load(str(qpath), load_external_data=False)
        ops = collections.Counter(n.op_type for n in m.graph.node)
        row["ops"] = dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
        row["nodes"] = sum(ops.values())
        row["quant_ops"] = sum(v for k, v in ops.items() if k in QUANT_OPS)
        print(f"  {qpath.name}{' (cached)' if cached else ''}: {row['quant_ops']} quantization/integer ops of "
              f"{row['nodes']} nodes: {', '.join(f'{k} {v}' for k, v in row['ops'].items())}", flush=True)

        step = "compile"
        art = work / "art"
        cmd = [korch, "compile", qpath, "--device", "cpu", "--threads", a.threads, "-o", art, "--force"]
        if a.cost:
            cmd += ["--cost", a.cost]
        log, row["times_s"]["compile"] = run(cmd + a.extra_args.split(), env, a.timeout)
        k = re.search(r": (\d+) kernels for (\d+) primitives", log)
        row["kernels"], row["primitives"] = (int(k.group(1)), int(k.group(2))) if k else (None, None)
        row["compile_summary"] = next((ln.strip() for ln in log.splitlines() if "kernels for" in ln), None)
        row["compile_reference_lines"] = [ln.strip() for ln in log.splitlines()
                                          if re.search(r"reference interpreter|not checked|unchecked", ln)]
        for ln in [row["compile_summary"]] + row["compile_reference_lines"]:
            print(f"  compile: {ln}", flush=True)
        refk = re.search(r"not checked: (\d+) kernels are the reference interpreter", log) or \
            re.search(r"(\d+) measured kernels are the reference interpreter", log)
        if refk:
            row["reference_kernels"] = int(refk.group(1))
            row["notes"].append(f"{refk.group(1)} of {row['kernels']} kernels are the reference interpreter (unchecked)")
        elif row["compile_reference_lines"]:
            row["notes"] += row["compile_reference_lines"]

        step = "check"
        try:
            check(qpath, art, work, korch, env, a.threads, a.timeout, row)
            c = row["check"]
            print(f"  check: Korch vs ORT-all {c['korch_vs_ort_all']:.2e}, vs ORT-none {c['korch_vs_ort_none']:.2e}; "
                  f"ORT-all vs ORT-none {c['ort_all_vs_ort_none']:.2e} (noise floor); Korch reference interpreter vs "
                  f"ORT-none {c['reference_vs_ort_none']:.2e}, artifact vs reference {c['korch_vs_reference']:.2e}; "
                  f"{'FAIL: ' + '; '.join(c['problems']) if c['problems'] else 'ok (outputs non-degenerate)'}",
                  flush=True)
            row["notes"] += c["problems"]
        except Exception as e:  # noqa: BLE001 -- the timing still has a use
            row["check_error"] = str(e)
            row["notes"].append(f"check failed: {str(e)[:300]}")
            print(f"  check FAILED: {e}", flush=True)

        step = "bench"
        js = work / "bench.json"
        cmd = [korch, "bench", "--artifact", art, "--threads", a.threads, "--warmup", a.warmup, "--runs", a.runs,
               "--rounds", a.rounds, "--no-unfused", "--json", js]
        log, row["times_s"]["bench"] = run(cmd, env, a.timeout)
        res = json.loads(js.read_text())
        for p in ("korch", "onnxruntime", "openvino", "faster_peer"):
            if p in res:
                row[p] = res[p]
        for p in ("onnxruntime", "openvino"):
            if "error" in res.get(p, {}):
                row["notes"].append(f"{p}: {res[p]['error'][:300]}")
        print("  bench: " + ", ".join(f"{p} {row[p]['median_ms']:.2f} ms" if "median_ms" in row.get(p, {})
                                      else f"{p} -" for p in ("korch", "onnxruntime", "openvino")), flush=True)
    except Exception as e:  # noqa: BLE001 -- one model's failure is a row, not the end of the run
        row["error"] = f"{step} failed: {type(e).__name__}: {e}"
        print(f"  {row['error'][:2000]}", flush=True)
    return row


def fmt(t):
    return f"{t['median_ms']:.2f} [{t['p10_ms']:.2f}-{t['p90_ms']:.2f}]" if t and "median_ms" in t else "-"


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def write(rows, a, versions, out):
    peer_versions = sorted({r[p]["note"] for r in rows for p in ("onnxruntime", "openvino")
                            if "median_ms" in r.get(p, {}) and r[p].get("note")})
    lines = [
        "# int8-quantized models: Korch vs onnxruntime and OpenVINO",
        "",
        f"Command: `.venv/bin/python bench/quantized_latency.py {shlex.join(sys.argv[1:])}`  ",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores; {a.threads} threads for every system; batch 1.  ",
        f"Versions: {versions}; peers as timed: {', '.join(peer_versions) or '-'}.  ",
        "Quantization: onnxruntime.quantization on the fp32 export (scripts/export_models.py); static_qdq = "
        "quantize_static, QDQ, activations QUInt8, weights QInt8, MinMax calibration on 8 seeded U(-1, 1) batches; "
        "dynamic = quantize_dynamic, weights QInt8; reduce_range=True, "
        f"{'per-channel' if a.per_channel else 'per-tensor'} weights. Every system runs the same quantized file.  ",
        f"Korch: `korch compile --cost {a.cost or 'default'}`; compile s = that command's wall time.  ",
        f"Timing: `korch bench --no-unfused`, {a.rounds} alternating rounds x {a.runs} runs after {a.warmup} warm-up; "
        "ms, median [p10-p90].  ",
        "onnxruntime: ORT_ENABLE_ALL, intra-op threads = threads, sequential. OpenVINO: CPU, PERFORMANCE_HINT=LATENCY, "
        "INFERENCE_NUM_THREADS = threads, INFERENCE_PRECISION_HINT=f32 (int8 via its low-precision transformations), "
        "one stream (bench/peer_latency.py).  ",
        "Correctness: seeded inputs from `korch run --backend reference --random-inputs 1`; relative L2, worst "
        "output. ORT-all vs ORT-none (ORT_ENABLE_ALL vs ORT_DISABLE_ALL) is the noise floor of quantized arithmetic "
        "(fusions change float rounding ahead of a QuantizeLinear, so values flip by a quantum). korch-ref: Korch's "
        "reference interpreter on the same inputs (its semantics, vs ORT running the nodes as written), and the "
        "compiled artifact vs it (the rounding of Korch's fused float kernels).  ",
        f"Load average (1 min): {a.load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end "
        "(timings on a busy machine are not comparable).  ",
        "q ops: QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear / integer ops, of all nodes in the file.",
        "",
        "| model | kind | q ops / nodes | korch ms | onnxruntime ms | openvino ms | faster peer | vs faster peer "
        "| rel-L2 korch vs ORT-all / ORT-none | rel-L2 ORT-all vs ORT-none | rel-L2 korch-ref vs ORT-none / korch vs "
        "korch-ref | compile s | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    speedups = []
    for r in rows:
        q = f"{r['quant_ops']} / {r['nodes']}" if "quant_ops" in r else ""
        if "error" in r:
            comp = f"{r['times_s']['compile']:.1f}" if "compile" in r["times_s"] else ""
            lines.append(f"| {r['model']} | {r['kind']} | {q} | {cell(r['error'][:400])} | | | | | | | | {comp} | "
                         f"{cell('; '.join(r['notes']))} |")
            continue
        k, fp = r["korch"], r.get("faster_peer")
        sp = r[fp]["median_ms"] / k["median_ms"] if fp else None
        if sp:
            speedups.append(sp)
        c = r.get("check")
        l2k = f"{c['korch_vs_ort_all']:.2e} / {c['korch_vs_ort_none']:.2e}" if c else "-"
        l2o = f"{c['ort_all_vs_ort_none']:.2e}" if c else "-"
        l2r = f"{c['reference_vs_ort_none']:.2e} / {c['korch_vs_reference']:.2e}" if c else "-"
        lines.append(f"| {r['model']} | {r['kind']} | {q} | {fmt(k)} | {fmt(r.get('onnxruntime'))} | "
                     f"{fmt(r.get('openvino'))} | {fp or '-'} | {f'{sp:.2f}x' if sp else '-'} | {l2k} | {l2o} | {l2r} | "
                     f"{r['times_s']['compile']:.1f} | {cell('; '.join(r['notes']))} |")
    if speedups:
        g = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        lines += ["", f"Geometric mean speedup over the faster peer **{g:.2f}x** over {len(speedups)} rows "
                  f"(Korch faster on {sum(s > 1 for s in speedups)})."]
    lines += ["", "Ops in the quantized files:", ""]
    for r in rows:
        if "ops" in r:
            lines.append(f"- {r['model']} {r['kind']}: {', '.join(f'{k} {v}' for k, v in r['ops'].items())}")
    lines += ["", "Seconds per step (export, quantize, compile, reference run, artifact run, ORT check, bench):", ""]
    for r in rows:
        lines.append(f"- {r['model']} {r['kind']}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["times_s"].items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"command": sys.argv, "machine": cpu_name(), "versions": versions,
                                                    "load_average_1min": [a.load[0], os.getloadavg()[0]],
                                                    "rows": rows}, indent=1) + "\n")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", help=f"comma-separated (default: {','.join(DEFAULT_MODELS)})")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated of " + ", ".join(KINDS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs per round and system (korch bench --warmup)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cost", choices=["measured", "analytic"], default="measured")
    ap.add_argument("--per-channel", action="store_true", help="per-channel weight scales (default: per tensor)")
    ap.add_argument("--korch", default=str(ROOT / "build/korch"))
    ap.add_argument("--extra-args", default="", help="more korch compile arguments")
    ap.add_argument("--timeout", type=int, default=7200, help="seconds for any one korch command")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (artifacts, inputs, outputs)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/quantized_latency.md"))
    a = ap.parse_args()
    models = a.models.split(",") if a.models else DEFAULT_MODELS
    kinds = a.kinds.split(",")
    for k in kinds:
        if k not in KINDS:
            ap.error(f"--kinds: unknown {k} (known: {', '.join(KINDS)})")
    korch = Path(a.korch).resolve()
    if not korch.exists():
        ap.error(f"--korch: {korch} does not exist")
    out = Path(a.out).resolve()
    a.load = os.getloadavg()
    env = dict(os.environ, KORCH_PROGRESS="0")

    import onnx
    import onnxruntime
    try:
        import openvino
        ov = openvino.__version__.split("-")[0]
    except ImportError:
        ov = "not installed"
    kv = subprocess.run([str(korch), "--version"], capture_output=True, text=True).stdout.strip() or "?"
    versions = (f"{kv} ({a.korch}), onnxruntime {onnxruntime.__version__}, openvino {ov}, onnx {onnx.__version__}, "
                f"numpy {np.__version__}, python {platform.python_version()}")
    print(versions, flush=True)

    base = Path(tempfile.mkdtemp(prefix="korch-quant-bench-"))
    rows = []
    start = time.time()
    for i, (name, kind) in enumerate([(m, k) for m in models for k in kinds]):
        print(f"[{i + 1}/{len(models) * len(kinds)}] {name} {kind} (elapsed {time.time() - start:.0f} s)", flush=True)
        t0 = time.time()
        work = base / f"{name}_{kind}"
        work.mkdir()
        rows.append(one(name, kind, a, korch, env, work))
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        print(f"  {name} {kind}: {'ERROR' if 'error' in rows[-1] else 'done'} in {time.time() - t0:.0f} s "
              f"(elapsed {time.time() - start:.0f} s)", flush=True)
        write(rows, a, versions, out)
    lines = write(rows, a, versions, out)
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    print("\n".join(lines))
    print(f"wrote {out} and {out.with_suffix('.json')} in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
