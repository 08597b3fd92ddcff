"""Korch from Python: compile an ONNX model into the fastest plan of kernels, run it, save it.

    import korch, numpy as np
    exe = korch.compile("model.onnx", device="cpu", shapes={"x": (1, 3, 224, 224)})
    out = exe.run({"x": np.random.rand(1, 3, 224, 224).astype(np.float32)})
    exe.save("model.korch")             # an artifact folder, as `korch compile -o` writes
    exe = korch.load("model.korch")     # later, in another process

`model` is a path, ONNX bytes, an onnx.ModelProto or "builtin:NAME" (korch.builtin_models()).
Every error Korch can explain is a korch.Error carrying the CLI's message (file, node and op named).
The same compiler as `korch compile` (src/pipeline/compile.h); options keep the CLI's defaults.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _core
from ._core import Error

__all__ = ["Error", "TensorInfo", "Executable", "compile", "load", "run_reference", "model_info", "builtin_models",
           "builtin_model_bytes"]

@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: its name, numpy dtype and fixed shape."""

    name: str
    dtype: np.dtype
    shape: tuple

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape})"


def _infos(raw) -> list:
    return [TensorInfo(n, np.dtype(d), tuple(s)) for n, d, s in raw]


def _feed(infos: Sequence[TensorInfo], inputs: Mapping[str, np.ndarray], what: str) -> list:
    """The inputs as a list in the model's order; names missing or unknown are a korch.Error."""
    if not isinstance(inputs, Mapping):
        raise Error(f"{what}: run() takes a dict {{input name: numpy array}}, got {type(inputs).__name__}")
    names = [i.name for i in infos]
    unknown = [k for k in inputs if k not in names]
    if unknown:
        raise Error(f"{what}: {', '.join(map(repr, unknown))} is not an input (inputs: {', '.join(names)})")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise Error(f"{what}: no value for input {', '.join(map(repr, missing))} (inputs: {', '.join(names)})")
    return [np.asarray(inputs[n]) for n in names]


def _source(model) -> tuple:
    """(name for messages, serialized bytes or None) for any accepted model argument."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return "<onnx bytes>", bytes(model)
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto
        return f"<onnx.ModelProto {getattr(getattr(model, 'graph', None), 'name', '') or 'model'}>", model.SerializeToString()
    raise Error(f"model: give a path, ONNX bytes, an onnx.ModelProto or 'builtin:NAME', not {type(model).__name__}")


def _load_model(model, shapes, binds):
    name, data = _source(model)
    shapes = {k: [int(d) for d in ((v,) if isinstance(v, int) else v)] for k, v in (shapes or {}).items()}
    binds = {k: np.asarray(v) for k, v in (binds or {}).items()}
    return _core.load_model(name, data, shapes, binds)


class Executable:
    """A compiled model, loaded and ready to run on its device (one call at a time)."""

    def __init__(self, core, artifact_dir: str, temporary: bool, summary: Optional[dict] = None):
        self._core = core
        self._dir = artifact_dir
        self.summary = summary or {}
        if temporary:  # a compile without output=: the folder goes when the Executable does
            self._cleanup = weakref.finalize(self, shutil.rmtree, artifact_dir, True)

    @property
    def inputs(self) -> list:
        return _infos(self._core.inputs)

    @property
    def outputs(self) -> list:
        return _infos(self._core.outputs)

    @property
    def device(self) -> str:
        return self._core.device

    @property
    def kernel_count(self) -> int:
        return self._core.kernel_count

    @property
    def manifest(self) -> dict:
        return json.loads(self._core.manifest)

    @property
    def plan(self) -> dict:
        """plan.json: the solver's verdict, predicted and measured costs, the kernels chosen."""
        with open(os.path.join(self._dir, "plan.json")) as f:
            return json.load(f)

    @property
    def artifact_dir(self) -> str:
        return self._dir

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict:
        """{input name: array} -> {output name: array}; dtypes and shapes must match .inputs."""
        arrays = _feed(self.inputs, inputs, f"artifact {self._dir}")
        outs = self._core.run(arrays)
        return {o.name: a for o, a in zip(self.outputs, outs)}

    def save(self, path: Union[str, os.PathLike]) -> str:
        """Copies the artifact folder to `path` (new, empty or an earlier artifact); returns it."""
        path = os.fspath(path)
        if os.path.isdir(path):
            others = [e for e in os.listdir(path) if not _core.is_artifact_entry(e)]
            if others:
                raise Error(f"save {path}: the folder holds {others[0]}, so it is not a Korch artifact; give an "
                            "empty or new folder")
        elif os.path.exists(path):
            raise Error(f"save {path}: exists and is not a folder")
        os.makedirs(path, exist_ok=True)
        if os.path.abspath(path) == os.path.abspath(self._dir):
            return path
        # What an artifact folder may hold (runtime/artifact.h), and nothing else.
        for e in filter(_core.is_artifact_entry, os.listdir(self._dir)):
            src, dst = os.path.join(self._dir, e), os.path.join(path, e)
            if os.path.isdir(src):
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
        return path

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in self.inputs)
        return f"<korch.Executable {self.device}, {self.kernel_count} kernels, inputs ({ins}), at {self._dir}>"


