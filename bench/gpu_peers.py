#!/usr/bin/env python3
"""PyTorch peers of Korch's evaluation models: eager and torch.compile latency, fp32, TF32 off.

    gpu_peers.py MODEL [MODEL ...] [--batch 1 16] [--rounds 3] [--runs 20] [--device cuda]
                 [--no-compile] [--json OUT.json] [--export-dir DIR]
    gpu_peers.py --serve MODEL [--batch 1] [--device cuda] [--no-compile] [--threads N]  # korch bench

    gpu_peers.py candy yolox_nano --json peers.json          # time both peers at batch 1 and 16
    gpu_peers.py paper heldback --json peers.json            # group names expand (see --help)
    gpu_peers.py candy --device cpu --batch 1 --rounds 1 --runs 2 --no-compile   # smoke test
    gpu_peers.py paper --export-dir /tmp/models              # ONNX files Korch compiles, no timing

Models, weights and inputs come from ``scripts/export_models.py``: each model is built exactly as
its ``export()`` builds it (``torch.manual_seed(0)``, ``spec.build().eval()``,
``make_weights_nontrivial`` calibrated on batch-1 inputs), so the peers run the very weights of the
exported ONNX file. The inputs at each batch are ``example_inputs(spec, batch)`` drawn from the same
RNG state as in ``export()``, i.e. the tensors the exporter traced with.

Precision: fp32 with TF32 off through the legacy switches only
(``torch.backends.cuda.matmul.allow_tf32 = False``, ``torch.backends.cudnn.allow_tf32 = False``,
``torch.set_float32_matmul_precision("highest")``); the flags are read back into the JSON. The
newer ``fp32_precision`` API is deliberately not written: torch >= 2.9 raises when the legacy and
new APIs are mixed. cudnn.benchmark stays at its default (off).

Timing: per model and batch, the compiled peer's first call (Dynamo + Inductor compile and one run)
is timed alone as ``compile_s``. Then ``--rounds`` rounds alternate eager, compiled, eager,
compiled, ...; each peer's turn is 3 warm-up calls then ``--runs`` timed calls. Each call is timed
with CUDA events (``--device cpu``: ``time.perf_counter``), one call at a time with the device idle
before it. Reported: the median over all timed calls of a peer (``*_ms``) and its spread
(p90 - p10) / median. Both peers run under ``torch.inference_mode()``.

torch.compile uses the default mode with ``dynamic=False`` and ``torch._dynamo.reset()`` before
each model/batch (a static-shape graph per batch, no recompile into a dynamic-batch graph).
Not ``max-autotune``: its GEMM/conv autotuning takes minutes per model and batch, which does not
fit the device time of one run over the model set. Inductor's on-disk caches may make
``compile_s`` smaller on a second run of the same models.

Checks (in the JSON): ``output_ok`` -- every floating eager output is finite and, if it has more
than one element, has std > 0; ``compiled_matches_eager`` -- every output of the compiled model is
within relative L2 error 1e-3 of the eager one (largest error in ``compile_rel_l2``).

Output: JSON to ``--json`` (rewritten after every model/batch, so a run cut short keeps what it
measured; ``"finished": true`` once complete), else to stdout at the end; a table on stderr.
Exit 1 if no model/batch produced an eager time, 2 if CUDA was asked for but is unavailable.

--export-dir DIR: no timing; export every model at every batch with ``export_models.export(name,
batch, DIR)`` and print the paths. On torch versions whose ``torch.onnx.export`` takes ``dynamo``,
``dynamo=False`` is passed (the TorchScript exporter export_models.py was written for). A file that
already exists in DIR is kept (export()'s rule): use a fresh DIR so the files come from this torch.
A model that fails to build or export is reported on stderr; exit 1 only if every model failed.

--serve MODEL (``korch bench --torch-model MODEL``, which starts this once and keeps it for all its
rounds): builds the model and its inputs at the one ``--batch`` exactly as the timing mode does
(same weights, same inputs, fp32, TF32 off, ``torch.inference_mode()``, torch.compile in the
default mode with ``dynamic=False``, its first call timed as ``compile_s``), prints one JSON line
``{"ready": true, "torch", "device", "tf32", "precision_flags", "compile_mode", "compile_s",
"compiled_matches_eager", "compile_rel_l2", "output_ok", "inputs": [{"shape", "dtype"}],
"errors"}`` (or ``{"ready": false, "error"}`` and exits), then answers each stdin line with one
JSON line on stdout:
    time eager|compile WARMUP RUNS   ->  {"samples_ms": [RUNS values]}  or  {"error": "..."}
    quit (or end of stdin)           ->  exits 0
Without torch.compile (torch < 2.0) or with --no-compile, ``time compile`` answers an error that
says why; eager is unaffected. Everything else printed (by Python or by C code) goes to stderr.
What serve times differs from the timing mode on purpose: it matches what korch bench times for
its artifact (``Executable::run`` on host tensors). Each call is host to host: the input tensors,
kept in host memory, are copied to the device, the model runs, every output tensor is copied back
to host memory, and the device is synchronised; wall clock (``time.perf_counter``) per call. The
timing mode instead starts from inputs already on the device and uses CUDA events.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import inspect
import json
import math
import os
import platform
import sys
import time
import traceback
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_common import timed_samples  # noqa: E402
WARMUP = 3            # untimed calls before each peer's timed calls, every round
MATCH_REL_L2 = 1e-3   # compiled vs eager agreement threshold


def load_export_models() -> ModuleType:
    """scripts/export_models.py as a module (registered before exec: its dataclass needs that)."""
    path = REPO / "scripts" / "export_models.py"
    spec = importlib.util.spec_from_file_location("export_models", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["export_models"] = module
    spec.loader.exec_module(module)
    return module


def resolve_names(em: ModuleType, requested: list[str], ap: argparse.ArgumentParser) -> list[str]:
    """Model names in order, group names (paper, heldback, extra, default) expanded, no repeats."""
    names: list[str] = []
    unknown: list[str] = []
    for r in requested:
        group = em.GROUPS.get(r)
        if group is not None:
            names += [n for n in group if n not in names]
        elif r in em.MODELS:
            if r not in names:
                names.append(r)
        else:
            unknown.append(r)
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}\n  models: {', '.join(em.MODELS)}"
                 f"\n  groups: {', '.join(sorted(em.GROUPS))}")
    return names


# --------------------------------------------------------------------------- #
# Export mode
# --------------------------------------------------------------------------- #
@contextlib.contextmanager
def torchscript_onnx_export() -> Iterator[None]:
    """While active, torch.onnx.export defaults to the TorchScript exporter (dynamo=False) where
    the installed torch has a ``dynamo`` keyword, and drops keywords its signature no longer has
    (only possible if export_models.py's ``training=`` / ``do_constant_folding=`` get removed
    upstream; both equal the defaults there)."""
    import torch
    import torch.onnx

    original = torch.onnx.export
    try:
        params = inspect.signature(original).parameters
    except (TypeError, ValueError):  # no introspectable signature: leave it alone
        yield
        return
    has_dynamo = "dynamo" in params
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    def export_torchscript(*args: Any, **kwargs: Any) -> Any:
        if has_dynamo:
            kwargs.setdefault("dynamo", False)
        if not open_kwargs:
            dropped = [k for k in kwargs if k not in params]
            for k in dropped:
                del kwargs[k]
            if dropped:
                print(f"gpu_peers: torch.onnx.export has no {', '.join(dropped)}; not passed",
                      file=sys.stderr)
        return original(*args, **kwargs)

    torch.onnx.export = export_torchscript
    try:
        yield
    finally:
        torch.onnx.export = original


def export_all(em: ModuleType, names: list[str], batches: list[int], out_dir: Path) -> int:
    failed: list[str] = []
    for name in names:
        ok = False
        for batch in batches:
            target = Path(out_dir) / em.file_name(name, batch)
            existed = target.exists()
            t0 = time.perf_counter()
            try:
                with torchscript_onnx_export():
                    path = em.export(name, batch, out_dir, verbose=False)
            except Exception as e:  # keep going; summarised at the end
                print(f"gpu_peers: export {name} batch {batch} FAILED: {type(e).__name__}: {e}",
                      file=sys.stderr, flush=True)
                continue
            ok = True
            how = "existed, kept" if existed else f"exported in {time.perf_counter() - t0:.1f} s"
            print(path, flush=True)
            print(f"  {name} b{batch}: {path.stat().st_size / 1e6:.1f} MB, {how}", file=sys.stderr,
                  flush=True)
        if not ok:
            failed.append(name)
    if failed:
        print(f"gpu_peers: failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed and len(failed) == len(names) else 0


# --------------------------------------------------------------------------- #
# Timing mode
# --------------------------------------------------------------------------- #
def disable_tf32() -> dict[str, Any]:
    """Turn TF32 off with the legacy switches; return the flags as read back."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch >= 2.9 warns that these switches are legacy
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        flags: dict[str, Any] = {}
        for key, read in (
                ("cuda.matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                ("cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
                ("float32_matmul_precision", torch.get_float32_matmul_precision)):
            try:
                flags[key] = read()
            except Exception as e:  # a mixed-API complaint would land here
                flags[key] = f"unreadable: {type(e).__name__}: {e}"
    return flags


def tf32_enabled(flags: dict[str, Any]) -> bool:
    return not (flags.get("cuda.matmul.allow_tf32") is False
                and flags.get("cudnn.allow_tf32") is False
                and flags.get("float32_matmul_precision") == "highest")


def device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.machine()} {platform.processor() or 'cpu'} ({torch.get_num_threads()} threads)"


