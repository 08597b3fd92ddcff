"""Korch's CPU backend vs onnxruntime and OpenVINO vs Korch's unfused plan, per model, plus compile times.

  .venv/bin/python bench/cpu_latency.py [--models candy,yolox_nano,...] [--group paper|heldback|all]
                                        [--runs 30] [--rounds 3] [--threads 2] [--cold] [--batch 1,16]
  .venv/bin/python bench/cpu_latency.py --render RESULTS.json --out RESULTS.md   (the table again, no runs)

For each model: `korch compile MODEL --device cpu -o ART` with measured costs, timed twice: first
against the tuning database as it is (cold when --cold gives a fresh one), then again (warm: every
kernel comes from the database). Then `korch bench --artifact ART` times Korch, onnxruntime
(ORT_ENABLE_ALL), OpenVINO (latency hint, f32 precision; both with the same thread count,
bench/peer_latency.py) and the unfused plan (one kernel per primitive) in alternating rounds in one
process run; the speedup is over the faster peer of each model (ratio of medians), and paired by
round (each round's peer median over Korch's, the median over rounds, against the closer peer:
steady when the machine changes speed between rounds). Results:
bench/results/cpu_latency.md (and .json). fp32; batch 1 unless --batch lists others (a row per model
and batch, each batch exported as its own model).
"""
import argparse
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import export_models  # noqa: E402
from bench_common import SLOW_PACE, at_pace, cpu_name  # noqa: E402

PEERS = ("onnxruntime", "openvino")
PAPER = ["candy", "segformer_b0", "efficientvit_b0", "yolox_nano", "yolov4"]
HELDBACK = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf",
            "shufflenet_v2_x1_0", "squeezenet1_0", "densenet121", "convnext_tiny", "vit_b_16", "swin_t",
            "transformer_encoder"]


