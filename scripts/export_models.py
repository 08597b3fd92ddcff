#!/usr/bin/env python3
"""Export Korch's evaluation models to ONNX (opset 17, static shapes, random weights).

Every model is built with ``torch.manual_seed(0)`` and random weights (no
pretrained downloads; see ``make_weights_nontrivial``), put in eval mode and exported with the TorchScript
exporter (``do_constant_folding=True``, no dynamic axes). Files land in a cache
folder: ``--out``, else ``$KORCH_MODELS``, else ``<repo>/.cache/models``.

    export_models.py                     # default set (paper + held-back-like), batch 1
    export_models.py candy yolov4        # just these
    export_models.py --batch 16          # the 5 paper models as <name>_b16.onnx
    export_models.py --list

A model whose file already exists is skipped unless ``--force``.
Library use: ``export(name, batch=1, out_dir=None, force=False) -> Path``.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
OPSET = 17


def default_out_dir() -> Path:
    return Path(os.environ.get("KORCH_MODELS") or REPO / ".cache" / "models")


# --------------------------------------------------------------------------- #
# Model specs
# --------------------------------------------------------------------------- #
@dataclass
class Spec:
    build: Callable[[], object]             # returns a torch.nn.Module (torch imported lazily)
    input_shape: tuple[int, ...]            # shape at batch 1; dim 0 is the batch
    group: str                              # "paper" or "heldback"
    output_names: list[str] = field(default_factory=lambda: ["output"])
    slow: bool = False                      # big for the reference interpreter


# ---- candy: fast-neural-style TransformerNet (Johnson et al. / pytorch examples)
def _build_candy():
    import torch.nn as nn

    def conv(cin, cout, k, stride=1, upsample=False):
        layers = [nn.Upsample(scale_factor=2, mode="nearest")] if upsample else []
        layers += [nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, stride)]
        return layers

    def conv_in_relu(cin, cout, k, stride=1, upsample=False):
        return conv(cin, cout, k, stride, upsample) + [
            nn.InstanceNorm2d(cout, affine=True), nn.ReLU()]

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(*conv_in_relu(c, c, 3), *conv(c, c, 3),
                                      nn.InstanceNorm2d(c, affine=True))

        def forward(self, x):
            return x + self.body(x)

    return nn.Sequential(
        *conv_in_relu(3, 32, 9), *conv_in_relu(32, 64, 3, 2), *conv_in_relu(64, 128, 3, 2),
        *[Residual(128) for _ in range(5)],
        *conv_in_relu(128, 64, 3, upsample=True), *conv_in_relu(64, 32, 3, upsample=True),
        *conv(32, 3, 9))


# ---- segformer_b0: HF transformers, SegformerConfig() defaults are the b0 sizes
def _build_segformer_b0():
    import torch.nn as nn
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    cfg = SegformerConfig(num_labels=150)  # hidden [32,64,160,256], depths [2,2,2,2], dec 256
    assert list(cfg.hidden_sizes) == [32, 64, 160, 256] and cfg.decoder_hidden_size == 256

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = SegformerForSemanticSegmentation(cfg)

        def forward(self, x):
            return self.net(pixel_values=x, return_dict=False)[0]

    return Logits()


def _build_efficientvit_b0():
    import timm
    return timm.create_model("efficientvit_b0", pretrained=False)


@contextlib.contextmanager
def _stub_modules(names: set[str]):
    """Let imports of the given top-level modules succeed with MagicMock stand-ins
    when they are not installed (training/eval-only deps of pixeltable-yolox such
    as cv2 and pycocotools, which the model code itself never calls)."""

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in names:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            m = mock.MagicMock(name=spec.name)
            m.__path__, m.__spec__ = [], spec
            return m

        def exec_module(self, module):
            pass

    finder = Finder()
    sys.meta_path.append(finder)  # last: a real installed module always wins
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _build_yolox_nano():
    with _stub_modules({"cv2", "pycocotools", "tabulate", "thop", "loguru", "wandb",
                        "mlflow", "dotenv", "onnxsim", "torch2trt", "ninja"}):
        from yolox.config import YoloxNano
    model = YoloxNano().get_model()  # depth .33, width .25, depthwise, 80 classes
    # Raw head output 1x3549x85 (reg | sigmoid(obj) | sigmoid(cls)), as YOLOX's own
    # ONNX export does. The decode (exp of wh logits) is exportable, but with random
    # weights a few exp() values reach ~1e10 and swamp the relative-error norm.
    model.head.decode_in_inference = False
    return model


def _build_yolov4():
    """pytorch-YOLOv4 (wf-pytorch-yolo-v4) Darknet built from its bundled yolov4.cfg:
    CSPDarknet53 + SPP + PANet + 3 YOLO heads, Mish, 80 classes, decode included
    (outputs boxes 1xNx1x4 and confs 1xNx80, as the package's darknet2onnx does)."""
    import yolov4
    from yolov4.tool.darknet2pytorch import Darknet

    cfg = Path(yolov4.__file__).parent / "cfg" / "yolov4.cfg"
    return Darknet(str(cfg), inference=True)  # cfg's width/height are unused by forward


def _tv(name: str):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return build


def _build_transformer_encoder():
    import torch.nn as nn
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                       activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2)