def tensors_of(out: Any) -> list[Any]:
    """The tensors in a model output (tensor, tuple/list, dict, nested), in order."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in tensors_of(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in tensors_of(v)]
    return []


def output_ok(outs: list[Any]) -> bool:
    """Non-degenerate: floating outputs finite, and varying where they have more than one value."""
    if not outs:
        return False
    for t in outs:
        if not t.is_floating_point():
            continue
        t = t.double()
        if not bool(t.isfinite().all()):
            return False
        if t.numel() > 1 and not float(t.std()) > 0.0:
            return False
    return True


def max_rel_l2(ref: list[Any], got: list[Any]) -> float:
    if len(ref) != len(got):
        return math.inf
    worst = 0.0
    for r, g in zip(ref, got):
        if r.shape != g.shape:
            return math.inf
        r64, g64 = r.double(), g.double()
        den = float(r64.norm())
        num = float((g64 - r64).norm())
        err = num / den if den > 0 else (0.0 if num == 0 else math.inf)
        worst = max(worst, err if math.isfinite(err) else math.inf)
    return worst


def time_calls(fn: Callable[[], Any], n: int, cuda: bool) -> list[float]:
    """n calls of fn, one at a time; milliseconds each."""
    if not cuda:
        return timed_samples(fn, 0, n)
    import torch

    samples: list[float] = []
    for _ in range(n):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def summarise(samples: list[float]) -> tuple[float, float]:
    import numpy as np

    a = np.asarray(samples, dtype=np.float64)
    med = float(np.median(a))
    p10, p90 = np.percentile(a, [10, 90])
    return med, float((p90 - p10) / med) if med > 0 else math.inf


def sync(torch: Any, cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def prepare_peers(torch: Any, em: ModuleType, name: str, model: Any, rng_state: Any, batch: int,
                  device: Any, no_compile: bool) -> tuple[tuple[Any, ...], Any, dict[str, Any], list[str]]:
    """The inputs at ``batch`` (on the host, as ``example_inputs`` draws them), the compiled model
    (None when off, unavailable or failing), the checks and compile_s, and the errors met.
    Call under ``torch.inference_mode()``: the compiled graph is traced there."""
    cuda = device.type == "cuda"
    spec = em.MODELS[name]
    info: dict[str, Any] = {"compile_s": None, "compiled_matches_eager": None, "compile_rel_l2": None,
                            "output_ok": None}
    errors: list[str] = []
    torch.set_rng_state(rng_state)  # the RNG state export() draws its traced inputs from
    host_inputs = em.example_inputs(spec, batch)
    inputs = tuple(t.to(device) for t in host_inputs)
    ref = tensors_of(model(*inputs))
    sync(torch, cuda)
    info["output_ok"] = output_ok(ref)
    compiled = None
    if no_compile:
        pass
    elif not hasattr(torch, "compile"):
        errors.append(f"compile: torch.compile unavailable in torch {torch.__version__}")
    else:
        try:
            torch._dynamo.reset()
            candidate = torch.compile(model, dynamic=False)
            sync(torch, cuda)
            t0 = time.perf_counter()
            got = tensors_of(candidate(*inputs))
            sync(torch, cuda)
            info["compile_s"] = round(time.perf_counter() - t0, 3)
            err = max_rel_l2(ref, got)
            info["compile_rel_l2"] = err if math.isfinite(err) else None
            info["compiled_matches_eager"] = bool(err <= MATCH_REL_L2)
            compiled = candidate
        except Exception as e:
            errors.append(f"compile: {type(e).__name__}: {str(e).strip()[:2000]}")
    return host_inputs, compiled, info, errors


def bench_one(torch: Any, em: ModuleType, name: str, model: Any, rng_state: Any, batch: int,
              device: Any, args: argparse.Namespace) -> dict[str, Any]:
    """One model at one batch: eager and (unless off/unavailable) compiled."""
    cuda = device.type == "cuda"
    row: dict[str, Any] = {"model": name, "batch": batch, "eager_ms": None, "eager_spread": None,
                           "compile_ms": None, "compile_spread": None, "compile_s": None,
                           "compiled_matches_eager": None, "compile_rel_l2": None,
                           "output_ok": None, "timed_calls": args.rounds * args.runs}
    with torch.inference_mode():
        host_inputs, compiled, info, errors = prepare_peers(torch, em, name, model, rng_state, batch,
                                                            device, args.no_compile)
        row.update(info)
        inputs = tuple(t.to(device) for t in host_inputs)
        peers: dict[str, Callable[[], Any]] = {"eager": lambda: model(*inputs)}
        samples: dict[str, list[float]] = {"eager": []}
        if compiled is not None:
            peers["compiled"] = lambda: compiled(*inputs)
            samples["compiled"] = []

        for _ in range(args.rounds):
            for peer, fn in list(peers.items()):
                try:
                    for _ in range(WARMUP):
                        fn()
                    sync(torch, cuda)
                    samples[peer] += time_calls(fn, args.runs, cuda)
                except Exception as e:  # e.g. a compiled graph failing at run time
                    errors.append(f"{peer}: {type(e).__name__}: {str(e).strip()[:2000]}")
                    del peers[peer]
                    samples[peer] = []

    for peer, key in (("eager", "eager"), ("compiled", "compile")):
        if samples.get(peer):
            med, spread = summarise(samples[peer])
            row[f"{key}_ms"] = round(med, 4)
            row[f"{key}_spread"] = round(spread, 4)
    if errors:
        row["error"] = "; ".join(errors)
    return row


def build_model(torch: Any, em: ModuleType, name: str) -> tuple[Any, Any]:
    """The model exactly as export_models.export() builds it, and the RNG state after it."""
    spec = em.MODELS[name]
    torch.manual_seed(0)
    model = spec.build().eval()
    em.make_weights_nontrivial(model, em.example_inputs(spec))  # batch 1, as export() does
    return model, torch.get_rng_state()


def write_json(report: dict[str, Any], path: Path | None) -> None:
    if path is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)


def fmt(v: Any, spec: str) -> str:
    """format(v, spec), or a '-' as wide as spec's width for None."""
    if v is None:
        width = spec.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 0)
    return format(v, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'model':28s} {'b':>3s} {'eager ms':>9s} {'sprd':>5s} {'compile ms':>10s} "
          f"{'sprd':>5s} {'x':>5s} {'comp s':>7s} ok match", file=sys.stderr)
    for r in rows:
        speedup = (r["eager_ms"] / r["compile_ms"]
                   if r["eager_ms"] is not None and r["compile_ms"] else None)
        print(f"{r['model']:28s} {r['batch']:3d} {fmt(r['eager_ms'], '9.3f')} "
              f"{fmt(r['eager_spread'], '5.2f')} {fmt(r['compile_ms'], '10.3f')} "
              f"{fmt(r['compile_spread'], '5.2f')} {fmt(speedup, '5.2f')} "
              f"{fmt(r['compile_s'], '7.1f')} {fmt(r['output_ok'], '')[:1]:2s} "
              f"{fmt(r['compiled_matches_eager'], '')[:1]}", file=sys.stderr)
        if r.get("error"):
            print(f"    error: {r['error'][:300]}", file=sys.stderr)


