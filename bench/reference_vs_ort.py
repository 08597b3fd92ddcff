#!/usr/bin/env python3
"""Accuracy and speed of Korch's reference interpreter against onnxruntime, per model.

    .venv/bin/python bench/reference_vs_ort.py [--group default|extra|all] [--out bench/results/reference_vs_ort.md]

For each exported model (scripts/export_models.py, cached in .cache/models): runs
`korch run --backend reference --random-inputs 0` (whole process, load + fold + run)
and onnxruntime (2 threads, graph optimizations off, the same inputs), and records the
relative L2 error of every output and both wall times. The reference interpreter is the
correctness oracle, not the fast path: this table is its accuracy record and the cost of
using it in tests. Writes a Markdown table with the command and machine.
"""
import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import compare_with_ort  # noqa: E402
import export_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--group", default="default", choices=["default", "extra", "all"])
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "reference_vs_ort.md"))
    args = ap.parse_args()
    names = {"default": export_models.DEFAULT, "extra": export_models.EXTRA,
             "all": export_models.DEFAULT + export_models.EXTRA}[args.group]
    rows = []
    for name in names:
        path = export_models.export(name, 1, export_models.default_out_dir(), False)
        r = compare_with_ort.compare(path, verbose=False)
        worst = max(c.rel_err for c in r.checks)
        ok = all(c.ok for c in r.checks)
        rows.append((name, "OK" if ok else "FAIL", worst, r.korch_s * 1e3, r.ort_s * 1e3))
        print(f"{name:28s} {'OK' if ok else 'FAIL':4s} rel {worst:.2e}  korch {r.korch_s*1e3:8.1f} ms  ort {r.ort_s*1e3:8.1f} ms",
              flush=True)
    cpu = subprocess.run(["sh", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    with open(args.out, "w") as f:
        f.write("# Reference interpreter vs onnxruntime\n\n")
        f.write(f"Command: `.venv/bin/python bench/reference_vs_ort.py --group {args.group}`  \n")
        f.write(f"Date: {datetime.date.today()}; machine: {cpu}, {os.cpu_count()} cores, {platform.system()}  \n")
        f.write("korch ms: whole `korch run --backend reference` process (load, fold, run, write .npy); "
                "ort ms: one `InferenceSession.run`, 2 threads, graph optimizations off. Single runs on a "
                "shared machine: orientation only, not a benchmark of the optimizer.\n\n")
        f.write("| model | result | max rel L2 error | korch ms | ort ms |\n|---|---|---|---|---|\n")
        for n, ok, e, k, o in rows:
            f.write(f"| {n} | {ok} | {e:.2e} | {k:.0f} | {o:.1f} |\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
