#!/usr/bin/env bash
# The GPU check: one prepared run on a lent NVIDIA machine (the H200 of the device tool), which has
# CUDA 13, PyTorch with torch.compile, onnx and onnxruntime but no package registries.
#
# Here (x86-64, once per change):   scripts/build.sh && scripts/gpu_bundle.sh
# There (through the device tool):  run(command="bash scripts/gpu_check.sh", carry=[".gpu_bundle"],
#                                       timeout_s=600)
# In under 8 minutes (GPU_CHECK_BUDGET seconds, default 450; models that would start after it are
# listed as not run) it:
#   1. unpacks the bundle (korch, the test binaries, their libraries) and finds NVRTC, cuBLASLt and
#      cuDNN (the CUDA toolkit's folder or PyTorch's nvidia-* wheels); `korch devices` must see the GPU;
#   2. runs the CUDA unit tests (host-side: library-call plans, device replay, emulator);
#   3. per model (the paper's five, two transformers, two CNNs, cheapest first): exports it with
#      PyTorch's weights (bench/gpu_peers.py --export-dir: the same weights the peers run),
#      compiles it for the GPU with measured costs (each kernel checked on the GPU before its time
#      is kept; per-model limit GPU_CHECK_COMPILE_S, default 120 s, then analytic costs, said in
#      the table), checks the artifact's outputs against the reference interpreter (relative L2
#      within 1e-4), and times it (`korch bench`, 3 rounds x 50 runs, CUDA graph replay) beside
#      PyTorch eager and torch.compile (bench/gpu_peers.py, fp32, TF32 off) at batch 1, then the
#      paper models at batch 16 (GPU_CHECK_MODELS_B16) while the budget lasts;
#   4. measures the device-to-device copy bandwidth (the ceiling for memory-bound kernels);
#   5. prints a short table last and writes under $OUT: gpu_check.md (the table), results.json
#      (everything), log.txt, and tuning.db (copy it to .gpu_bundle/tuning.db after gpu_bundle.sh
#      and the next run starts warm from it).
# GPU_CHECK_DRY=1 rehearses the script on a machine without a GPU (here): analytic costs, the
# artifacts on the CUDA emulator, the peers on the CPU, no bench; for testing the script only.
# Exit status: 0 when every model that ran passed its check, 1 otherwise, 2 when nothing could run.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-/tmp/korch_gpu_out}
W=${GPU_CHECK_WORK:-/tmp/korch_gpu_work}
BUDGET=${GPU_CHECK_BUDGET:-450}
COMPILE_S=${GPU_CHECK_COMPILE_S:-120}
MODELS=${GPU_CHECK_MODELS:-"candy efficientvit_b0 yolox_nano transformer_encoder resnet18 mobilenet_v2 vit_b_16 segformer_b0 yolov4"}
# Batch 16 (throughput) for these, after every model at batch 1, while the budget lasts.
MODELS_B16=${GPU_CHECK_MODELS_B16:-"candy efficientvit_b0 yolox_nano segformer_b0 yolov4"}
mkdir -p "$OUT" "$W"
exec > >(tee -a "$OUT/log.txt") 2>&1
say() { printf '[gpu_check %4ds] %s\n' "$SECONDS" "$*"; }

# 1. The bundle and the CUDA libraries.
[ -f .gpu_bundle/bundle.tar.xz ] || { say "no .gpu_bundle/bundle.tar.xz: run scripts/gpu_bundle.sh here and carry .gpu_bundle"; exit 2; }
rm -rf "$W/bundle" && mkdir -p "$W/bundle" && tar -C "$W/bundle" -xJf .gpu_bundle/bundle.tar.xz
K="$W/bundle/bin/korch"
PY=${PYTHON:-python3}
libdirs=$($PY - <<'EOF' 2>/dev/null
import glob, os
dirs = set()
try:
    import nvidia
    for p in nvidia.__path__:
        dirs.update(os.path.dirname(f) for f in glob.glob(os.path.join(p, "*", "lib", "lib*.so*")))
except Exception:
    pass
print(":".join(sorted(dirs)))
EOF
)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do [ -d "$d" ] && libdirs="$libdirs:$d"; done
export LD_LIBRARY_PATH="$W/bundle/lib:${libdirs#:}:${LD_LIBRARY_PATH:-}"
export KORCH_CACHE_DIR="$W/cache"
mkdir -p "$KORCH_CACHE_DIR"
DB="$OUT/tuning.db"
[ -f .gpu_bundle/tuning.db ] && cp .gpu_bundle/tuning.db "$DB" && say "starting from the carried tuning database"
say "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
"$K" devices | tee "$W/devices.txt"
DRY=${GPU_CHECK_DRY:-0}
EMULATE=(); PEER_DEVICE=cuda
if [ "$DRY" = 1 ]; then
  say "DRY RUN: no GPU; analytic costs, artifacts on the emulator, peers on the CPU (rehearsal only)"
  EMULATE=(--emulate); PEER_DEVICE=cpu; COMPILE_S=1