IMG224 = (1, 3, 224, 224)
MODELS: dict[str, Spec] = {
    # paper models
    "candy": Spec(_build_candy, IMG224, "paper"),
    "segformer_b0": Spec(_build_segformer_b0, (1, 3, 512, 512), "paper", ["logits"], slow=True),
    "efficientvit_b0": Spec(_build_efficientvit_b0, IMG224, "paper"),
    "yolox_nano": Spec(_build_yolox_nano, (1, 3, 416, 416), "paper"),
    "yolov4": Spec(_build_yolov4, (1, 3, 416, 416), "paper", ["boxes", "confs"], slow=True),
    # held-back-like
    "resnet18": Spec(_tv("resnet18"), IMG224, "heldback"),
    "mobilenet_v2": Spec(_tv("mobilenet_v2"), IMG224, "heldback"),
    "mobilenet_v3_small": Spec(_tv("mobilenet_v3_small"), IMG224, "heldback"),
    "efficientnet_b0": Spec(_tv("efficientnet_b0"), IMG224, "heldback"),
    "regnet_y_400mf": Spec(_tv("regnet_y_400mf"), IMG224, "heldback"),
    "shufflenet_v2_x1_0": Spec(_tv("shufflenet_v2_x1_0"), IMG224, "heldback"),
    "squeezenet1_0": Spec(_tv("squeezenet1_0"), IMG224, "heldback"),
    "densenet121": Spec(_tv("densenet121"), IMG224, "heldback", slow=True),
    "convnext_tiny": Spec(_tv("convnext_tiny"), IMG224, "heldback", slow=True),
    "vit_b_16": Spec(_tv("vit_b_16"), IMG224, "heldback", slow=True),
    "swin_t": Spec(_tv("swin_t"), IMG224, "heldback", slow=True),
    "transformer_encoder": Spec(_build_transformer_encoder, (1, 128, 256), "heldback"),
}
PAPER = [n for n, s in MODELS.items() if s.group == "paper"]
HELDBACK = [n for n, s in MODELS.items() if s.group == "heldback"]


