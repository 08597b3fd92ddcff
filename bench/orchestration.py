#!/usr/bin/env python3
"""Kernel orchestration at whole-model scale: candidates, states, solve time, gap, compile time.

For each model: `korch compile MODEL --device DEV --cost analytic -o DIR` (one fresh process per
model, timed end to end), then the numbers from DIR/plan.json. Writes a markdown table to
bench/results/orchestration_<device>.md (or --out). Not a test: it records what happened.

  .venv/bin/python bench/orchestration.py                 # paper + held-back models, cpu
  .venv/bin/python bench/orchestration.py --device cuda   # analytic H200 spec
  .venv/bin/python bench/orchestration.py --models yolov4 --extra-args="--max-fanout 2"
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = ["candy", "segformer_b0", "efficientvit_b0", "yolox_nano", "yolov4"]
HELDBACK = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf",
            "shufflenet_v2_x1_0", "squeezenet1_0", "densenet121", "convnext_tiny", "vit_b_16", "swin_t",
            "transformer_encoder"]


def models_present(names, model_dir):
    """(name, path) of each exported model among `names`; the missing ones are named on stderr."""
    for m in names:
        path = os.path.join(model_dir, m + ".onnx")
        if os.path.exists(path):
            yield m, path
        else:
            print(f"skip {m}: {path} missing (scripts/export_models.py)", file=sys.stderr)


def add_model_args(ap):
    """The flags the model-by-model benches share: which models, where, which korch, where to write."""
    ap.add_argument("--models", nargs="*", default=PAPER + HELDBACK)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--korch", default=os.path.join(ROOT, "build", "korch"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, ".cache", "models"))
    ap.add_argument("--out", default=None)


def main():
    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.add_argument("--extra-args", default="", help="more korch compile flags, e.g. '--max-fanout 2'")
    ap.add_argument("--cost", default="analytic", choices=["analytic", "measured"],
                    help="measured: on this CPU, from (and into) the tuning database")
    a = ap.parse_args()
    out = a.out or os.path.join(ROOT, "bench", "results", f"orchestration_{a.device}"
                                f"{'_measured' if a.cost == 'measured' else ''}.md")
    rows = []
    for m, path in models_present(a.models, a.model_dir):
        art = os.path.join(ROOT, "build", "bench_plans", f"{m}_{a.device}")
        cmd = [a.korch, "compile", path, "--device", a.device, "--cost", a.cost, "-o", art, "-q"] + a.extra_args.split()
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.time() - t0
        if p.returncode != 0:
            rows.append((m, None, wall, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"))
            print(f"{m}: FAILED {rows[-1][3]}", file=sys.stderr)
            continue
        j = json.load(open(os.path.join(art, "plan.json")))
        rows.append((m, j, wall, ""))
        s = j["solver"]
        print(f"{m}: {j['graph']['primitives']} prims, {j['candidates']['count']} candidates, "
              f"{s['status']} gap {100 * s['gap']:.3g}% solve {s['seconds']:.2f}s, compile {wall:.1f}s", file=sys.stderr)
    with open(out, "w") as f:
        f.write(f"# Kernel orchestration at model scale ({a.device}, {a.cost} costs)\n\n")
        f.write(f"Command: `.venv/bin/python bench/orchestration.py --device {a.device}"
                f"{' --cost measured' if a.cost == 'measured' else ''}"
                f"{' --extra-args=' + repr(a.extra_args) if a.extra_args else ''}` "
                f"on {platform.node()} ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d')}.\n")
        f.write("Each row is one fresh `korch compile` process (load + fission + rewrites + enumeration + "
                "costs + state search + BLP), batch 1, fp32. States: execution states the no-recompute "
                "search visited ('>N' = stopped at its limit). Estimated times are the cost model's "
                "(analytic, or measured kernel times), not end-to-end measurements. Rewrite program: the "
                "solve over every rewrite variant (rewrite_choice.h) that chose the graph the plan was then "
                "solved on (status, gap, solver seconds; '-': no rewrite sites).\n\n")
        f.write("| model | primitives | candidates | states | BLP vars / rows | solver | status | gap | solve s | "
                "rewrite program | compile s | kernels | est. plan us | est. unfused us | est. gain |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for m, j, wall, err in rows:
            if j is None:
                f.write(f"| {m} | | | | | | FAILED: {err} | | | | {wall:.1f} | | | | |\n")
                continue
            s, st, c = j["solver"], j["states"], j["cost"]
            states = f"{st['count']}" if st["completed"] else f">{st['count'] - 1}"
            rw = j.get("rewrites", {})
            prog = rw.get("program") if rw.get("offered") else None
            program = (f"{prog['status']} {100 * prog['gap']:.3g}% {prog['seconds']:.2f}s ({len(rw['chosen'])}/"
                       f"{rw['offered']} sites)" if prog else "-")
            f.write(f"| {m} | {j['graph']['primitives']} | {j['candidates']['count']} | {states} | "
                    f"{s['variables']} / {s['rows']} | {s['name']} | {s['status']} | {100 * s['gap']:.3g}% | "
                    f"{s['seconds']:.2f} | {program} | {wall:.1f} | {len(j['kernels'])} | {c['plan_s'] * 1e6:.0f} | "
                    f"{c['unfused_s'] * 1e6:.0f} | {c['unfused_s'] / max(c['plan_s'], 1e-30):.2f}x |\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