elif ! grep -q "^cuda  compile, run" "$W/devices.txt"; then
  say "korch sees no usable GPU (above): nothing to check"; exit 2
fi

# 2. CUDA unit tests (host-side logic; they need no GPU but run here too).
tests_ok=1
for t in korch_codegen_tests korch_pipeline_tests korch_runtime_tests; do
  "$W/bundle/bin/$t" --gtest_filter='Cuda*:DeviceReplay*' --gtest_brief=1 >"$W/$t.log" 2>&1 || { tests_ok=0; tail -20 "$W/$t.log"; }
done
say "CUDA unit tests: $([ $tests_ok = 1 ] && echo passed || echo FAILED)"

# 3. Models.
mkdir -p "$W/models"
: >"$W/rows.jsonl"
items="$(for m in $MODELS; do echo "$m:1"; done) $(for m in $MODELS_B16; do echo "$m:16"; done)"
for item in $items; do
  m=${item%%:*}; b=${item##*:}
  if [ "$SECONDS" -ge "$BUDGET" ]; then
    echo "{\"model\": \"$m\", \"batch\": $b, \"status\": \"not run: the ${BUDGET} s budget was spent\"}" >>"$W/rows.jsonl"; continue
  fi
  say "== $m at batch $b"
  name=$m; [ "$b" = 1 ] || name=${m}_b$b
  onnx="$W/models/$name.onnx"
  [ -f "$onnx" ] || $PY bench/gpu_peers.py "$m" --batch "$b" --export-dir "$W/models" >"$W/$name.export.log" 2>&1
  if [ ! -f "$onnx" ]; then
    echo "{\"model\": \"$m\", \"batch\": $b, \"status\": \"export failed\", \"log\": $(tail -3 "$W/$name.export.log" | $PY -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >>"$W/rows.jsonl"; continue
  fi
  art="$W/$name.korch"; costs=measured
  t0=$SECONDS
  if ! timeout "$COMPILE_S" "$K" compile "$onnx" --device cuda -o "$art" --tuning-db "$DB" --json >"$W/$name.compile.json" 2>"$W/$name.compile.log"; then
    say "measured compile of $m did not finish in ${COMPILE_S} s (or failed): $(tail -2 "$W/$name.compile.log" | tr '\n' ' ')"
    costs=analytic
    timeout 120 "$K" compile "$onnx" --device cuda --cost analytic --no-verify -o "$art" --json >"$W/$name.compile.json" 2>>"$W/$name.compile.log" ||
      { echo "{\"model\": \"$m\", \"batch\": $b, \"status\": \"compile failed\"}" >>"$W/rows.jsonl"; continue; }
  fi
  compile_s=$((SECONDS - t0))
  # The reference interpreter on seeded inputs, then the artifact on the same inputs.
  "$K" run "$onnx" --random-inputs 0 --outputs "$W/$name.ref" >/dev/null 2>"$W/$name.ref.log"
  "$K" run --artifact "$art" "${EMULATE[@]}" --inputs "$W/$name.ref" --outputs "$W/$name.got" >/dev/null 2>"$W/$name.run.log"
  check=$($PY - "$W/$name.got" "$W/$name.ref" <<'EOF'
import sys, pathlib, numpy as np
got, ref = map(pathlib.Path, sys.argv[1:])
files = sorted(got.glob("*.npy"))
if not files: print("no outputs"); sys.exit()
worst = 0.0
for f in files:
    g, r = np.load(f).astype(np.float64), np.load(ref / f.name).astype(np.float64)
    if g.shape != r.shape: print(f"{f.name}: shape {g.shape} vs {r.shape}"); sys.exit()
    if not np.isfinite(g).all(): print(f"{f.name}: not finite"); sys.exit()
    worst = max(worst, float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)))