def make_weights_nontrivial(model, x) -> None:
    """Give a freshly initialised model the statistics of a trained one, so the
    ONNX comparison exercises every operator (seeded by the caller).

    Default inits leave BatchNorm as identity (mean 0, var 1, gamma 1, beta 0),
    zero biases, zero heads (vit_b_16 outputs all zeros) and 1e-6 layer scales
    (convnext: residual branches invisible), and activations decay through
    deep stacks (efficientnet_b0 logits ~1e-14). So: norm gammas ~ U(0.3, 0.8)
    (below 1 keeps deep random nets well-conditioned: yolov4's float32 roundoff
    amplification drops ~10x vs U(0.5, 1.5));
    zero/tiny parameters get N(0, 1/fan_in) (matrices) or N(0, 0.1) (vectors);
    then BatchNorm running stats are calibrated on ``x`` in one eval forward
    pass (each BN takes the per-channel mean/var of its actual input)."""
    import torch
    import torch.nn as nn

    norms = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
             nn.modules.instancenorm._InstanceNorm)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, norms) and getattr(m, "weight", None) is not None:
                m.weight.uniform_(0.3, 0.8)
        for p in model.parameters():
            if p.is_floating_point() and p.numel() and p.abs().max() < 1e-3:
                fan_in = p.numel() // p.shape[0] if p.dim() >= 2 else 1
                if p.dim() >= 2 and p.shape[0] > 1 and fan_in > 1:
                    p.normal_(0.0, fan_in ** -0.5)
                else:
                    p.normal_(0.0, 0.1)

        def calibrate(bn, inputs):
            t = inputs[0].detach().float()
            dims = [d for d in range(t.dim()) if d != 1]
            if t.numel() // t.shape[1] >= 2:
                bn.running_mean.copy_(t.mean(dims))
                bn.running_var.copy_(t.var(dims, unbiased=False))

        hooks = [m.register_forward_pre_hook(calibrate) for m in model.modules()
                 if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
        try:
            model.eval()
            model(x)
        finally:
            for h in hooks:
                h.remove()


def file_name(name: str, batch: int = 1) -> str:
    return f"{name}.onnx" if batch == 1 else f"{name}_b{batch}.onnx"


def export(name: str, batch: int = 1, out_dir: Path | str | None = None,
           force: bool = False, verbose: bool = True) -> Path:
    """Export one model (skipped if its file exists); return the .onnx path."""
    import onnx
    import torch

    spec = MODELS[name]
    out = Path(out_dir) if out_dir else default_out_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / file_name(name, batch)
    if path.exists() and not force:
        if verbose:
            print(f"{path.name:32s} exists, skipped ({path.stat().st_size / 1e6:.1f} MB)")
        return path

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = spec.build().eval()
    make_weights_nontrivial(model, torch.randn(spec.input_shape))  # batch 1: same weights for every batch
    x = torch.randn((batch,) + spec.input_shape[1:])
    tmp = path.with_suffix(".onnx.tmp")
    # Grad stays enabled: nn.TransformerEncoderLayer / MultiheadAttention would
    # otherwise take their fused inference fast path, which is not exportable.
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer/exporter chatter, not actionable here
        torch.onnx.export(model, (x,), str(tmp), opset_version=OPSET,
                          do_constant_folding=True, input_names=["input"],
                          output_names=spec.output_names,
                          training=torch.onnx.TrainingMode.EVAL)
    onnx.checker.check_model(str(tmp), full_check=False)
    tmp.replace(path)  # only a checked file ever carries the final name
    if verbose:
        print(f"{path.name:32s} {path.stat().st_size / 1e6:8.1f} MB "
              f"{time.perf_counter() - t0:7.1f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="models to export (default: all at batch 1, "
                    "or the paper models with --batch 16)")
    ap.add_argument("--out", type=Path, default=None, help=f"output folder (default {default_out_dir()})")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="re-export existing files")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    args = ap.parse_args(argv)

    if args.list:
        for n, s in MODELS.items():
            print(f"{n:22s} {s.group:9s} {'x'.join(map(str, s.input_shape)):14s}"
                  f"{' slow' if s.slow else ''}")
        return 0
    names = args.names or (list(MODELS) if args.batch == 1 else PAPER)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)} (see --list)")

    failed = []
    for n in names:
        try:
            export(n, args.batch, args.out, args.force)
        except Exception as e:  # keep going; report at the end
            print(f"{file_name(n, args.batch):32s} FAILED: {type(e).__name__}: {e}", flush=True)
            failed.append(n)
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
