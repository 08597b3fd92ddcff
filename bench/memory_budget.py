"""`korch compile --memory-budget` on the default models (analytic CPU costs: no measuring).

  .venv/bin/python bench/memory_budget.py [--models a,b] [--fractions 0.5,0.9] [--time-limit 20]
                                          [--out bench/results/memory_budget.md]

Per model: the unconstrained compile's peak intermediate memory (manifest.json
peak_intermediate_bytes) and predicted latency, then a compile with the budget at each fraction of
that peak: the plan's peak and latency (the latency the budget costs), or the error's one line.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import export_models  # noqa: E402
from bench_common import DEFAULT_MODELS as DEFAULT  # noqa: E402


def compile_once(korch, model, out, env, time_limit, budget=None, timeout=600):
    cmd = [korch, "compile", model, "--cost", "analytic", "--no-verify", "--time-limit", str(time_limit), "-o", out,
           "--force"]
    if budget is not None:
        cmd += ["--memory-budget", str(budget)]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"killed after {timeout} s (the time limit does not stop CBC inside a root LP)",
                "seconds": time.time() - t0}
    seconds = time.time() - t0
    if r.returncode != 0:
        line = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        return {"error": re.sub(r"^korch: error: ", "", line), "seconds": seconds}
    m = json.loads((Path(out) / "manifest.json").read_text())
    cuts = re.search(r"\((\d+) cheaper plans? over it excluded\)", r.stdout)
    return {"peak": m["peak_intermediate_bytes"], "plan_s": m["plan_seconds"], "seconds": seconds,
            "cuts": int(cuts.group(1)) if cuts else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models")
    ap.add_argument("--fractions", default="0.5,0.9")
    ap.add_argument("--time-limit", type=float, default=20)
    ap.add_argument("--korch", default=str(ROOT / "build/korch"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/memory_budget.md"))
    a = ap.parse_args()
    models = a.models.split(",") if a.models else DEFAULT
    fractions = [float(f) for f in a.fractions.split(",")]
    work = Path(tempfile.mkdtemp(prefix="korch-membudget-"))
    env = dict(os.environ, KORCH_PROGRESS="0")
    rows = []
    for name in models:
        model = export_models.export(name)
        base = compile_once(a.korch, model, work / name, env, a.time_limit)
        row = {"name": name, "base": base, "budgets": []}
        for f in fractions:
            if "peak" not in base:
                break
            budget = int(base["peak"] * f)
            row["budgets"].append((f, budget, compile_once(a.korch, model, work / f"{name}.{f}", env, a.time_limit,
                                                           budget)))
        print(json.dumps(row), flush=True)
        rows.append(row)
    cmd = " ".join(["`.venv/bin/python bench/memory_budget.py"] + (["--models", a.models] if a.models else []) +
                   ["--fractions", a.fractions, "--time-limit", str(a.time_limit)]) + "`"
    lines = ["# Memory budget: the fastest plan within a peak-memory bound (CPU, analytic costs)", "",
             f"Command: {cmd}  ",
             "peak = manifest.json peak_intermediate_bytes (the artifact's arena, MB = 1e6 bytes); latency = "
             "plan_seconds (analytic, ms); cuts = cheaper plans over the budget excluded; compile = wall seconds.",
             "", "| model | peak MB | latency ms | budget | peak MB | latency ms (cost) | cuts | compile s |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        b = row["base"]
        if "peak" not in b:
            lines.append(f"| {row['name']} | error: {b['error']} | | | | | | |")
            continue
        first = True
        for f, budget, r in row["budgets"]:
            head = f"| {row['name']} | {b['peak'] / 1e6:.2f} | {b['plan_s'] * 1e3:.3f} |" if first else "| | | |"
            first = False
            if "error" in r:
                lines.append(f"{head} {f:g}x | {r['error']} | | | {r['seconds']:.1f} |")
            else:
                cost = r["plan_s"] / b["plan_s"] - 1
                lines.append(f"{head} {f:g}x | {r['peak'] / 1e6:.2f} | {r['plan_s'] * 1e3:.3f} ({cost:+.1%}) | "
                             f"{r['cuts']} | {r['seconds']:.1f} |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