def bench_all(em: ModuleType, names: list[str], args: argparse.Namespace) -> int:
    import torch

    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print(f"gpu_peers: --device {args.device} but CUDA is unavailable to torch "
                  f"{torch.__version__} (built for CUDA {torch.version.cuda})", file=sys.stderr)
            return 2
        if device.index is not None:
            torch.cuda.set_device(device.index)
    flags = disable_tf32()
    report: dict[str, Any] = {
        "torch": torch.__version__, "device": device_name(torch, device),
        "tf32": tf32_enabled(flags), "precision_flags": flags,
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "timer": "cuda_events" if device.type == "cuda" else "perf_counter",
        "compile_mode": (None if args.no_compile or not hasattr(torch, "compile")
                         else "default (dynamic=False)"),
        "rounds": args.rounds, "runs": args.runs, "warmup": WARMUP,
        "finished": False, "models": []}
    if report["tf32"]:
        print(f"gpu_peers: warning: TF32 may still be on: {flags}", file=sys.stderr)
    rows: list[dict[str, Any]] = report["models"]
    t_start = time.perf_counter()
    for name in names:
        try:
            model, rng_state = build_model(torch, em, name)
            model = model.to(device)
        except Exception as e:
            msg = f"build: {type(e).__name__}: {str(e).strip()[:2000]}"
            print(f"gpu_peers: {name}: {msg}", file=sys.stderr, flush=True)
            for b in args.batch:
                rows.append({"model": name, "batch": b, "eager_ms": None, "eager_spread": None,
                             "compile_ms": None, "compile_spread": None, "compile_s": None,
                             "compiled_matches_eager": None, "output_ok": None, "error": msg})
            write_json(report, args.json)
            continue
        for b in args.batch:
            try:
                row = bench_one(torch, em, name, model, rng_state, b, device, args)
            except Exception as e:  # eager itself failed (e.g. out of memory)
                traceback.print_exc(limit=3)
                row = {"model": name, "batch": b, "eager_ms": None, "eager_spread": None,
                       "compile_ms": None, "compile_spread": None, "compile_s": None,
                       "compiled_matches_eager": None, "output_ok": None,
                       "error": f"eager: {type(e).__name__}: {str(e).strip()[:2000]}"}
            rows.append(row)
            write_json(report, args.json)
            print(f"gpu_peers: {name} b{b}: eager {fmt(row['eager_ms'], '.3f')} ms, compiled "
                  f"{fmt(row['compile_ms'], '.3f')} ms, compile {fmt(row['compile_s'], '.1f')} s "
                  f"[{time.perf_counter() - t_start:.0f} s elapsed]", file=sys.stderr, flush=True)
            if hasattr(torch, "_dynamo"):
                torch._dynamo.reset()
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
        del model
        gc.collect()
    report["finished"] = True
    write_json(report, args.json)
    if args.json is None:
        print(json.dumps(report, indent=1))
    print_table(rows)
    return 0 if any(r["eager_ms"] is not None for r in rows) else 1


