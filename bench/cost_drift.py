"""Why a plan's predicted latency differs from what its artifact measures: per model and per kernel.

  .venv/bin/python bench/cost_drift.py --artifacts DIR [--models a,b] [--runs 30] [--out FILE.md]

DIR holds one CPU artifact per model, named MODEL or MODEL.<anything> (e.g. the artifacts
bench/compare_builds.py leaves behind). For each, `korch bench --artifact A --per-kernel 1` runs
the model end to end with one clock read between consecutive kernels, which gives every kernel's
in-model time (median over the runs); it is compared with the cost the plan used (plan.json,
isolated measurements from the tuning database). Two variants of the same run attribute part of
the difference:
  * KORCH_NO_LAYOUT_HANDOFF=1: without the runtime's layout handoff between oneDNN steps (decided
    after selection, so the costs never saw it);
  * FTZ/DAZ: denormal floats flushed to zero (an LD_PRELOAD'ed constructor sets MXCSR), which
    shows how much of the in-model time is arithmetic on denormals that the isolated measurement's
    data did not have.
The timer's own cost is the difference between the end-to-end median with and without the per-
kernel clock reads. Results: a table per model and the worst kernels overall.
"""
import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FTZ_C = r"""
#include <pmmintrin.h>
#include <xmmintrin.h>
__attribute__((constructor)) static void korch_ftz(void) {
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
}
"""


def bench(korch, art, runs, env, per_kernel=True):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [korch, "bench", "--artifact", str(art), "--peers", "none", "--no-unfused", "--runs", str(runs), "--rounds", "1",
               "--json", f.name]
        if per_kernel:
            cmd += ["--per-kernel", "1"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        return json.loads(Path(f.name).read_text())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--models")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--korch", default=str(ROOT / "build/korch"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/cost_drift.md"))
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="korch-drift-"))
    (work / "ftz.c").write_text(FTZ_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(work / "ftz.c"), "-o", str(work / "ftz.so")], check=True)
    arts = sorted(p for p in Path(a.artifacts).iterdir() if (p / "plan.json").exists() and (p / "program.json").exists())
    if a.models:
        want = a.models.split(",")
        arts = [p for p in arts if p.name.split(".")[0] in want]
    base = dict(os.environ, KORCH_PROGRESS="0")
    rows, worst = [], []
    for art in arts:
        name = art.name.split(".")[0]
        manifest = json.loads((art / "manifest.json").read_text())
        pred = manifest["plan_seconds"] * 1e3
        plain = bench(a.korch, art, a.runs, base, per_kernel=False)["korch"]["median_ms"]
        d = bench(a.korch, art, a.runs, base)
        nh = bench(a.korch, art, a.runs, dict(base, KORCH_NO_LAYOUT_HANDOFF="1"))
        ftz = bench(a.korch, art, a.runs, dict(base, LD_PRELOAD=str(work / "ftz.so")))
        def total(j):
            return sum(k["median_ms"] for k in j["kernels"])
        rows.append((name, pred, plain, total(d), total(nh), total(ftz), d["korch"]["median_ms"]))
        for k, k_nh, k_ftz in zip(d["kernels"], nh["kernels"], ftz["kernels"]):
            if k["predicted_ms"] > 0:
                worst.append((k["median_ms"] - k["predicted_ms"], name, k["step"], k["predicted_ms"], k["median_ms"],
                              k_nh["median_ms"], k_ftz["median_ms"], k["note"][:70]))
        print(f"{name}: predicted {pred:.3f}, end to end {plain:.3f}, kernels in the model {total(d):.3f} "
              f"(no handoff {total(nh):.3f}, FTZ {total(ftz):.3f})", flush=True)
    lines = ["# Predicted against measured: where the difference comes from (CPU)", "",
             f"Command: `.venv/bin/python bench/cost_drift.py --artifacts {a.artifacts} --runs {a.runs}`  ",
             "predicted = plan.json's sum of kernel costs (isolated measurements); end to end = `korch bench` median; "
             "in-model = sum of the kernels' medians with one clock read between kernels; no handoff = the same "
             "with KORCH_NO_LAYOUT_HANDOFF=1; FTZ = the same with denormals flushed to zero. ms, 2 threads.", "",
             "| model | predicted | end to end | end to end / predicted | in-model | in-model, no handoff | in-model, FTZ | bench median in that process |",
             "|---|---|---|---|---|---|---|---|"]
    for name, pred, plain, t, nh, ftz, timed in rows:
        lines.append(f"| {name} | {pred:.3f} | {plain:.3f} | {plain / pred:.2f} | {t:.3f} | {nh:.3f} | {ftz:.3f} | {timed:.3f} |")
    worst.sort(reverse=True)
    lines += ["", "Kernels that take the most time beyond their cost (ms):", "",
              "| model | step | predicted | in-model | no handoff | FTZ | kernel |", "|---|---|---|---|---|---|---|"]
    for extra, name, step, p, m, m_nh, m_ftz, note in worst[:25]:
        lines.append(f"| {name} | {step} | {p:.3f} | {m:.3f} | {m_nh:.3f} | {m_ftz:.3f} | {note} |")
    worst.sort()
    lines += ["", "Kernels that take the least time against their cost (ms):", "",
              "| model | step | predicted | in-model | no handoff | FTZ | kernel |", "|---|---|---|---|---|---|---|"]
    for extra, name, step, p, m, m_nh, m_ftz, note in worst[:15]:
        lines.append(f"| {name} | {step} | {p:.3f} | {m:.3f} | {m_nh:.3f} | {m_ftz:.3f} | {note} |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