def paired_at_pace(r):
    """Paired by round over the rounds where the machine ran at its pace only: per peer, the median
    over those rounds of its round median over Korch's, the closer peer's; None when either peer has
    fewer than two such rounds (the other peer alone would not be the closer one). Where korch bench gives each system's pace around its runs (pace_around_runs: the
    slower of the probes just before and just after them), a round counts for a peer when both its
    and Korch's runs were at pace; in older JSON, when the round began at pace (pace_by_round). This
    VM's slow state comes and goes within seconds and lands on whichever system runs then, so a
    bench whose rounds mix states moves with the mix."""
    k = r.get("korch", {})
    kr = k.get("round_medians_ms") or []
    ratios = []
    for peer in PEERS:
        p = r.get(peer, {})
        rounds = p.get("round_medians_ms") or []
        if len(rounds) != len(kr):
            continue
        if len(k.get("pace_around_runs") or []) == len(kr) == len(p.get("pace_around_runs") or []):
            both = [max(a, b) if a > 0 and b > 0 else 0 for a, b in zip(k["pace_around_runs"], p["pace_around_runs"])]
            at = at_pace(both)
        else:
            pace = k.get("pace_by_round") or []
            at = at_pace(pace) if len(pace) == len(kr) else []
        if len(at) < 2:
            return None
        ratios.append(statistics.median(rounds[i] / kr[i] for i in at))
    return min(ratios) if ratios else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models")
    ap.add_argument("--group", default="all", choices=["paper", "heldback", "all"])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="start from an empty tuning database and kernel cache")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes (a row each)")
    ap.add_argument("--extra-args", default="", help="more korch compile arguments")
    ap.add_argument("--out", default=str(ROOT / "bench/results/cpu_latency.md"))
    ap.add_argument("--render", metavar="JSON",
                    help="compile and time nothing: write --out's table again from an earlier run's JSON (new "
                         "columns on old numbers); its command line and its sections below the table (## headings) "
                         "are kept from --out as it stands")
    a = ap.parse_args()
    if a.render:
        rows = json.loads(Path(a.render).read_text())
        timed = next((r for r in rows if "korch" in r), {})
        a.rounds, a.runs, a.threads = timed.get("rounds", a.rounds), timed.get("runs", a.runs), timed.get("threads", a.threads)
        a.batch = ",".join(sorted({str(r["batch"]) for r in rows}))
        old = Path(a.out).read_text() if Path(a.out).exists() else ""
        command = next((ln.split("`")[1] for ln in old.splitlines() if ln.startswith("Command: `")), "?")
        write_results(rows, a, f"{command}` (its table rendered again from {Path(a.render).name} by "
                               f"`bench/cpu_latency.py --render", with_json=False)
        # Sections written by hand below the table (## headings) stay.
        lines = old.splitlines()
        kept = next((i for i, ln in enumerate(lines) if ln.startswith("## ")), None)
        if kept is not None:
            Path(a.out).write_text(Path(a.out).read_text() + "\n" + "\n".join(lines[kept:]) + "\n")
        return
    korch = ROOT / "build/korch"
    models = a.models.split(",") if a.models else {"paper": PAPER, "heldback": HELDBACK, "all": PAPER + HELDBACK}[a.group]
    env = dict(os.environ, KORCH_PROGRESS="0")
    work = Path(tempfile.mkdtemp(prefix="korch-cpu-bench-"))
    if a.cold:
        env["KORCH_CACHE_DIR"] = str(work / "cache")
    rows = []
    batches = [int(b) for b in a.batch.split(",")]
    for name, batch in [(m, b) for m in models for b in batches]:
        model = export_models.export(name, batch=batch)
        art = work / f"{name}_b{batch}"
        times = []
        log = ""
        first_summary = []  # the first compile's tuning and time lines (cold when the database was)
        for _ in range(2):
            t0 = time.time()
            r = subprocess.run([str(korch), "compile", str(model), "--device", "cpu", "--threads", str(a.threads),
                                "-o", str(art), *a.extra_args.split()], capture_output=True, text=True, env=env)
            times.append(time.time() - t0)
            if r.returncode != 0:
                print(f"{name}: compile failed\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}", file=sys.stderr)
                break
            log = r.stdout
            if not first_summary:
                first_summary = [ln.strip() for ln in log.splitlines()
                                 if re.match(r"\s*(tuning:|profiled:|compile [\d.]+ s|\d+ measurements stayed noisy)", ln)]
        if len(times) < 2:
            rows.append({"model": name, "batch": batch, "error": "compile failed"})
            continue
        tuning = re.search(r"tuning: (\d+) distinct kernels, (\d+) from the database, (\d+) measured, (\d+) failed", log)
        kernels = re.search(r": (\d+) kernels for (\d+) primitives", log)
        js = work / f"{name}_b{batch}.json"
        b = subprocess.run([str(korch), "bench", "--artifact", str(art), "--threads", str(a.threads), "--runs",
                            str(a.runs), "--rounds", str(a.rounds), "--json", str(js)], capture_output=True, text=True,
                           env=env)
        print(b.stdout)
        if b.returncode != 0:
            print(b.stderr, file=sys.stderr)
            rows.append({"model": name, "batch": batch, "error": "bench failed"})
            continue
        res = json.loads(js.read_text())
        res["model"] = name
        # A micro-batched artifact runs its batch-1 plan once per sample (korch compile --micro-batch).
        manifest = json.loads((art / "manifest.json").read_text())
        res["micro_batches"] = manifest.get("micro_batches", 1)
        # The warm compile's predicted latency (plan_seconds, per model run) against bench's median.
        res["predicted_ms"] = manifest["plan_seconds"] * 1e3
        res["kept_run_pace"] = manifest.get("closed_loop", {}).get("kept_run_pace", 0)
        rows.append({"model": name, "batch": batch, "compile_first_s": times[0], "compile_warm_s": times[1],
                     "kernels": int(kernels.group(1)) if kernels else None,
                     "primitives": int(kernels.group(2)) if kernels else None,
                     "distinct_kernels": int(tuning.group(1)) if tuning else None,
                     "compile_first_summary": first_summary, **res})
        print(f"{name} batch {batch}: compile {times[0]:.1f} s / warm {times[1]:.1f} s", flush=True)

    write_results(rows, a, f".venv/bin/python bench/cpu_latency.py {shlex.join(sys.argv[1:])}")

