#!/usr/bin/env python3
"""Export Korch's evaluation models to ONNX (opset 17, static shapes, random weights).

Every model is built with ``torch.manual_seed(0)`` and random weights (no
pretrained downloads; see ``make_weights_nontrivial``), put in eval mode and exported with the TorchScript
exporter (``do_constant_folding=True``, no dynamic axes). Files land in a cache
folder: ``--out``, else ``$KORCH_MODELS``, else ``<repo>/.cache/models``.

    export_models.py                     # default set (paper + held-back-like), batch 1
    export_models.py --group extra       # more torchvision / torch.nn architectures (not default)
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
    group: str                              # "paper", "heldback" or "extra"
    output_names: list[str] = field(default_factory=lambda: ["output"])
    slow: bool = False                      # big for the reference interpreter
    input_dtype: str = "float32"            # "int64": token ids in [0, 10) like korch's random ints
    # further model inputs (shape at batch 1, dtype), fed positionally, named input1, input2, ...
    extra_inputs: tuple[tuple[tuple[int, ...], str], ...] = ()


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


# --------------------------------------------------------------------------- #
# "extra" group: more torchvision / torch.nn architectures, to find what the
# frontend + reference interpreter cannot handle yet (not in the default set).
# --------------------------------------------------------------------------- #
def _tv_kw(name: str, sub: str = "", **kw):
    """torchvision.models[.sub].<name>(weights=None, **kw)."""
    def build():
        import importlib
        mod = importlib.import_module("torchvision.models" + (f".{sub}" if sub else ""))
        return getattr(mod, name)(weights=None, **kw)
    return build


def _tv_seg(name: str, **kw):
    """torchvision segmentation model without pretrained backbone; returns the 'out' map."""
    def build():
        import torch.nn as nn
        from torchvision.models import segmentation

        class Out(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = getattr(segmentation, name)(weights=None, weights_backbone=None, **kw)

            def forward(self, x):
                return self.net(x)["out"]
        return Out()
    return build


def _build_raft_small():
    """RAFT-small, two frames stacked as one 1x6xHxW input, 2 flow updates, last flow."""
    import torch.nn as nn
    from torchvision.models.optical_flow import raft_small

    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = raft_small(weights=None)

        def forward(self, x):
            return self.net(x[:, :3], x[:, 3:], num_flow_updates=2)[-1]
    return Flow()


def _build_ssdlite_head():
    """SSDlite320-MobileNetV3-Large raw network (backbone + head: box regression and
    class logits), without the anchor decode / NonMaxSuppression post-processing."""
    import torch.nn as nn
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    class Raw(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)

        def forward(self, x):
            feats = list(self.net.backbone(x).values())
            out = self.net.head(feats)
            return out["bbox_regression"], out["cls_logits"]
    return Raw()


def _build_fasterrcnn_fpn_backbone():
    """FasterRCNN-MobileNetV3-Large-FPN backbone + FPN (feature pyramid outputs),
    without RPN / RoIAlign / NonMaxSuppression."""
    import torch.nn as nn
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn

    class Fpn(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None).backbone

        def forward(self, x):
            return tuple(self.net(x).values())
    return Fpn()


def _causal_mask(n: int, like):
    """Float causal mask (0 on/below the diagonal, -inf above) built in-graph with torch.triu."""
    import torch
    return torch.triu(torch.full((n, n), float("-inf"), dtype=like.dtype), diagonal=1)


def _build_transformer_decoder():
    import torch.nn as nn

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerDecoderLayer(d_model=256, nhead=4, dim_feedforward=512,
                                               batch_first=True)
            self.dec = nn.TransformerDecoder(layer, num_layers=2)

        def forward(self, tgt, memory):
            return self.dec(tgt, memory, tgt_mask=_causal_mask(tgt.shape[1], tgt))
    return Dec()


def _build_transformer_small():
    import torch.nn as nn

    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = nn.Transformer(d_model=128, nhead=4, num_encoder_layers=2,
                                    num_decoder_layers=2, dim_feedforward=256, batch_first=True)

        def forward(self, src, tgt):
            return self.t(src, tgt, tgt_mask=_causal_mask(tgt.shape[1], tgt))
    return T()


def _build_mha_block():
    """Pre-norm attention block: LayerNorm, nn.MultiheadAttention (bool attn mask,
    averaged attention weights as a second output), residual, GELU MLP."""
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d=192, heads=6):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            n = x.shape[1]
            band = torch.ones(n, n, dtype=torch.bool).triu(8) | torch.ones(n, n, dtype=torch.bool).tril(-8)
            h = self.ln1(x)
            a, w = self.attn(h, h, h, attn_mask=band, need_weights=True)
            x = x + a
            return x + self.mlp(self.ln2(x)), w
    return Block()


def _build_text_encoder():
    """Token ids (int64) -> nn.Embedding + learned positions -> TransformerEncoder
    (norm_first) -> mean pool -> 10-way classifier."""
    import torch
    import torch.nn as nn

    class Text(nn.Module):
        def __init__(self, vocab=1000, d=128, n=64):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(1, n, d) * 0.1)
            layer = nn.TransformerEncoderLayer(d, 4, 256, batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, 2)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 10)

        def forward(self, ids):
            h = self.enc(self.emb(ids) + self.pos)
            return self.head(self.norm(h).mean(1))
    return Text()


def _build_rnn_classifier(kind: str, inputs: int = 32, hidden: int = 64):
    """A 2-layer bidirectional LSTM / GRU over the sequence, a linear head on its last step."""
    def build():
        import torch.nn as nn

        class Rnn(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = getattr(nn, kind)(inputs, hidden, num_layers=2, bidirectional=True,
                                             batch_first=True)
                self.head = nn.Linear(2 * hidden, 10)

            def forward(self, x):
                y = self.rnn(x)[0]
                return self.head(y[:, -1])
        return Rnn()
    return build


def _build_crnn():
    """A CRNN-style text-line recogniser: a conv encoder over a 32x128 grey line image, its
    columns as a 32-step sequence, a 2-layer bidirectional LSTM (hidden 256) and a per-step
    37-way classifier (the shape of CTC recognisers shipped with OCR packages)."""
    import torch.nn as nn

    def block(i, o, pool):
        return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(pool)]

    class Crnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(*block(1, 64, 2), *block(64, 128, 2), *block(128, 256, (2, 1)),
                                     *block(256, 256, (4, 1)))
            self.rnn = nn.LSTM(256, 256, num_layers=2, bidirectional=True)
            self.head = nn.Linear(512, 37)

        def forward(self, x):
            f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # [W=32, N, C]
            return self.head(self.rnn(f)[0])
    return Crnn()


def _build_pixelshuffle_sr():
    """ESPCN-style x3 super-resolution (PixelShuffle), plus a PixelUnshuffle stem."""
    import torch.nn as nn
    return nn.Sequential(
        nn.PixelUnshuffle(2), nn.Conv2d(12, 64, 5, padding=2), nn.Tanh(),
        nn.Conv2d(64, 32, 3, padding=1), nn.Tanh(),
        nn.Conv2d(32, 3 * 6 * 6, 3, padding=1), nn.PixelShuffle(6))


def _build_unet_small():
    """UNet-like: MaxPool encoder, decoder upsampling by ConvTranspose2d and by
    F.interpolate(bilinear, align_corners False / True), skip concat."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3 = block(3, 16), block(16, 32), block(32, 64)
            self.up3 = nn.ConvTranspose2d(64, 32, 2, stride=2)
            self.up2 = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)
            self.d2, self.d1 = block(64, 32), block(48, 16)
            self.out = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            e1 = self.e1(x)
            e2 = self.e2(F.max_pool2d(e1, 2))
            e3 = self.e3(F.max_pool2d(e2, 2))
            up = self.up3(e3) + F.interpolate(e3, scale_factor=2.0, mode="bilinear",
                                              align_corners=False)[:, :32]
            d2 = self.d2(torch.cat([up, e2], 1))
            u1 = F.interpolate(d2, size=e1.shape[-2:], mode="bilinear", align_corners=True)
            d1 = self.d1(torch.cat([u1, e1], 1))
            return self.out(d1 + self.up2(d2))
    return UNet()


