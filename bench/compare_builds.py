"""Two builds of Korch side by side on the CPU: same plans? same speed?

  .venv/bin/python bench/compare_builds.py --before OLD/korch --after build/korch
      [--models candy,resnet18,...,FILE.onnx] [--runs 30] [--rounds 3] [--threads 2] [--cache DIR]
      [--out FILE.md]

For each model: `korch compile MODEL --device cpu` with measured costs by BEFORE (cold: a fresh
tuning database and kernel cache shared by every model of the run, or --cache DIR as it is), then by AFTER against the
same database. When the two builds generate the same kernels (same signatures, generator
version and device id), AFTER measures nothing ("0 measured") and, given the same costs, must
choose the same plan: the script compares the kernels of both plan.json files. Then each build
times its own artifact (`korch bench --artifact ART --peers none --no-unfused`) in alternating rounds;
the table shows the median of the rounds' medians and their ratio. fp32, batch 1.
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
from bench_common import DEFAULT_MODELS as DEFAULT, median, run  # noqa: E402

AT_PACE = 1.15  # a round counts as "at pace" when its probe reads at most this over the machine's best


def no_peers(binary):
    """The flag that turns the peers off: --peers none, or --no-ort in builds before it."""
    help_text = subprocess.run([str(binary), "bench", "--help"], capture_output=True, text=True).stdout
    return ["--peers", "none"] if "--peers" in help_text else ["--no-ort"]


def plan_kernels(art):
    plan = json.loads((Path(art) / "plan.json").read_text())
    return [tuple(p["name"] for p in k["primitives"]) + tuple(k["outputs"]) for k in plan["kernels"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--models")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", help="tuning database and kernel cache folder to start from (default: a fresh one)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/compare_builds.md"))
    a = ap.parse_args()
    models = a.models.split(",") if a.models else DEFAULT
    work = Path(tempfile.mkdtemp(prefix="korch-compare-"))
    env = dict(os.environ, KORCH_PROGRESS="0", KORCH_CACHE_DIR=a.cache or str(work / "cache"))
    rows = []
    for name in models:
        model = Path(name) if name.endswith(".onnx") else export_models.export(name)
        name = Path(name).stem if name.endswith(".onnx") else name
        arts = {}
        notes = []
        for tag, binary in (("before", a.before), ("after", a.after)):
            art = work / f"{name}.{tag}"
            t0 = time.time()
            out = run([binary, "compile", model, "--device", "cpu", "--threads", a.threads, "-o", art], env)
            m = re.search(r"(\d+) measured", out)
            notes.append(f"{tag}: {time.time() - t0:.0f} s, {m.group(1) if m else '?'} measured")
            arts[tag] = art
        same = plan_kernels(arts["before"]) == plan_kernels(arts["after"])
        ms = {"before": [], "after": []}
        pace = {"before": [], "after": []}
        builds = (("before", a.before), ("after", a.after))
        for r in range(a.rounds):
            for tag, binary in builds if r % 2 == 0 else builds[::-1]:  # who goes first alternates
                jf = work / f"{name}.{tag}.json"
                run([binary, "bench", "--artifact", arts[tag], *no_peers(binary), "--no-unfused", "--threads", a.threads,
                     "--runs", a.runs, "--rounds", 1, "--json", jf], env)
                k = json.loads(jf.read_text())["korch"]
                ms[tag].append(k["median_ms"])
                pace[tag].append((k.get("pace_by_round") or [None])[0])  # builds before the probe: None
        b, f = median(ms["before"]), median(ms["after"])
        # Rounds where both builds ran with the machine at its pace (the probe of `korch bench`).
        paired = [fa / be for be, fa, pb, pf in zip(ms["before"], ms["after"], pace["before"], pace["after"])
                  if pb is not None and pf is not None and max(pb, pf) <= AT_PACE]
        at_pace = f"{median(paired):.3f} ({len(paired)} of {a.rounds})" if paired else "-"
        rows.append((name, len(plan_kernels(arts["after"])), same, b, f, at_pace, "; ".join(notes)))
        print(f"{name}: same plan {same}, before {b:.3f} ms, after {f:.3f} ms ({f / b:.3f}x; rounds at pace "
              f"{at_pace}); {'; '.join(notes)}", flush=True)
    lines = ["# Two Korch builds side by side (CPU)", "",
             f"Command: `.venv/bin/python bench/compare_builds.py --before {a.before} --after {a.after} "
             f"--models {','.join(models)} --runs {a.runs} --rounds {a.rounds} --threads {a.threads}"
             f"{' --cache ' + a.cache if a.cache else ''}`  ",
             f"Timing: each build's `korch bench --artifact` of its own artifact, {a.rounds} alternating rounds x "
             f"{a.runs} runs (the first build of a round alternates); median of the round medians, ms. One tuning "
             f"database ({'as found in ' + a.cache if a.cache else 'cold at the start'}) shared by both builds.  ",
             f"At pace: the median of after / before over the rounds where both began with the machine at most "
             f"{AT_PACE}x slower than its best (`korch bench`'s pace probe; this VM has slow phases).", "",
             "| model | kernels | same plan | before ms | after ms | after / before | at pace, paired | compile |",
             "|---|---|---|---|---|---|---|---|"]
    for name, k, same, b, f, at_pace, note in rows:
        lines.append(f"| {name} | {k} | {'yes' if same else 'NO'} | {b:.3f} | {f:.3f} | {f / b:.3f} | {at_pace} | {note} |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