def write_results(rows, a, command, with_json=True):
    """Writes the table of `rows` (one per model and batch, as main() collects them) to a.out (and the
    rows to its .json when with_json) and prints it."""
    def fmt(t):
        return f"{t['median_ms']:.2f} [{t['p10_ms']:.2f}-{t['p90_ms']:.2f}]" if t and "median_ms" in t else "-"
    versions = sorted({r[p]["note"] for r in rows for p in PEERS if "median_ms" in r.get(p, {})})
    lines = [
        "# Korch CPU backend vs onnxruntime and OpenVINO vs Korch unfused",
        "",
        f"Command: `{command}`  ",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores; {a.threads} threads for every system; fp32, batch {a.batch}.  ",
        f"Timing: `korch bench`, {a.rounds} alternating rounds x {a.runs} runs after warm-up; ms, median [p10-p90].  ",
        "onnxruntime: ORT_ENABLE_ALL, intra-op threads = threads, sequential.  ",
        "OpenVINO: CPU, PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS = threads, INFERENCE_PRECISION_HINT=f32, one stream.  ",
        f"Peer versions: {', '.join(versions) or '-'}.  ",
        "unfused: Korch's own plan with one kernel per primitive (no orchestration), on the whole batch.  ",
        "micro-batches: N when the artifact runs its batch-1 plan once per sample (`--micro-batch auto` found it faster "
        "than the batch-N plan), else 1.  ",
        "reorders: layout conversions Korch's library calls make per run (`korch bench`).  ",
        "slow rounds: rounds that began with the machine slower than its best (its pace probe over the fastest the "
        "tuning database has seen above 1.3x: this VM's slow phases, `korch bench`'s pace_by_round).  ",
        "Compile: first = `korch compile` against the tuning database as found"
        + (" (cold: empty database and kernel cache)" if a.cold else "") + "; warm = the same command again.  ",
        "predicted: the warm compile's manifest plan_seconds; measured / predicted: korch ms over it; compile's pace: "
        "the machine's while the closed loop ran the kept plan (manifest closed_loop.kept_run_pace).  ",
        "paired at pace: paired by round over the rounds where both Korch's and the peer's runs met the machine at "
        "its pace (`korch bench` probes it between systems: pace_around_runs; older runs: rounds that began at pace), "
        "two or more, else -: the figure a slow state landing on one system's runs moves least.",
        "",
        "| model | batch | prims | kernels | micro-batches | reorders | korch ms | onnxruntime ms | openvino ms | unfused ms "
        "| faster peer | vs faster peer | paired by round | paired at pace | fusion gain | slow rounds | compile first s "
        "| compile warm s | predicted ms | measured / predicted | compile's pace |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    speedups, paired_speedups, at_pace_speedups = {}, {}, {}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | | | | | {r['error']} | | | | | | | | | | | | | | |")
            continue
        k, u = r["korch"], r.get("korch_unfused")
        fp = r.get("faster_peer")
        sp = r[fp]["median_ms"] / k["median_ms"] if fp else None
        if sp:
            speedups.setdefault(r["batch"], []).append(sp)
        # Paired by round (korch bench): each round's peer median over Korch's in that round, the
        # median over rounds; against the peer that is closer by that measure.
        pairs = [r[p]["speedup_paired"] for p in PEERS if r.get(p, {}).get("speedup_paired")]
        psp = min(pairs) if pairs else None
        if psp:
            paired_speedups.setdefault(r["batch"], []).append(psp)
        asp = paired_at_pace(r)
        if asp:
            at_pace_speedups.setdefault(r["batch"], []).append(asp)
        vs = f"{sp:.2f}x" if sp else "-"
        pvs = f"{psp:.2f}x" if psp else "-"
        gain = f"{u['median_ms'] / k['median_ms']:.2f}x" if u else "-"
        pace = k.get("pace_by_round") or []
        slow = f"{sum(p > SLOW_PACE for p in pace)} of {len(pace)}" if pace else "-"
        lines.append(f"| {r['model']} | {r['batch']} | {r['primitives']} | {r['kernels']} | {r.get('micro_batches', 1)} | "
                     f"{k.get('reorders_per_run', '-')} | {fmt(k)} | {fmt(r.get('onnxruntime'))} | "
                     f"{fmt(r.get('openvino'))} | {fmt(u)} | {fp or '-'} | {vs} | {pvs} | "
                     f"{f'{asp:.2f}x' if asp else '-'} | {gain} | {slow} | "
                     f"{r['compile_first_s']:.0f} | {r['compile_warm_s']:.1f} | "
                     + (f"{r['predicted_ms']:.2f} | {k['median_ms'] / r['predicted_ms']:.2f} | " if r.get("predicted_ms")
                        else "- | - | ")
                     + (f"{r['kept_run_pace']:.2f} |" if r.get("kept_run_pace") else "- |"))
    for batch, sps in speedups.items():
        g = math.exp(sum(math.log(s) for s in sps) / len(sps))
        lines += ["", f"Batch {batch}: geometric mean speedup over the faster peer **{g:.2f}x** over {len(sps)} models "
                  f"(Korch faster on {sum(s > 1 for s in sps)})."]
        if paired_speedups.get(batch):
            ps = paired_speedups[batch]
            pg = math.exp(sum(math.log(s) for s in ps) / len(ps))
            lines += [f"Paired by round, against the closer peer: geometric mean **{pg:.2f}x** over {len(ps)} models "
                      f"(Korch faster on {sum(s > 1 for s in ps)})."]
        if at_pace_speedups.get(batch):
            ap = at_pace_speedups[batch]
            ag = math.exp(sum(math.log(s) for s in ap) / len(ap))
            lines += [f"Paired at pace (models where each peer has two or more rounds with its runs and Korch's at "
                      f"the machine's pace): geometric mean **{ag:.2f}x** over {len(ap)} models (Korch faster on "
                      f"{sum(s > 1 for s in ap)})."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    if with_json:
        Path(a.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
