"""Shared by the benchmark scripts: the default model list, running korch, medians."""
import platform
import subprocess
from pathlib import Path

# The paper's five models, then the held-back set (bench/cpu_latency.py's PAPER + HELDBACK).
DEFAULT_MODELS = ["candy", "segformer_b0", "efficientvit_b0", "yolox_nano", "yolov4", "resnet18", "mobilenet_v2",
                  "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "shufflenet_v2_x1_0", "squeezenet1_0",
                  "densenet121", "convnext_tiny", "vit_b_16", "swin_t", "transformer_encoder"]


def cpu_name():
    """The CPU's model name (/proc/cpuinfo), for the machine line of a results file."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def run(cmd, env):
    """Runs cmd (items str()-ed); returns stdout; raises with the tail of both streams on failure."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
