"""Two-dimensional convolutions as dense layers with shared weights.

A convolution ``Conv2d(C_in, C_out, (kh, kw), stride, padding)`` on images of shape ``(C_in, H, W)``
is the linear map whose matrix has one row per output pixel ``(o, y, x)`` and one column per input
pixel ``(c, y', x')``, with entry ``K[o, c, y' - s*y + p, x' - s*x + p]`` where that index lies in the
kernel, and 0 elsewhere (zero padding, cross-correlation as in torch).  Pixels are stored
channel-major, then row-major (index ``(c*H + y)*W + x``), which is exactly torch's ``Flatten`` of a
``(C, H, W)`` tensor and the pixel order of symeq's image groups (``docs/groups.md``).

The index map is written once and filled with whatever scalars the kernel holds: exact ``fmpq``
for the exact reader (``{"type": "conv2d", ...}`` layers in model files), floats for the numeric
twin (``symeq.numeric.from_torch`` of ``nn.Conv2d``).

Examples
--------
>>> spec = ConvShape(1, 1, 3, 3, 2, 2, stride=1, padding=0)
>>> spec.out_hw
(2, 2)
>>> dense_rows(spec, [[[[1, 2], [3, 4]]]], zero=0)[0]
[1, 2, 0, 3, 4, 0, 0, 0, 0]
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError, ShapeError

__all__ = ["ConvShape", "dense_rows", "conv_bias"]


@dataclass(frozen=True)
class ConvShape:
    """The shape data of a 2-d convolution on ``(in_channels, height, width)`` images."""

    in_channels: int
    out_channels: int
    height: int
    width: int
    kh: int
    kw: int
    stride: int = 1
    padding: int = 0

    def __post_init__(self):
        for name in ("in_channels", "out_channels", "height", "width", "kh", "kw", "stride"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"conv2d: {name} must be a positive integer, got {v!r}")
        if not isinstance(self.padding, int) or isinstance(self.padding, bool) or self.padding < 0:
            raise InputError(f"conv2d: padding must be a non-negative integer, got {self.padding!r}")
        oh, ow = self.out_hw
        if oh < 1 or ow < 1:
            raise ShapeError(f"conv2d: a {self.kh}x{self.kw} kernel with padding {self.padding} does not fit "
                             f"{self.height}x{self.width} images")

    @property
    def out_hw(self) -> tuple[int, int]:
        oh = (self.height + 2 * self.padding - self.kh) // self.stride + 1
        ow = (self.width + 2 * self.padding - self.kw) // self.stride + 1
        return oh, ow

    @property
    def in_dim(self) -> int:
        return self.in_channels * self.height * self.width

    @property
    def out_dim(self) -> int:
        oh, ow = self.out_hw
        return self.out_channels * oh * ow


def _check_kernel(spec: ConvShape, kernel) -> None:
    shape = (spec.out_channels, spec.in_channels, spec.kh, spec.kw)
    ok = (len(kernel) == shape[0]
          and all(len(k) == shape[1] for k in kernel)
          and all(len(r) == shape[2] for k in kernel for r in k)
          and all(len(row) == shape[3] for k in kernel for r in k for row in r))
    if not ok:
        raise ShapeError(f"conv2d: the kernel must have shape out_channels x in_channels x kh x kw = "
                         f"{'x'.join(map(str, shape))}")


def dense_rows(spec: ConvShape, kernel, zero) -> list[list]:
    """The rows of the dense matrix of the convolution (``out_dim`` rows of length ``in_dim``).

    ``kernel[o][c][i][j]`` are the weights (any scalar type); ``zero`` fills the other entries.
    """
    _check_kernel(spec, kernel)
    H, W, p, s = spec.height, spec.width, spec.padding, spec.stride
    oh, ow = spec.out_hw
    rows = []
    for o in range(spec.out_channels):
        for y in range(oh):
            for x in range(ow):
                row = [zero] * spec.in_dim
                for c in range(spec.in_channels):
                    kc = kernel[o][c]
                    for i in range(spec.kh):
                        yy = s * y + i - p
                        if not 0 <= yy < H:
                            continue
                        base = (c * H + yy) * W
                        for j in range(spec.kw):
                            xx = s * x + j - p
                            if 0 <= xx < W:
                                row[base + xx] = kc[i][j]
                rows.append(row)
    return rows


def conv_bias(spec: ConvShape, bias) -> list:
    """The dense bias: each channel's bias repeated over its output pixels."""
    if len(bias) != spec.out_channels:
        raise ShapeError(f"conv2d: bias has length {len(bias)}, expected out_channels = {spec.out_channels}")
    oh, ow = spec.out_hw
    return [b for b in bias for _ in range(oh * ow)]