# --------------------------------------------------------------------------- #
# Serve mode (korch bench's PyTorch peers)
# --------------------------------------------------------------------------- #
def host_to_host(torch: Any, fn: Callable[..., Any], host_inputs: tuple[Any, ...], device: Any,
                 cuda: bool) -> Callable[[], Any]:
    """One call as korch bench times its artifact: inputs copied from the host to the device, the
    model, every output tensor copied back to the host, the device synchronised."""
    def call() -> Any:
        outs = [t.to("cpu") for t in tensors_of(fn(*(t.to(device) for t in host_inputs)))]
        sync(torch, cuda)
        return outs
    return call


class CommandError(Exception):
    """A --serve command that cannot be answered; its message is the answer."""


def serve(em: ModuleType, name: str, batch: int, device_arg: str, no_compile: bool,
          threads: int) -> int:
    """The --serve loop: one JSON line per answer on the original stdout; everything else anyone
    prints (Python or C code: Inductor, Triton, warnings) goes to stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def answer(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        import torch
    except Exception as e:
        answer({"ready": False, "error": f"torch is not importable: {type(e).__name__}: {e}"})
        return 3
    device = torch.device(device_arg)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        answer({"ready": False, "error": f"--device {device_arg} but CUDA is unavailable to torch "
                f"{torch.__version__} (built for CUDA {torch.version.cuda})"})
        return 2
    if cuda and device.index is not None:
        torch.cuda.set_device(device.index)
    if threads > 0:
        torch.set_num_threads(threads)
    flags = disable_tf32()
    try:
        # Built outside inference_mode, as the timing mode builds it; run inside it.
        model, rng_state = build_model(torch, em, name)
        model = model.to(device)
        with torch.inference_mode():
            host_inputs, compiled, info, errors = prepare_peers(torch, em, name, model, rng_state,
                                                                batch, device, no_compile)
    except Exception as e:
        traceback.print_exc(limit=3)
        answer({"ready": False, "error": f"{name} batch {batch}: {type(e).__name__}: "
                f"{str(e).strip()[:2000]}"})
        return 1
    with torch.inference_mode():
        peers: dict[str, Callable[[], Any]] = {"eager": host_to_host(torch, model, host_inputs, device, cuda)}
        if compiled is not None:
            peers["compile"] = host_to_host(torch, compiled, host_inputs, device, cuda)
        elif no_compile:
            errors.append("compile: off (--no-compile)")
        answer({"ready": True, "model": name, "batch": batch, "torch": torch.__version__,
                "device": device_name(torch, device), "tf32": tf32_enabled(flags),
                "precision_flags": flags, "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "compile_mode": None if compiled is None else "default (dynamic=False)",
                "timer": "perf_counter, host to host", "warmup_default": WARMUP,
                "inputs": [{"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
                           for t in host_inputs],
                "errors": errors, **info})
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            try:
                if words[0] != "time" or len(words) != 4:
                    raise CommandError(f"unknown command {line.strip()!r} (time eager|compile WARMUP RUNS, quit)")
                fn = peers.get(words[1])
                if fn is None:
                    why = [e for e in errors if e.startswith(words[1] + ":")]
                    raise CommandError(why[0] if why else f"no peer {words[1]!r} (eager, compile)")
                answer({"samples_ms": timed_samples(fn, int(words[2]), int(words[3]))})
            except CommandError as e:
                answer({"error": str(e)})
            except Exception as e:  # e.g. out of memory: said, and the loop goes on
                answer({"error": f"{type(e).__name__}: {str(e).strip()[:2000]}"})
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", metavar="MODEL",
                    help="model names from scripts/export_models.py, or a group: "
                    "paper, heldback, extra, default")
    ap.add_argument("--batch", type=int, nargs="+", default=None,
                    help="batch sizes (default 1 16; --serve: one, default 1)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating eager/compiled rounds")
    ap.add_argument("--runs", type=int, default=20, help="timed calls per peer per round")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--json", type=Path, default=None, help="write the JSON here (else stdout)")
    ap.add_argument("--export-dir", type=Path, default=None,
                    help="export the models as ONNX to this folder instead of timing")
    ap.add_argument("--threads", type=int, default=0,
                    help="--serve: torch.set_num_threads (0: torch's default)")
    ap.add_argument("--serve", metavar="MODEL", default=None,
                    help="korch bench's peers: build MODEL at the one --batch, then answer "
                    "commands on stdin (see the module docstring)")
    args = ap.parse_args(argv)
    if args.batch is None:
        args.batch = [1] if args.serve is not None else [1, 16]
    if args.rounds < 1 or args.runs < 1 or any(b < 1 for b in args.batch):
        ap.error("--rounds, --runs and --batch must be >= 1")
    args.batch = list(dict.fromkeys(args.batch))
    if args.serve is not None:
        if args.models or len(args.batch) != 1 or args.export_dir is not None:
            ap.error("--serve MODEL takes one --batch and no other MODEL or --export-dir")
        em = load_export_models()
        if args.serve not in em.MODELS:
            ap.error(f"--serve: {args.serve!r} is not a model of scripts/export_models.py "
                     "(export_models.py --list names them)")
        return serve(em, args.serve, args.batch[0], args.device, args.no_compile, args.threads)
    if not args.models:
        ap.error("name at least one MODEL (or --serve MODEL)")

    em = load_export_models()
    names = resolve_names(em, args.models, ap)
    if args.export_dir is not None:
        return export_all(em, names, args.batch, args.export_dir)
    return bench_all(em, names, args)


if __name__ == "__main__":
    sys.exit(main())
