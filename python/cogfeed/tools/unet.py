"""A small UNet in plain torch, and the IoU it is judged by.

Small on purpose: the experiment asks whether the loader keeps the
accelerator busy, so the model must be cheap enough that data loading can
be the bottleneck, yet a real segmentation network (encoder, decoder,
skip connections) that learns the synthetic land cover.
"""

import torch
from torch import nn


def _block(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """in_ch -> classes logits; `depth` poolings, `base` channels at the top
    (doubling per level).  Input sides must be multiples of 2**depth."""

    def __init__(self, in_ch=4, classes=6, base=16, depth=3):
        super().__init__()
        self.depth = depth
        ch = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList([_block(in_ch, ch[0])] + [
            _block(ch[i], ch[i + 1]) for i in range(depth)])
        self.up = nn.ModuleList([
            nn.ConvTranspose2d(ch[i + 1], ch[i], 2, stride=2)
            for i in reversed(range(depth))])
        self.dec = nn.ModuleList([_block(ch[i] * 2, ch[i])
                                  for i in reversed(range(depth))])
        self.head = nn.Conv2d(ch[0], classes, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        skips = []
        for i, blk in enumerate(self.down):
            x = blk(x if i == 0 else self.pool(x))
            skips.append(x)
        x = skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = up(x)
            x = dec(torch.cat([x, skips.pop()], dim=1))
        return self.head(x)


# The models `cogfeed experiment --model` can train.  "unet" is the small
# UNet above (the default: a 2-core CPU trains it in a minute);
# "unet-resnet18" is the paper's model, a UNet with a ResNet-18 encoder
# from segmentation-models-pytorch, whose step time the paper's GPU
# utilisation figures assume.
MODELS = ("unet", "unet-resnet18")


def make_model(name, in_ch, classes, base=16):
    """A freshly initialised model of MODELS (base: the small UNet's
    width; the ResNet-18 UNet has its fixed widths)."""
    if name == "unet":
        return UNet(in_ch=in_ch, classes=classes, base=base)
    if name == "unet-resnet18":
        try:
            import segmentation_models_pytorch as smp
        except ImportError as e:
            raise RuntimeError(
                "--model unet-resnet18 needs segmentation-models-pytorch "
                "(with timm and torchvision): %s; bench/peers.py makes a "
                "virtual environment with it (docs/experiment.md)" % e)
        # Random initialisation: encoder_weights=None never downloads (no
        # pretrained weights can be fetched here, and the comparison is
        # about step time, not transfer learning).
        return smp.Unet(encoder_name="resnet18", encoder_weights=None,
                        in_channels=in_ch, classes=classes)
    raise ValueError("unknown model %r (one of %s)" % (name,
                                                       ", ".join(MODELS)))


def confusion(pred, target, classes):
    """classes x classes counts (rows: truth, columns: prediction)."""
    k = target.reshape(-1).long() * classes + pred.reshape(-1).long()
    return torch.bincount(k, minlength=classes * classes).reshape(
        classes, classes)


def iou_from_confusion(cm):
    """(mean IoU over classes present in truth or prediction, per class)."""
    cm = cm.double()
    tp = cm.diag()
    union = cm.sum(0) + cm.sum(1) - tp
    per = torch.where(union > 0, tp / union.clamp(min=1),
                      torch.full_like(tp, float("nan")))
    valid = ~torch.isnan(per)
    miou = float(per[valid].mean()) if valid.any() else 0.0
    return miou, [None if torch.isnan(v) else float(v) for v in per]
