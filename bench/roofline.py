"""How far each model's latency is from this CPU's fp32 compute bound, for Korch and its peers.

  .venv/bin/python bench/roofline.py --latency bench/results/cpu_latency_epyc_dec06.json \
      [--models a,b] [--threads 2] [--out bench/results/roofline.md]

The peak: a 1024 x 1024 x 1024 fp32 MatMul compiled by `korch compile` (oneDNN's GEMM) and timed by
`korch bench` (median of 3 rounds x 20 runs), in GFLOP/s. A model's bound is its FLOPs (`korch
inspect`: convolutions and matrix products counted directly, no Winograd) over that peak: what a
system would take if every FLOP ran at the GEMM's rate and nothing else took time. Winograd
convolutions do fewer multiplications, so a system that uses them can run under the bound.

Per model: `korch compile` (warm on the tuning database the latency run filled) then `korch bench
--per-kernel` splits Korch's run into library steps (oneDNN convolutions and matrix products, with
their FLOPs from program.json and their rate) and generated loop kernels. The latency columns and
the faster peer come from the cpu_latency.py JSON given (its medians, same machine), so the
ceiling column, the faster peer's time over the bound, is the most any system could gain over that
peer without Winograd-like algorithms.
"""
import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import export_models  # noqa: E402
from bench_common import cpu_name, run  # noqa: E402


def gemm_model(path, n):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "gemm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def step_flops(recipe):
    """FLOPs of a library step (2 per multiply-add), or None for a step that is not a convolution or product."""
    lin = recipe.get("linear")
    if not lin:
        return None
    dst, wei, src = lin.get("dst_dims"), lin.get("weights_dims"), lin.get("src_dims")
    if lin.get("op") == "MatMul":
        return 2 * math.prod(dst) * src[-1]
    # oneDNN's grouped weights are [groups, out/groups, in/groups, k...]: one dim more than dst's.
    per_output = math.prod(wei[2:] if len(wei) > len(dst) else wei[1:])
    if lin.get("op") == "Conv":
        return 2 * math.prod(dst) * per_output
    if lin.get("op") == "ConvTranspose":
        return 2 * math.prod(src) * per_output
    return None


def profile(korch, art, threads, env):
    out = Path(art) / "roofline_bench.json"
    run([korch, "bench", "--artifact", art, "--threads", threads, "--rounds", 1, "--runs", 10, "--per-kernel", 30,
         "--peers", "none", "--no-unfused", "--json", out], env)
    kernels = json.loads(out.read_text())["kernels"]
    program = json.loads((Path(art) / "program.json").read_text())["kernels"]
    lib_ms = gen_ms = 0.0
    lib_flops = 0
    for k in kernels:
        if k["kind"] == "library":
            lib_ms += k["median_ms"]
            lib_flops += step_flops(program[k["step"]]["recipe"]) or 0
        else:
            gen_ms += k["median_ms"]
    return lib_ms, gen_ms, lib_flops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", required=True, help="a bench/cpu_latency.py JSON (batch-1 rows are used)")
    ap.add_argument("--models")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results/roofline.md"))
    a = ap.parse_args()
    korch = ROOT / "build/korch"
    env = dict(os.environ, KORCH_PROGRESS="0")
    rows = {r["model"]: r for r in json.loads(Path(a.latency).read_text()) if r.get("batch", 1) == 1}
    models = a.models.split(",") if a.models else list(rows)
    work = Path(tempfile.mkdtemp(prefix="korch-roofline-"))

    gemm = work / "gemm1024.onnx"
    gemm_model(gemm, 1024)
    run([korch, "compile", gemm, "-o", work / "gemm", "--threads", a.threads, "-q"], env)
    run([korch, "bench", "--artifact", work / "gemm", "--threads", a.threads, "--rounds", 3, "--runs", 20, "--peers",
         "none", "--no-unfused", "--json", work / "gemm.json"], env)
    g = json.loads((work / "gemm.json").read_text())
    peak = 2 * 1024**3 / (g["korch"]["median_ms"] * 1e-3) / 1e9
    print(f"peak: 1024^3 MatMul {g['korch']['median_ms']:.2f} ms = {peak:.0f} GFLOP/s", flush=True)

    table = []
    for name in models:
        r = rows[name]
        model = export_models.export(name, batch=1)
        flops = json.loads(run([korch, "inspect", model, "--json"], env))["flops"]
        art = work / name
        run([korch, "compile", model, "-o", art, "--threads", a.threads, "-q"], env)
        lib_ms, gen_ms, lib_flops = profile(korch, art, a.threads, env)
        bound = flops / (peak * 1e9) * 1e3
        peer = r[r["faster_peer"]]["median_ms"]
        k = r["korch"]["median_ms"]
        table.append(dict(model=name, gflops=flops / 1e9, bound_ms=bound, korch_ms=k, peer=r["faster_peer"], peer_ms=peer,
                          library_ms=lib_ms, library_gflops_s=lib_flops / (lib_ms * 1e-3) / 1e9 if lib_ms else 0,
                          generated_ms=gen_ms, per_kernel_sum_ms=lib_ms + gen_ms))
        t = table[-1]
        print(f"{name}: {t['gflops']:.2f} GFLOP, bound {bound:.2f} ms, korch {k:.2f}, {t['peer']} {peer:.2f}; "
              f"library {lib_ms:.2f} ms at {t['library_gflops_s']:.0f} GFLOP/s, generated {gen_ms:.2f} ms", flush=True)

    lines = [
        "# Latency against the fp32 compute bound",
        "",
        f"Command: `.venv/bin/python bench/roofline.py --latency {a.latency}`  ",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, {a.threads} threads; "
        f"peak {peak:.0f} GFLOP/s (a 1024^3 fp32 MatMul through korch: oneDNN's GEMM).  ",
        "bound = the model's FLOPs (`korch inspect`, no Winograd) at that peak; korch and peer ms are the "
        "latency JSON's medians; library / generated = `korch bench --per-kernel 30` split of Korch's run "
        "(library: oneDNN convolutions and products, at the rate given; generated: loop kernels).  ",
        "ceiling = faster peer / bound: the most a system could gain over that peer if every FLOP ran at the "
        "GEMM's peak and nothing else took time (Winograd convolutions can go under the bound).",
        "",
        "| model | GFLOP | bound ms | korch ms | korch / bound | faster peer ms | korch vs peer | "
        "ceiling | library ms (GFLOP/s) | generated ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in table:
        lines.append(f"| {t['model']} | {t['gflops']:.2f} | {t['bound_ms']:.2f} | {t['korch_ms']:.2f} | "
                     f"{t['korch_ms'] / t['bound_ms']:.2f} | {t['peer_ms']:.2f} ({t['peer']}) | "
                     f"{t['peer_ms'] / t['korch_ms']:.2f}x | "
                     f"{t['peer_ms'] / t['bound_ms']:.2f}x | {t['library_ms']:.2f} ({t['library_gflops_s']:.0f}) | "
                     f"{t['generated_ms']:.2f} |")
    gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    lines += ["", f"Geomean over {len(table)} models: Korch vs the faster peer "
              f"{gm([t['peer_ms'] / t['korch_ms'] for t in table]):.2f}x; ceiling (faster peer over the bound) "
              f"{gm([max(1.0, t['peer_ms'] / t['bound_ms']) for t in table]):.2f}x, "
              "each model's ceiling taken as at least 1 (a peer under the bound uses Winograd).", ""]
    Path(a.out).write_text("\n".join(lines))
    Path(a.out).with_suffix(".json").write_text(json.dumps(dict(peak_gflops_s=peak, rows=table), indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
