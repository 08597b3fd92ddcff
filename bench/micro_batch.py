"""Micro-batching against the whole batch, per model: the same model compiled twice, with
`--micro-batch auto` (the default: micro-batches of 4 and 1 timed against the batch-N plan, the
fastest kept) and `--micro-batch off` (the batch-N plan), both benched in alternating `korch bench`
calls beside onnxruntime and OpenVINO.

    .venv/bin/python bench/micro_batch.py --models mobilenet_v2,efficientnet_b0 --batch 16 --out F.md

A round is three calls of `korch bench --artifact A --rounds 1 --runs R --no-unfused`: the micro-batched
artifact and the whole-batch one (`--peers none`, seconds apart: this VM's slow phases, which slow
cache-resident work more than streaming work, last longer), then the whole-batch one beside
onnxruntime and OpenVINO. The per-round ratio whole / micro is the comparison to read.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import export_models  # noqa: E402


def bench(korch, art, runs, threads, peers):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [str(korch), "bench", "--artifact", str(art), "--rounds", "1", "--runs", str(runs), "--threads",
               str(threads), "--no-unfused", "--json", f.name]
        if not peers:
            cmd += ["--peers", "none"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return json.loads(Path(f.name).read_text())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    korch = ROOT / "build/korch"
    work = Path(tempfile.mkdtemp(prefix="korch-micro-"))
    rows = []
    for name in a.models.split(","):
        model = export_models.export(name, batch=a.batch)
        arts = {}
        for mode in ("auto", "off"):
            arts[mode] = work / f"{name}_{mode}"
            subprocess.run([str(korch), "compile", str(model), "-o", str(arts[mode]), "--threads", str(a.threads),
                            "--micro-batch", mode, "-q"], check=True, capture_output=True, text=True)
        t = {"micro": [], "whole": [], "onnxruntime": [], "openvino": []}
        ratio = []  # whole / micro within one round: seconds apart, the same state of this VM
        for _ in range(a.rounds):
            t["micro"].append(bench(korch, arts["auto"], a.runs, a.threads, False)["korch"]["median_ms"])
            t["whole"].append(bench(korch, arts["off"], a.runs, a.threads, False)["korch"]["median_ms"])
            ratio.append(t["whole"][-1] / t["micro"][-1])
            r = bench(korch, arts["off"], a.runs, a.threads, True)
            for p in ("onnxruntime", "openvino"):
                if "median_ms" in r.get(p, {}):
                    t[p].append(r[p]["median_ms"])
        med = {k: statistics.median(v) if v else None for k, v in t.items()}
        peer = min((v, k) for k, v in med.items() if k in ("onnxruntime", "openvino") and v)
        manifest = json.loads((arts["auto"] / "manifest.json").read_text())
        runs = manifest.get("micro_batches", 1)
        chosen = f"{runs} x batch {a.batch // runs}" if runs > 1 else "whole batch"
        rows.append((name, med, t, peer, ratio, chosen))
        print(name, {k: round(v, 2) if v else None for k, v in med.items()}, [round(x, 2) for x in ratio], flush=True)
    lines = [
        f"Command: `.venv/bin/python bench/micro_batch.py {' '.join(sys.argv[1:])}`  ",
        f"Batch {a.batch}, {a.threads} threads, fp32; {a.rounds} rounds, each three `korch bench --rounds 1 --runs "
        f"{a.runs} --no-unfused` calls: the `--micro-batch auto` artifact, the `off` one (both `--peers none`), then the "
        "whole-batch one with onnxruntime and OpenVINO; ms, median of the rounds' medians [min-max]; whole / micro: "
        "per round (the two calls seconds apart), median [min-max].",
        "",
        "| model | auto chose | auto ms | whole batch (off) ms | off / auto | onnxruntime ms | openvino ms "
        "| auto vs faster peer | off vs faster peer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, med, t, (pv, _), ratio, chosen in rows:
        span = lambda v: f"[{min(v):.2f}-{max(v):.2f}]"  # noqa: E731
        peer_ms = lambda k: f"{med[k]:.2f} {span(t[k])}" if med[k] else "-"  # noqa: E731
        lines.append(f"| {name} | {chosen} | {med['micro']:.2f} {span(t['micro'])} | {med['whole']:.2f} {span(t['whole'])} | "
                     f"{statistics.median(ratio):.2f} {span(ratio)} | {peer_ms('onnxruntime')} | {peer_ms('openvino')} | "
                     f"{pv / med['micro']:.2f}x | {pv / med['whole']:.2f}x |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