def _build_norm_act_net():
    """GroupNorm, LayerNorm over channels of NCHW via permute, GELU(tanh), SiLU,
    Hardswish, Mish, ELU, PReLU, Softplus-free activations in a conv stack."""
    import torch.nn as nn
    import torch.nn.functional as F

    class ChannelLN(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln = nn.LayerNorm(c)

        def forward(self, x):
            return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    class GeluTanh(nn.Module):
        def forward(self, x):
            return F.gelu(x, approximate="tanh")

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.SiLU(),
        nn.Conv2d(32, 32, 3, padding=1), ChannelLN(32), GeluTanh(),
        nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.GroupNorm(1, 32), nn.Hardswish(),
        nn.Conv2d(32, 32, 3, padding=1), nn.Mish(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ELU(alpha=0.7),
        nn.Conv2d(32, 32, 3, padding=1), nn.PReLU(32),
        nn.Conv2d(32, 16, 3, padding=1), nn.PReLU(), nn.GroupNorm(4, 16, affine=False))


def _build_pad_pool_net():
    """F.pad reflect / replicate / constant and AdaptiveAvgPool2d((7, 7)) /
    AdaptiveMaxPool2d((4, 4)) on 28x28. torch 1.13 cannot export adaptive pools
    whose output size does not divide the input ("output size that are not factor
    of input size"), nor any after an F.pad (the traced Pad hides the shape), so
    the pools sit on a pad-free branch."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c0 = nn.Conv2d(3, 16, 3)
            self.c1 = nn.Conv2d(3, 16, 3)
            self.c2 = nn.Conv2d(16, 16, (4, 3))
            self.avg = nn.AdaptiveAvgPool2d((7, 7))
            self.max = nn.AdaptiveMaxPool2d((4, 4))

        def forward(self, x):                                        # 1x3x30x30
            y0 = self.c0(x)                                          # 28x28
            y = self.c1(F.pad(x, (1, 1, 1, 1), mode="reflect"))      # 30x30
            y = self.c2(F.pad(y, (0, 0, 2, 0), mode="replicate"))    # 32x30 -> 29x28
            y = (y[:, :, 1:] + y0).mean((2, 3))                      # 28x28 -> 16
            a = F.pad(self.avg(y0), (1, 0, 0, 1), value=0.5).flatten(1)      # 8x8
            m = F.pad(self.max(y0), (2, 2, 2, 2), mode="reflect").flatten(1)  # 8x8
            return torch.cat([y, a, m], 1)
    return Net()


def _build_tensor_ops_net():
    """cumsum, topk (values), argmax, where, masked_fill, einsum, on a 1x16x64 input."""
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 64)
            self.w = nn.Parameter(torch.randn(64, 32) * 0.125)

        def forward(self, x):
            h = self.proj(x)
            c = torch.cumsum(h, dim=1)
            c = torch.where(c > 0, c, 0.1 * c)
            m = c.masked_fill(h < -0.5, -1.0)
            e = torch.einsum("bnd,de->bne", m, self.w)
            att = torch.einsum("bne,bme->bnm", e, e).softmax(-1)
            top = torch.topk(att, k=4, dim=-1).values
            idx = torch.argmax(e, dim=-1)
            return top, idx
    return Net()


def _build_audio_conv1d():
    """1D conv audio net: Conv1d + BatchNorm1d + ReLU + MaxPool1d, AdaptiveAvgPool1d, Linear."""
    import torch.nn as nn

    def blk(cin, cout, k, s=1):
        return [nn.Conv1d(cin, cout, k, stride=s, padding=k // 2), nn.BatchNorm1d(cout),
                nn.ReLU(), nn.MaxPool1d(4)]

    return nn.Sequential(*blk(1, 32, 80, 4), *blk(32, 32, 3), *blk(32, 64, 3), *blk(64, 64, 3),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 35))


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

# "extra": not exported by default (--group extra). Not here: convnext_small
# (50.2M params, > 200 MB), full detection models (NonMaxSuppression / RoIAlign
# post-processing; only their raw networks are below).
VIDEO = (1, 3, 8, 112, 112)
MODELS.update({
    # torchvision classification
    "alexnet": Spec(_tv("alexnet"), IMG224, "extra", slow=True),
    "vgg11_bn": Spec(_tv("vgg11_bn"), IMG224, "extra", slow=True),
    "googlenet": Spec(_tv_kw("googlenet", aux_logits=False, init_weights=True), IMG224, "extra"),
    "inception_v3": Spec(_tv_kw("inception_v3", aux_logits=False, init_weights=True),
                         (1, 3, 299, 299), "extra", slow=True),
    "mnasnet0_5": Spec(_tv("mnasnet0_5"), IMG224, "extra"),
    "resnext50_32x4d": Spec(_tv("resnext50_32x4d"), IMG224, "extra", slow=True),
    "wide_resnet50_2": Spec(_tv("wide_resnet50_2"), IMG224, "extra", slow=True),
    "efficientnet_v2_s": Spec(_tv("efficientnet_v2_s"), IMG224, "extra", slow=True),
    "regnet_x_400mf": Spec(_tv("regnet_x_400mf"), IMG224, "extra"),
    "mobilenet_v3_large": Spec(_tv("mobilenet_v3_large"), IMG224, "extra"),
    "shufflenet_v2_x0_5": Spec(_tv("shufflenet_v2_x0_5"), IMG224, "extra"),
    "squeezenet1_1": Spec(_tv("squeezenet1_1"), IMG224, "extra"),
    "densenet161": Spec(_tv("densenet161"), IMG224, "extra", slow=True),
    "vit_b_32": Spec(_tv("vit_b_32"), IMG224, "extra", slow=True),
    "swin_s": Spec(_tv("swin_s"), IMG224, "extra", slow=True),
    "maxvit_t": Spec(_tv("maxvit_t"), IMG224, "extra", slow=True),
    # torchvision segmentation ("out" map only)
    "fcn_resnet50": Spec(_tv_seg("fcn_resnet50"), IMG224, "extra", slow=True),
    "deeplabv3_mobilenet_v3_large": Spec(_tv_seg("deeplabv3_mobilenet_v3_large"), IMG224, "extra"),
    "lraspp_mobilenet_v3_large": Spec(_tv_seg("lraspp_mobilenet_v3_large"), IMG224, "extra"),
    # torchvision video (Conv3d)
    "r3d_18": Spec(_tv_kw("r3d_18", "video"), VIDEO, "extra", slow=True),
    "mc3_18": Spec(_tv_kw("mc3_18", "video"), VIDEO, "extra", slow=True),
    "r2plus1d_18": Spec(_tv_kw("r2plus1d_18", "video"), VIDEO, "extra", slow=True),
    # torchvision optical flow / detection (raw networks)
    "raft_small": Spec(_build_raft_small, (1, 6, 128, 128), "extra", ["flow"], slow=True),
    "ssdlite320_raw": Spec(_build_ssdlite_head, (1, 3, 320, 320), "extra",
                           ["bbox_regression", "cls_logits"]),
    "fasterrcnn_mnv3_fpn_backbone": Spec(_build_fasterrcnn_fpn_backbone, (1, 3, 320, 320),
                                         "extra", ["p0", "p1", "pool"]),
    # torch.nn architectures
    "transformer_decoder": Spec(_build_transformer_decoder, (1, 64, 256), "extra",
                                extra_inputs=(((1, 32, 256), "float32"),)),
    "transformer_small": Spec(_build_transformer_small, (1, 32, 128), "extra",
                              extra_inputs=(((1, 16, 128), "float32"),)),
    "mha_block": Spec(_build_mha_block, (1, 50, 192), "extra", ["output", "attn_weights"]),
    "text_encoder": Spec(_build_text_encoder, (1, 64), "extra", input_dtype="int64"),
    "lstm_classifier": Spec(_build_rnn_classifier("LSTM"), (1, 50, 32), "extra"),
    "gru_classifier": Spec(_build_rnn_classifier("GRU"), (1, 50, 32), "extra"),
    # speech / OCR encoder sizes: hidden 384 (2.4 MB of recurrent weights a direction and layer)
    "lstm_large": Spec(_build_rnn_classifier("LSTM", 128, 384), (1, 40, 128), "extra"),
    "gru_large": Spec(_build_rnn_classifier("GRU", 128, 384), (1, 40, 128), "extra"),
    "crnn_text": Spec(_build_crnn, (1, 1, 32, 128), "extra"),
    "pixelshuffle_sr": Spec(_build_pixelshuffle_sr, (1, 3, 64, 64), "extra"),
    "unet_small": Spec(_build_unet_small, (1, 3, 128, 128), "extra"),
    "norm_act_net": Spec(_build_norm_act_net, (1, 3, 64, 64), "extra"),
    "pad_pool_net": Spec(_build_pad_pool_net, (1, 3, 30, 30), "extra"),
    "tensor_ops_net": Spec(_build_tensor_ops_net, (1, 16, 64), "extra", ["topk_values", "argmax"]),
    "audio_conv1d": Spec(_build_audio_conv1d, (1, 1, 16000), "extra"),
})
PAPER = [n for n, s in MODELS.items() if s.group == "paper"]
HELDBACK = [n for n, s in MODELS.items() if s.group == "heldback"]
EXTRA = [n for n, s in MODELS.items() if s.group == "extra"]
DEFAULT = PAPER + HELDBACK  # what a bare ``export_models.py`` exports
GROUPS = {"paper": PAPER, "heldback": HELDBACK, "extra": EXTRA, "default": DEFAULT}


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
    then BatchNorm running stats are calibrated on ``x`` (a tensor, or a tuple
    of the model's inputs) in one eval forward pass (each BN takes the per-channel mean/var of its actual input)."""
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
            model(*x) if isinstance(x, tuple) else model(x)
        finally:
            for h in hooks:
                h.remove()


def example_inputs(spec: Spec, batch: int = 1) -> tuple:
    """Random inputs for ``spec`` with dim 0 set to ``batch``: floats ~ N(0, 1),
    integers uniform in [0, 10) (the range of korch's --random-inputs)."""
    import torch

    def one(shape, dtype):
        shape = (batch,) + tuple(shape[1:])
        if dtype == "float32":
            return torch.randn(shape)
        return torch.randint(0, 10, shape, dtype=getattr(torch, dtype))
    return tuple(one(sh, dt) for sh, dt in ((spec.input_shape, spec.input_dtype),
                                            *spec.extra_inputs))


def input_names(spec: Spec) -> list[str]:
    return ["input"] + [f"input{i}" for i in range(1, len(spec.extra_inputs) + 1)]


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
    make_weights_nontrivial(model, example_inputs(spec))  # batch 1: same weights for every batch
    x = example_inputs(spec, batch)
    # A name of this process's own: the e2e tests may export the same model from two processes
    # at once (the same seeded bytes); each renames its own checked file into place.
    tmp = path.with_suffix(f".onnx.{os.getpid()}.tmp")
    # Grad stays enabled: nn.TransformerEncoderLayer / MultiheadAttention would
    # otherwise take their fused inference fast path, which is not exportable.
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer/exporter chatter, not actionable here
        torch.onnx.export(model, x, str(tmp), opset_version=OPSET,
                          do_constant_folding=True, input_names=input_names(spec),
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
    ap.add_argument("--group", choices=sorted(GROUPS), default=None,
                    help="export this group (added to any names given); 'extra' is "
                    "never part of the default set")
    args = ap.parse_args(argv)

    if args.list:
        for n, s in MODELS.items():
            print(f"{n:29s} {s.group:9s} {'x'.join(map(str, s.input_shape)):14s}"
                  f"{' slow' if s.slow else ''}")
        return 0
    names = list(args.names) + [n for n in GROUPS.get(args.group, []) if n not in args.names]
    names = names or (DEFAULT if args.batch == 1 else PAPER)
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