def compile(model, device: str = "cpu", shapes: Optional[Mapping] = None, cost: Optional[str] = None, *,
            binds: Optional[Mapping[str, np.ndarray]] = None, output: Optional[Union[str, os.PathLike]] = None,
            threads: int = 2, tuning_db: Optional[str] = None, time_limit: float = 20.0, gap: Optional[float] = None,
            max_kernel_size: int = 8, memory_budget: Optional[int] = None, recompute: bool = True,
            verify: bool = True, closed_loop: bool = True, rewrite_choices: bool = True,
            unfused: bool = False, layout: str = "auto", micro_batch: str = "auto", denormals: str = "flush",
            check: bool = False, progress: bool = False,
            log: Optional[Callable[[str], None]] = None) -> Executable:
    """Compiles `model` for `device` ("cpu" or "cuda") and loads the result.

    shapes: {input name: shape} or {dimension name: size} for dynamic dimensions.
    cost: "measured" (time every candidate kernel here; the default on the CPU) or "analytic".
    binds: inputs fixed to values (they fold into the graph), as `--bind`.
    output: the artifact folder to write; by default a temporary one removed with the Executable.
    layout: "auto", "nchw" or "channels-last", as `--layout`.
    micro_batch: "auto", "on", "off" or a size, as `--micro-batch` (a batch of independent samples run
    as several runs of a smaller batch's plan, where that is faster).
    denormals: "flush" (CPU runs read and write denormal floats as zero) or "keep", as `--denormals`.
    check: run the artifact once on seeded random inputs against the reference interpreter and raise
    korch.Error unless it matches, as `korch compile --check`.
    memory_budget: bytes, as `--memory-budget` (None: no bound).
    The rest are `korch compile`'s flags of the same names (--gap, --time-limit, --isolated-costs as
    closed_loop=False, --no-recompute as recompute=False, --no-rewrite-choices as
    rewrite_choices=False); log receives the phase lines.
    A CUDA artifact is loaded on the host emulator (this korch cannot run one on a GPU yet).
    """
    m = _load_model(model, shapes, binds)
    args = _core.CompileArgs()
    args.device, args.cost, args.threads = device, cost or "", int(threads)
    args.tuning_db = os.fspath(tuning_db) if tuning_db else ""
    args.time_limit, args.gap = float(time_limit), -1.0 if gap is None else float(gap)
    args.max_kernel_size, args.recompute, args.verify = int(max_kernel_size), bool(recompute), bool(verify)
    args.close_loop, args.unfused, args.progress = bool(closed_loop), bool(unfused), bool(progress)
    args.layout = str(layout)
    args.micro_batch = str(micro_batch)
    args.denormals = str(denormals)
    args.check = bool(check)
    args.rewrite_choices = bool(rewrite_choices)
    if memory_budget is not None:
        if int(memory_budget) < 0:
            raise ValueError(f"memory_budget={memory_budget}: a budget is 0 bytes or more")
        args.memory_budget = int(memory_budget)
    temporary = output is None
    out = tempfile.mkdtemp(prefix="korch-py-") if temporary else os.fspath(output)
    try:
        summary = _core.compile(m, out, args, log)
        return Executable(_load_core(out, device == "cuda", threads), out, temporary, summary)
    except BaseException:
        if temporary:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _load_core(path: str, cuda: bool, threads: int):
    # This korch has no CUDA runtime yet: a CUDA artifact runs on the host emulator (correct, not fast).
    return _core.Executable.load(path, cuda, int(threads or 0))


def load(path: Union[str, os.PathLike], threads: int = 0, emulate: bool = False) -> Executable:
    """Loads an artifact folder (`korch compile -o`, Executable.save). threads > 0 sets the CPU kernels'
    thread count; emulate=True runs a CUDA artifact on the host emulator."""
    path = os.fspath(path)
    return Executable(_core.Executable.load(path, bool(emulate), int(threads)), path, False)


def run_reference(model, inputs: Mapping[str, np.ndarray], shapes: Optional[Mapping] = None,
                  binds: Optional[Mapping[str, np.ndarray]] = None) -> dict:
    """Runs `model` in Korch's reference interpreter (the correctness oracle)."""
    m = _load_model(model, shapes, binds)
    infos = _infos(m.inputs)
    outs = m.run_reference(_feed(infos, inputs, "reference"))
    return {o.name: a for o, a in zip(_infos(m.outputs), outs)}


def model_info(model, shapes: Optional[Mapping] = None, binds=None) -> tuple:
    """(inputs, outputs) of `model` after the frontend: names, dtypes and fixed shapes."""
    m = _load_model(model, shapes, binds)
    return _infos(m.inputs), _infos(m.outputs)


def builtin_models() -> list:
    """Names of the models built into Korch ("builtin:NAME" compiles one)."""
    return list(_core.builtin_model_names())


def builtin_model_bytes(name: str) -> bytes:
    """The serialized ONNX model of builtin:NAME (to give to onnxruntime, say)."""
    return _core.builtin_model_bytes(name)
