"""Kernel orchestration on real models: `korch compile --cost analytic` must produce a valid plan.

check_plan runs on the artifact of every real model tests/e2e/test_cpu_backend.py compiles (the
default and slow sets); here it runs on the H200 analytic model's plans.

The C++ verifier (verify_plan) already runs inside `korch compile`, which fails if the plan is
invalid. This test checks the written plan.json independently: kernels are ordered so that every
value a kernel reads is written by an earlier kernel (or by no kernel: a graph input or constant),
every primitive is computed by some kernel, tensor lifetimes are consistent, the solver reported a
status with a non-negative gap and the plan is no worse than one kernel per primitive. Then
`korch explain` must render it.
"""
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

import compare_with_ort
import export_models


def check_plan(art):
    """The plan.json of artifact folder `art` is valid and `korch explain` renders it."""
    korch = compare_with_ort.default_korch()
    plan = json.loads((Path(art) / "plan.json").read_text())
    kernels = plan["kernels"]
    written_by_plan = {v for k in kernels for v in k["outputs"]}
    available = set()
    computed = set()
    for step, k in enumerate(kernels):
        assert k["step"] == step
        for v in k["inputs"]:
            assert v in available or v not in written_by_plan, f"kernel {step} reads {v} before it is written"
        available.update(k["outputs"])
        computed.update(p["name"] for p in k["primitives"])
        # Only a Concat or a view whose inputs are written into it (runtime/memory_plan.h) is free.
        ops = [p["op_type"] for p in k["primitives"]]
        in_place = len(ops) == 1 and ops[0] in ("Concat", "Reshape", "Flatten", "Squeeze", "Unsqueeze") \
            and k["note"].startswith("in place")
        assert k["cost_s"] > 0 or in_place, k
    assert len(computed) == plan["graph"]["primitives"], "some primitive is computed by no kernel"
    for t in plan["tensors"]:
        assert 0 <= t["producer"] <= t["last_use"] <= len(kernels)
    s = plan["solver"]
    assert s["status"] in ("optimal", "feasible")
    assert s["gap"] >= 0
    total = sum(k["cost_s"] for k in kernels)
    assert abs(total - plan["cost"]["plan_s"]) <= 1e-9 * max(1.0, total)
    assert total <= plan["cost"]["unfused_s"] * (1 + 1e-9)
    e = subprocess.run([str(korch), "explain", str(art), "--top", "5"], capture_output=True, text=True)
    assert e.returncode == 0, e.stderr
    assert "plan for" in e.stdout and "solver:" in e.stdout


def _check(name, device="cpu"):
    korch = compare_with_ort.default_korch()
    model = export_models.export(name)
    with tempfile.TemporaryDirectory() as tmp:
        art = Path(tmp) / "art"
        r = subprocess.run([str(korch), "compile", str(model), "--device", device, "--cost", "analytic", "-o", str(art),
                            "--time-limit", "20", "-q"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        print(r.stdout)
        check_plan(art)


@pytest.mark.parametrize("name", ["efficientvit_b0", "transformer_encoder"])
def test_compile_plan_is_valid_cuda_spec(name):
    _check(name, "cuda")
