"""Predicted against measured, with isolated costs and with the closed loop (CPU).

  .venv/bin/python bench/costs_that_hold.py [--models a,b] [--runs 20] [--rounds 3] [--threads 2]
                                            [--out bench/results/costs_that_hold.md]

With a fresh tuning database and kernel cache (shared by the models of the run, in table order):
  1. `korch compile M --isolated-costs`: every candidate measured alone (the cold compile as it
     was before the closed loop); its plan_seconds is the prediction from isolated costs;
  2. `korch compile M` (the default): the closed loop runs the plan in the model, its kernels'
     in-model times replace their isolated costs, and it solves again until the plan holds
     (its extra time is the closed loop's; the measurements of step 1 are reused);
  3. the same command again: the warm compile;
  4. `korch bench` of both artifacts, alternating rounds (korch bench --peers none --no-unfused), and
     once with the unfused plan, for the "vs unfused" figure the compile printed.
The table: predicted (manifest plan_seconds) against bench's median for both plans, and the
closed-loop plan's speed against the isolated-cost plan's.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import export_models  # noqa: E402
from bench_common import DEFAULT_MODELS as DEFAULT, SLOW_PACE, at_pace as at_pace_rounds, median, run  # noqa: E402

def printed_gain(manifest):
    """The gain `korch compile` printed: the unfused plan against the plan in alternating runs
    (closed_loop.plan_beside_unfused_s), or, from a build before those, unfused over plan seconds."""
    loop = manifest.get("closed_loop", {})
    if loop.get("plan_beside_unfused_s"):
        return loop["unfused_measured_s"] / loop["plan_beside_unfused_s"]
    return manifest["unfused_seconds"] / manifest["plan_seconds"]


def at_pace(times, paces):
    """The median of the rounds that began with the machine at its pace, or None when none did.

    The costs a compile stores were taken at the machine's pace (it waits for it, and measures a
    slow record again later): a round in a slow phase times another machine."""
    fast = [times[i] for i in at_pace_rounds(paces)]
    return median(fast) if fast else None


def plan_kernels(artifact):
    """An artifact's plan as its kernels' primitives, by name, in order: two artifacts whose plans
    are this same list run the same kernels (their benches differ by the machine alone)."""
    plan = json.loads((Path(artifact) / "plan.json").read_text())
    return [[p["name"] for p in k["primitives"]] for k in plan["kernels"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--korch", default=str(ROOT / "build/korch"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/costs_that_hold.md"))
    ap.add_argument("--warm-db", help="start from a copy of this tuning database instead of an empty one (the "
                    "'cold' column is then not cold: say so where the table is kept)")
    a = ap.parse_args()
    models = a.models.split(",") if a.models else DEFAULT
    work = Path(tempfile.mkdtemp(prefix="korch-costs-"))
    env = dict(os.environ, KORCH_PROGRESS="0", KORCH_CACHE_DIR=str(work / "cache"))
    if a.warm_db:
        (work / "cache").mkdir(parents=True)
        shutil.copyfile(a.warm_db, work / "cache" / "tuning.db")
        kernels = Path(a.warm_db).parent / "kernels"  # its compiled kernels too, when beside it
        if kernels.is_dir():
            (work / "cache" / "kernels").symlink_to(kernels.resolve())
    k = a.korch
    rows = []
    for name in models:
        model = export_models.export(name)
        iso, ctx = work / f"{name}.iso", work / f"{name}.ctx"
        t0 = time.time()
        run([k, "compile", model, "--isolated-costs", "--threads", a.threads, "-o", iso], env)
        t_iso = time.time() - t0
        t0 = time.time()
        out = run([k, "compile", model, "--threads", a.threads, "-o", ctx], env)
        t_loop = time.time() - t0
        first_loop = json.loads((ctx / "manifest.json").read_text()).get("closed_loop", {})  # the warm compile rewrites it
        t0 = time.time()
        out = run([k, "compile", model, "--threads", a.threads, "-o", ctx], env)
        t_warm = time.time() - t0
        rounds = re.search(r"closed loop: (\d+) rounds", out)
        ms = {"iso": [], "ctx": []}
        paces = {"iso": [], "ctx": []}  # the machine's pace before each round (korch bench's probe; 0: unknown)
        for _ in range(a.rounds):
            for tag, art in (("ctx", ctx), ("iso", iso)):
                jf = work / f"{name}.{tag}.json"
                run([k, "bench", "--artifact", art, "--peers", "none", "--no-unfused", "--threads", a.threads, "--runs", a.runs,
                     "--rounds", 1, "--json", jf], env)
                b = json.loads(jf.read_text())
                ms[tag].append(b["korch"]["median_ms"])
                paces[tag].append((b["korch"].get("pace_by_round") or [0])[0])
        jf = work / f"{name}.unfused.json"
        run([k, "bench", "--artifact", ctx, "--peers", "none", "--threads", a.threads, "--runs", a.runs, "--rounds",
             a.rounds, "--json", jf], env)  # alternating rounds: one round fell into one phase of the machine
        ub = json.loads(jf.read_text())
        mi, mc = json.loads((iso / "manifest.json").read_text()), json.loads((ctx / "manifest.json").read_text())
        row = dict(name=name, iso_pred=mi["plan_seconds"] * 1e3, iso_meas=median(ms["iso"]),
                   ctx_pred=mc["plan_seconds"] * 1e3, ctx_meas=median(ms["ctx"]),
                   unf_pred=mc["unfused_seconds"] * 1e3, unf_iso=mi["unfused_seconds"] * 1e3,
                   unf_meas=ub["korch_unfused"]["median_ms"], gain_pred=printed_gain(mc),
                   gain_meas=ub["korch_unfused"]["median_ms"] / ub["korch"]["median_ms"],
                   rounds=rounds.group(1) if rounds else "?", t_iso=t_iso, t_loop=t_loop, t_warm=t_warm,
                   ctx_paces=paces["ctx"], iso_paces=paces["iso"],
                   kept_pace=mc.get("closed_loop", {}).get("kept_run_pace", 0),
                   first_loop_paces=[x.get("pace", 0) for x in first_loop.get("rounds", [])],
                   first_loop_kept=first_loop.get("kept", 0), same_plan=plan_kernels(ctx) == plan_kernels(iso),
                   ctx_at_pace=at_pace(ms["ctx"], paces["ctx"]), iso_at_pace=at_pace(ms["iso"], paces["iso"]),
                   ctx_ms=ms["ctx"], iso_ms=ms["iso"], paired=median([c / i for c, i in zip(ms["ctx"], ms["iso"])]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    lines = ["# Costs that hold: predicted against measured (CPU)", "",
             f"Command: `.venv/bin/python bench/costs_that_hold.py --models {','.join(models)} --runs {a.runs} "
             f"--rounds {a.rounds} --threads {a.threads}`  ",
             "predicted = manifest.json plan_seconds; measured = `korch bench --artifact` median (median of "
             f"{a.rounds} alternating rounds x {a.runs} runs); isolated = `korch compile --isolated-costs` (every "
             "kernel measured alone, the costs before the closed loop); closed loop = `korch compile` (default). "
             "ms, fp32, batch 1. At pace: the median of the rounds of the closed-loop artifact that began with "
             f"the machine at its pace (`korch bench`'s pace probe at most {SLOW_PACE}x the fastest the tuning "
             "database has seen; the costs were taken at it), and how many of the rounds did; compile's pace: "
             "the machine's while the closed loop ran the kept plan (manifest closed_loop.kept_run_pace); first "
             "closed loop: the machine's pace in each round of the first closed-loop compile (a slow round, above "
             f"{SLOW_PACE}, is not solved again on) and the round it kept. (same plan): both compiles chose the same kernels, so the ratio is the "
             "machine's run-to-run difference between two copies of one plan. Paired by round: the median over the "
             "rounds of the closed-loop plan's round median over the isolated plan's in the same round (they run "
             "one after the other, so a slow phase of the machine moves both).", "",
             "| model | isolated: predicted | measured | measured / predicted | closed loop: predicted | measured | "
             "measured / predicted | at pace: measured | measured / predicted | rounds at pace | compile's pace | "
             "closed-loop plan / isolated plan (bench) | paired by round | loop rounds | first closed loop: rounds' paces "
             "(kept) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['iso_pred']:.3f} | {r['iso_meas']:.3f} | {r['iso_meas'] / r['iso_pred']:.2f} | "
                     f"{r['ctx_pred']:.3f} | {r['ctx_meas']:.3f} | {r['ctx_meas'] / r['ctx_pred']:.2f} | "
                     + (f"{r['ctx_at_pace']:.3f} | {r['ctx_at_pace'] / r['ctx_pred']:.2f} | " if r["ctx_at_pace"]
                        else "- | - | ")
                     + f"{len(at_pace_rounds(r['ctx_paces']))} of {len(r['ctx_paces'])} | "
                     + (f"{r['kept_pace']:.2f} | " if r["kept_pace"] else "- | ")
                     + f"{r['ctx_meas'] / r['iso_meas']:.3f}{' (same plan)' if r.get('same_plan') else ''} | "
                     + f"{r['paired']:.3f} | "
                     + f"{r['rounds']} | "
                     + (" ".join(f"{p:.2f}" for p in r["first_loop_paces"]) or "-") + f" ({r['first_loop_kept']}) |")
    lines += ["", "The unfused baseline and the gain compile prints, against `korch bench` (unfused plan in the same run):",
              "", "| model | unfused predicted before (isolated sum) | unfused in the compile (beside the plan) | unfused bench | "
              "gain printed | gain in bench |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['unf_iso']:.3f} | {r['unf_pred']:.3f} | {r['unf_meas']:.3f} | "
                     f"{r['gain_pred']:.2f}x | {r['gain_meas']:.2f}x |")
    first = "a copy of " + a.warm_db + " (not cold)" if a.warm_db else "the fresh database (everything measured)"
    lines += ["", f"Compile time, s: cold = `--isolated-costs` on {first}; the "
              "closed loop adds the next compile's time (measurements reused, plan run in the model); warm = the "
              "same compile again.", "", "| model | cold (isolated) | closed loop, first | warm |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['t_iso']:.1f} | {r['t_loop']:.1f} | {r['t_warm']:.1f} |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
