"""Deterministic weight initialisation shared by the example architectures."""

from __future__ import annotations

import torch
from torch import nn


def randomize_batchnorm(model: nn.Module) -> None:
    """Give every BatchNorm layer non-trivial affine parameters and running statistics.

    Freshly built BatchNorm layers are an identity in eval mode (mean 0, var 1, weight 1,
    bias 0), which would let a broken BN lowering pass unnoticed. The ranges are kept close to
    the identity so activations stay O(1) through deep networks such as ResNet-18. Uses the
    global RNG, so call it after ``torch.manual_seed``.
    """
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                n = m.num_features
                m.weight.copy_(torch.empty(n).uniform_(0.5, 1.5))
                m.bias.copy_(torch.empty(n).uniform_(-0.2, 0.2))
                m.running_mean.copy_(torch.randn(n) * 0.2)
                m.running_var.copy_(torch.empty(n).uniform_(0.5, 2.0))


def randomize_layernorm(model: nn.Module) -> None:
    """Give every LayerNorm non-identity affine parameters (weight near 1, bias near 0).

    Same reason as :func:`randomize_batchnorm`: default weight 1 / bias 0 hides affine bugs.
    """
    for m in model.modules():
        if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            with torch.no_grad():
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.5, 1.5))
                if m.bias is not None:
                    m.bias.copy_(torch.empty_like(m.bias).uniform_(-0.2, 0.2))


def kaiming_convs(model: nn.Module) -> None:
    """Initialise conv weights the way torchvision does (He normal, fan-out, zero bias).

    PyTorch's default conv init is scaled for fan-in with a uniform distribution; torchvision's
    choice keeps activation magnitudes comparable to a trained network's, which matters for
    tolerance-based numeric comparisons.
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
