"""Shared by the benchmark scripts: the default model list, running korch, medians, timing a call."""
import platform
import subprocess
import time
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


# A pace above this is a slow phase of the machine (src/profile/pace.h PaceOptions::slow; korch
# bench's pace_by_round gives each round's).
SLOW_PACE = 1.3


def at_pace(paces):
    """The indices of the rounds that began at the machine's pace (0 < pace <= SLOW_PACE; 0 is unknown)."""
    return [i for i, p in enumerate(paces) if 0 < p <= SLOW_PACE]


def timed_samples(run, warmup, runs):
    """`runs` wall-clock times of run() in ms, after `warmup` untimed calls."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
    return times