print(f"{'pass' if worst <= 1e-4 else 'FAIL'} {worst:.1e}")
EOF
)
  [ "$DRY" = 1 ] || "$K" bench --artifact "$art" --runs 50 --rounds 3 --peers none --no-unfused --json "$W/$name.bench.json" >"$W/$name.bench.log" 2>&1
  $PY bench/gpu_peers.py "$m" --batch "$b" --rounds 3 --runs "$([ "$DRY" = 1 ] && echo 2 || echo 50)" --device "$PEER_DEVICE" \
    --json "$W/$name.peers.json" >"$W/$name.peers.log" 2>&1
  $PY - "$m" "$costs" "$compile_s" "$check" "$W" "$b" "$name" >>"$W/rows.jsonl" <<'EOF'
import json, sys, pathlib
m, costs, compile_s, check, w, batch, name = sys.argv[1:]
w = pathlib.Path(w)
def load(p):
    try: return json.loads((w / p).read_text())
    except Exception as e: return {"error": str(e)}
bench, peers, comp = load(f"{name}.bench.json"), load(f"{name}.peers.json"), load(f"{name}.compile.json")
row = {"model": m, "batch": int(batch), "status": "ran", "costs": comp.get("cost_model") or costs, "compile_s": int(compile_s), "check": check,
       "korch_ms": bench.get("korch", {}).get("median_ms"), "replay": bench.get("replay"),
       "predicted_ms": ((comp.get("plan") or {}).get("plan_s") or 0) * 1e3 or None}
for r in peers.get("models", []):
    if r.get("batch") == int(batch):
        row.update(eager_ms=r.get("eager_ms"), compile_ms=r.get("compile_ms"), torch_compile_s=r.get("compile_s"),
                   peer_error=r.get("error"))
print(json.dumps(row))
EOF
  say "$m: $(tail -1 "$W/rows.jsonl")"
done

# 4. Copy bandwidth (read + write bytes over time), the ceiling of memory-bound kernels.
bw=$([ "$DRY" = 1 ] && echo "(dry run)" || $PY - <<'EOF' 2>&1
import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(True), torch.cuda.Event(True)
s.record()
for _ in range(10): y.copy_(x)
e.record(); torch.cuda.synchronize()
print(f"{2 * 10 * x.numel() / (s.elapsed_time(e) * 1e-3) / 1e12:.2f}")
EOF
)
say "device-to-device copy: $bw TB/s (read + write); memory-bound kernels against it: not measured per kernel by this script yet"

# 5. The table, last.
$PY - "$W/rows.jsonl" "$OUT" "$tests_ok" "$bw" <<'EOF'
import json, sys, pathlib, datetime
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out, tests_ok, bw = pathlib.Path(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
f = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "-"
lines = [f"GPU check {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC: `bash scripts/gpu_check.sh` (fp32, TF32 off; korch times include the input upload and output download, the peers start from inputs on the GPU)",
         f"CUDA unit tests: {'passed' if tests_ok else 'FAILED'}; device-to-device copy {bw} TB/s", "",
         "| model | batch | costs | compile s | check (rel L2) | predicted ms | korch ms | eager ms | torch.compile ms | vs compile |",
         "|---|---|---|---|---|---|---|---|---|---|"]
ok = tests_ok
for r in rows:
    if r.get("status") != "ran":
        lines.append(f"| {r['model']} | {r.get('batch')} | {r.get('status')} | | | | | | | |"); continue
    ok &= r["check"].startswith("pass")
    sp = r["compile_ms"] / r["korch_ms"] if r.get("compile_ms") and r.get("korch_ms") else None
    lines.append(f"| {r['model']} | {r['batch']} | {r['costs']} | {r['compile_s']} | {r['check']} | {f(r.get('predicted_ms'))} | "
                 f"{f(r.get('korch_ms'))} | {f(r.get('eager_ms'))} | {f(r.get('compile_ms'))} | "
                 f"{f'{sp:.2f}x' if sp else '-'} |")
(out / "gpu_check.md").write_text("\n".join(lines) + "\n")
(out / "results.json").write_text(json.dumps({"rows": rows, "tests_ok": tests_ok, "copy_tb_s": bw}, indent=1))
print("\n".join(lines))
sys.exit(0 if ok and rows else 1)
EOF
