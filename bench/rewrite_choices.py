"""Rewrites as choices (issue 14): each model compiled twice, with the rewrite alternatives offered
to the orchestrator (the default) and without (--no-rewrite-choices).

    .venv/bin/python bench/rewrite_choices.py [--models ...] [--device cpu|cuda]
        analytic costs: both plans' estimated latency, the sites offered and chosen, compile times
    .venv/bin/python bench/rewrite_choices.py --measured [--models ...] [--rounds 5]
        measured costs (the closed loop) on this CPU, then both artifacts timed by `korch bench` in
        alternating rounds (one bench process per artifact per round): medians and their ratio
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from orchestration import add_model_args, models_present  # noqa: E402


def compile_once(korch, path, device, art, extra, cost="analytic"):
    t0 = time.time()
    r = subprocess.run([korch, "compile", path, "--device", device, "--cost", cost, "-o", art, "-q", "--force"]
                       + extra, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        raise SystemExit(f"{path}: korch compile failed:\n{r.stderr}")
    with open(os.path.join(art, "plan.json")) as f:
        return json.load(f), wall


def bench_once(korch, art, runs):
    out = art + ".bench.json"
    r = subprocess.run([korch, "bench", "--artifact", art, "--peers", "none", "--no-unfused", "--rounds", "1",
                        "--runs", str(runs), "--warmup", "5", "--json", out], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{art}: korch bench failed:\n{r.stderr}")
    with open(out) as f:
        return json.load(f)["korch"]["median_ms"]


def write_table(out, title, command, about, header, rows):
    """The results file: title, the command and machine, what the columns mean, the table."""
    with open(out, "w") as f:
        f.write(f"# {title}\n\n")
        f.write(f"Command: `{command}` on {os.uname().nodename} ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d')}.\n")
        f.write(about + "\n\n")
        f.write("| " + " | ".join(header) + " |\n")
        f.write("|" + "---|" * len(header) + "\n")
        f.write("\n".join(rows) + "\n")
    print(f"wrote {out}")


def measured(a):
    out = a.out or os.path.join(ROOT, "bench", "results", "rewrite_choices_measured.md")
    rows = []
    for m, path in models_present(a.models, a.model_dir):
        art = os.path.join(ROOT, "build", "bench_plans", f"{m}_measured_rw")
        on, t_on = compile_once(a.korch, path, "cpu", art, [], "measured")
        off, t_off = compile_once(a.korch, path, "cpu", art + "_off", ["--no-rewrite-choices"], "measured")
        with_ms, without_ms = [], []
        for _ in range(a.rounds):  # alternating, one process each
            without_ms.append(bench_once(a.korch, art + "_off", a.runs))
            with_ms.append(bench_once(a.korch, art, a.runs))
        ratios = [w / o for w, o in zip(with_ms, without_ms)]
        rw = on["rewrites"]
        row = (f"| {m} | {rw['offered']} | {len(rw['chosen'])} | {off['cost'].get('measured_s', 0) * 1e3:.2f} | "
               f"{on['cost'].get('measured_s', 0) * 1e3:.2f} | {statistics.median(without_ms):.2f} | "
               f"{statistics.median(with_ms):.2f} | {statistics.median(ratios):.3f} "
               f"({min(ratios):.3f}-{max(ratios):.3f}) | {t_off:.0f} | {t_on:.0f} |")
        print(row, flush=True)
        rows.append(row)
    write_table(out, "Rewrites as choices, measured (cpu)",
                f".venv/bin/python bench/rewrite_choices.py --measured --rounds {a.rounds} --runs {a.runs} "
                f"--models {' '.join(a.models)}",
                "Each model compiled with measured costs and the closed loop, without rewrite choices and with "
                "them (tuning database warm for the kernels both share). Then both artifacts timed with `korch bench "
                "--peers none --no-unfused --rounds 1` in alternating rounds, one process each; medians over the "
                "rounds of each round's median; ratio = with / without per round (below 1: the rewrites pay), "
                "median and range.",
                ["model", "sites", "chosen", "compile's measured without (ms)", "with (ms)", "bench without (ms)",
                 "bench with (ms)", "with / without", "compile without (s)", "with (s)"], rows)


def main():
    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.add_argument("--measured", action="store_true", help="measured costs on this CPU, and korch bench")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    if a.measured:
        return measured(a)
    out = a.out or os.path.join(ROOT, "bench", "results", f"rewrite_choices_{a.device}.md")
    rows = []
    for m, path in models_present(a.models, a.model_dir):
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
    write_table(out, f"Rewrites as choices ({a.device}, analytic costs)",
                f".venv/bin/python bench/rewrite_choices.py --device {a.device}",
                "Each model compiled twice in fresh `korch compile` processes: without rewrite choices "
                "(`--no-rewrite-choices`) and with them (the default). Estimated latencies are the analytic "
                "model's, not measurements; compile times are wall seconds of the whole compile on a shared "
                "machine.",
                ["model", "sites offered", "chosen", "chosen by rule", "variant graphs", "plan without (us)",
                 "plan with (us)", "gain", "solver", "compile without (s)", "compile with (s)"], rows)


if __name__ == "__main__":
    main()
