"""Rewrites as choices (issue 14): each model compiled with analytic costs twice, with the rewrite
alternatives offered to the orchestrator (the default) and without (--no-rewrite-choices); the
table gives both plans' estimated latency, the sites offered and chosen, and the compile times.

    .venv/bin/python bench/rewrite_choices.py [--models ...] [--device cpu|cuda]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from orchestration import PAPER, HELDBACK  # noqa: E402


def compile_once(korch, path, device, art, extra):
    t0 = time.time()
    r = subprocess.run([korch, "compile", path, "--device", device, "--cost", "analytic", "-o", art, "-q", "--force"]
                       + extra, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        raise SystemExit(f"{path}: korch compile failed:\n{r.stderr}")
    with open(os.path.join(art, "plan.json")) as f:
        return json.load(f), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=PAPER + HELDBACK)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--korch", default=os.path.join(ROOT, "build", "korch"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, ".cache", "models"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out = a.out or os.path.join(ROOT, "bench", "results", f"rewrite_choices_{a.device}.md")
    rows = []
    for m in a.models:
        path = os.path.join(a.model_dir, m + ".onnx")
        if not os.path.exists(path):
            print(f"skip {m}: {path} missing (scripts/export_models.py)", file=sys.stderr)
            continue
        art = os.path.join(ROOT, "build", "bench_plans", f"{m}_{a.device}_rw")
        on, t_on = compile_once(a.korch, path, a.device, art, [])
        off, t_off = compile_once(a.korch, path, a.device, art + "_off", ["--no-rewrite-choices"])
        rw = on["rewrites"]
        rules = {}
        for c in rw["chosen"]:
            rules[c["rule"]] = rules.get(c["rule"], 0) + 1
        p_on, p_off = on["cost"]["plan_s"], off["cost"]["plan_s"]
        row = (f"| {m} | {rw['offered']} | {len(rw['chosen'])} | "
               f"{', '.join(f'{n}x {r}' for r, n in sorted(rules.items())) or '-'} | {rw['variant_graphs']} | "
               f"{p_off * 1e6:.1f} | {p_on * 1e6:.1f} | {p_off / p_on:.3f}x | {on['solver']['status']} "
               f"{100 * on['solver']['gap']:.3g}% | {t_off:.1f} | {t_on:.1f} |")
        print(row, flush=True)
        rows.append(row)
    with open(out, "w") as f:
        f.write(f"# Rewrites as choices ({a.device}, analytic costs)\n\n")
        f.write(f"Command: `.venv/bin/python bench/rewrite_choices.py --device {a.device}` on "
                f"{os.uname().nodename} ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d')}.\n")
        f.write("Each model compiled twice in fresh `korch compile` processes: without rewrite choices "
                "(`--no-rewrite-choices`) and with them (the default). Estimated latencies are the analytic "
                "model's, not measurements; compile times are wall seconds of the whole compile on a shared "
                "machine.\n\n")
        f.write("| model | sites offered | chosen | chosen by rule | variant graphs | plan without (us) | "
                "plan with (us) | gain | solver | compile without (s) | compile with (s) |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
