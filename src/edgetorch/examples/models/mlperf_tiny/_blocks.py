"""Building blocks the MLPerf Tiny models share."""

from __future__ import annotations

from torch import nn


def conv_bn(c_in: int, c_out: int, kernel, stride=1, padding=0, groups: int = 1
            ) -> list[nn.Module]:
    """A bias-free convolution followed by batch norm."""
    return [nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, groups=groups,
                      bias=False), nn.BatchNorm2d(c_out)]


class DepthwiseSeparable(nn.Module):
    """Depthwise convolution, BN, ReLU, then pointwise (1x1) convolution, BN, ReLU."""

    def __init__(self, c_in: int, c_out: int, kernel=(3, 3), stride: int = 1) -> None:
        super().__init__()
        k = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
        self.depthwise, self.depthwise_bn = conv_bn(
            c_in, c_in, k, stride=stride, padding=(k[0] // 2, k[1] // 2), groups=c_in)
        self.pointwise, self.pointwise_bn = conv_bn(c_in, c_out, 1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.relu(self.depthwise_bn(self.depthwise(x)))
        return self.relu(self.pointwise_bn(self.pointwise(x)))
