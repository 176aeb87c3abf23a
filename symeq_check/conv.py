"""conv2d layers, checked on their kernels (never the (C H W)^2 dense matrix): the reading of a conv layer
and of a dense layer after one (a whole-image kernel), the grid geometry, the forward pass, the
channel-pixel actions (M y)[c, p] = factor[c] y[source[c], pixels[p]] and the layerwise check of a conv chain
(docs/conv.md, docs/certificates.md).  The geometry is re-derived here from the definitions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ._numbers import CheckError, Matrix, _count, _dict, _indices, _matrix, _ratio, _short, _vector
from .activations import _apply, _bias_and_activation, _neuron_failure
from .algebra import _close_tuples
from .layer import Kind, Layer
from .report import CheckReport
from .pooling import _input_shape, _pool_failure
from .schema import DENSE_KEYS, check_keys


# ----------------------------------------------------------------------------- conv2d layers (issue 19)
# A conv2d layer is read and checked on its kernels, in time linear in taps x output pixels x
# channels (never the (C H W)^2 dense matrix).  Its latent actions are "channel-pixel" actions
# (M y)[c, p] = factor[c] y[source[c], pixels[p]] (docs/conv.md, docs/certificates.md).  The
# geometry is re-derived here from the definitions, independently of symeq.layers.conv.

CONV_KEYS = (("type", "kernel", "bias", "stride", "padding", "padding_mode", "input_shape", "activation",
              "dilation", "groups"), ("type", "kernel", "bias"))
CHANNEL_PIXEL_KEYS = (("kind", "height", "width", "channels", "pixels"), ("kind", "height", "width", "channels",
                                                                           "pixels"))
CHANNELS_KEYS = (("source", "factor"), ("source", "factor"))


@dataclass(frozen=True)
class _Conv(Layer):
    """x -> act(conv_K(x) + b): kernel rows per output channel (taps in (c, i, j) order), per-channel bias."""

    LEGACY_FIELDS = ("in_shape", "kh", "kw", "stride", "padding", "mode", "rows", "bias", "act")
    image = kernels = True

    in_shape: tuple
    kh: int
    kw: int
    stride: int
    padding: int
    mode: str
    rows: tuple
    bias: tuple
    act: object
    label: str = field(compare=False, default="conv2d")

    @property
    def out_hw(self) -> tuple:
        _, h, w = self.in_shape
        return ((h + 2 * self.padding - self.kh) // self.stride + 1, (w + 2 * self.padding - self.kw) // self.stride + 1)

    @property
    def out_shape(self) -> tuple:
        return (len(self.rows),) + self.out_hw

    @property
    def out_dim(self) -> int:
        c, h, w = self.out_shape
        return c * h * w

    def sources(self) -> list:
        """src[t][q]: the input index tap t reads at output pixel q, or -1 (zero padding)."""
        C, H, W = self.in_shape
        oh, ow = self.out_hw
        p, s = self.padding, self.stride
        out = []
        for c in range(C):
            for i in range(self.kh):
                for j in range(self.kw):
                    row = []
                    for y in range(oh):
                        for x in range(ow):
                            yy, xx = s * y + i - p, s * x + j - p
                            if self.mode == "circular":
                                yy, xx = yy % H, xx % W
                            row.append((c * H + yy) * W + xx if 0 <= yy < H and 0 <= xx < W else -1)
                    out.append(row)
        return out

    def forward(self, x) -> tuple:
        src = self.sources()  # per tap, the input it reads at each output pixel (-1: padding)
        return tuple(_apply(self.act, sum((w * x[src[t][q]] for t, w in enumerate(r) if w and src[t][q] >= 0),
                                          self.bias[o])) for o, r in enumerate(self.rows) for q in range(len(src[0])))


class _ConvKind(Kind):
    """``"conv2d"``, read on the shape before it (a dense layer after one too: :func:`_dense_after_conv`)."""

    folds_pool = reads_image = True

    def read(self, spec: dict, r, dense: bool = False) -> _Conv:
        if r.pending is not None:  # an average pooling before it (symeq_check.avgpool): folded in
            spec, dense = r.pending(spec, r, dense)
            r.spec = spec
        conv = (_dense_after_conv(spec, r.shape, r.name, r.at, r.last) if dense
                else _conv_layer(spec, r.shape, r.width, r.name, r.at, r.last))
        r.shape, r.width = conv.out_shape, conv.out_dim
        return conv

    def canonical(self, spec: dict, shape, normal) -> tuple:
        """input_shape (inherited), stride, padding and padding_mode written, dilation and groups of 1 dropped."""
        layer = normal(spec)
        given = spec.get("input_shape")
        shape = [int(v) for v in given] if given is not None else shape
        stride, padding = int(spec.get("stride", 1)), int(spec.get("padding", 0))
        for key in ("dilation", "groups"):
            if layer.get(key) in ("1", ["1", "1"]):
                del layer[key]
        layer.update(input_shape=[str(v) for v in shape], stride=str(stride), padding=str(padding),
                     padding_mode=spec.get("padding_mode", "zeros"))
        kernel = spec["kernel"]
        kh, kw = len(kernel[0][0]), len(kernel[0][0][0])
        return layer, [len(kernel), (shape[1] + 2 * padding - kh) // stride + 1,
                       (shape[2] + 2 * padding - kw) // stride + 1]


class _FlattenKind(Kind):
    """``"flatten"``: the identity, no layer ((C, H, W) is stored flattened already; the shape stays)."""

    makes_layer, reshape_only = False, True

    def read(self, spec: dict, r) -> None:
        check_keys(spec, r.at, ("type",), ("type",))

    def canonical(self, spec: dict, shape, normal) -> tuple:
        return None, shape  # left out of the digest: it moves no number


CONV2D, FLATTEN = _ConvKind(), _FlattenKind()


def _out_dim(layer) -> int:
    return layer.out_dim


def _conv_canonical_form(layers) -> tuple:
    """A chain of conv2d layers with dead channels dropped and equal channels merged (the same function).

    Per hidden layer, until nothing changes: a channel whose next-layer kernels are all zero is
    dropped; a channel with a zero kernel is the constant act(b): dropped when act(b) = 0, or when
    every output pixel of the next layer reads the whole kernel (padding 0 or circular; the
    constant then goes into the next bias); a channel with the kernel row and bias of an earlier
    one (or their negatives, for an odd polynomial activation; or a positive multiple, for ReLU) is
    merged into it (its next-layer kernels added, times the factor).  Equal forms prove equal functions; different forms prove nothing.
    """
    from dataclasses import replace

    layers = list(layers)
    changed = True
    while changed:
        changed = False
        for i in range(len(layers) - 1):
            a, b = layers[i], layers[i + 1]
            n, t = len(a.rows), b.kh * b.kw
            whole = b.padding == 0 or b.mode == "circular"
            odd = isinstance(a.act, tuple) and all(c == 0 for c in a.act[0::2])

            def without(j, nbias=None, nrows=None):
                rows = nrows if nrows is not None else b.rows
                return (replace(a, rows=a.rows[:j] + a.rows[j + 1:], bias=a.bias[:j] + a.bias[j + 1:]),
                        replace(b, in_shape=(n - 1,) + tuple(b.in_shape[1:]),
                                rows=tuple(r[:j * t] + r[(j + 1) * t:] for r in rows),
                                bias=tuple(nbias if nbias is not None else b.bias)))

            for j in range(n if n > 1 else 0):
                out = [r[j * t:(j + 1) * t] for r in b.rows]
                if not any(x for r in out for x in r):
                    layers[i], layers[i + 1] = without(j)
                    changed = True
                    break
                if not any(a.rows[j]):
                    c = _apply(a.act, a.bias[j])
                    if c == 0 or whole:
                        layers[i], layers[i + 1] = without(j, [bb + c * sum(r) for bb, r in zip(b.bias, out)])
                        changed = True
                        break
                    continue
                for k in range(j):
                    qs = [1, -1] if odd else [1]
                    if a.act == "relu":  # relu(q z) = q relu(z) for q > 0: a positively scaled clone
                        r = _ratio(list(a.rows[j]) + [a.bias[j]], list(a.rows[k]) + [a.bias[k]]) if any(a.rows[k]) else None
                        qs = [r] if r is not None and r > 0 else []
                    for q in qs:
                        if a.bias[j] == q * a.bias[k] and all(x == q * y for x, y in zip(a.rows[j], a.rows[k])):
                            rows = [list(r) for r in b.rows]
                            for r in rows:
                                for u in range(t):
                                    r[k * t + u] += q * r[j * t + u]
                            layers[i], layers[i + 1] = without(j, nrows=tuple(tuple(r) for r in rows))
                            changed = True
                            break
                    if changed:
                        break
                if changed:
                    break
            if changed:
                break
    return tuple(layers)


def _conv_layer(spec: dict, shape, width: int, name: str, at: str, last: bool):
    """A conv2d layer of a model file (shape: the (C, H, W) before it, or None)."""
    check_keys(spec, at, *CONV_KEYS)
    C, H, W = shape = _input_shape(spec, shape, width, name, "conv2d")
    for key in ("dilation", "groups"):
        if spec.get(key, 1) not in (1, [1, 1]):
            raise CheckError(f"{name}: only {key} 1 is supported")
    kernel = spec.get("kernel")
    if not isinstance(kernel, list) or not kernel:
        raise CheckError(f"{name}: kernel must be a nested list out_channels x in_channels x kh x kw")
    mats = []
    for o, ko in enumerate(kernel):
        if not isinstance(ko, list) or len(ko) != C:
            raise CheckError(f"{name}: kernel[{o}] must have {C} input channels")
        mats.append([_matrix(kc, f"{name} kernel[{o}][{c}]") for c, kc in enumerate(ko)])
    kh, kw = len(mats[0][0]), len(mats[0][0][0])
    if any(len(m) != kh or any(len(r) != kw for r in m) for ko in mats for m in ko):
        raise CheckError(f"{name}: every kernel must be {kh}x{kw}")
    stride = _count(spec.get("stride", 1), f"{name} stride", 1)
    padding = _count(spec.get("padding", 0), f"{name} padding", 0)
    mode = spec.get("padding_mode", "zeros")
    if mode not in ("zeros", "circular"):
        raise CheckError(f"{name}: padding_mode must be 'zeros' or 'circular', got {_short(mode)}")
    rows = tuple(tuple(m[i][j] for m in ko for i in range(kh) for j in range(kw)) for ko in mats)
    bias, act, label = _bias_and_activation(spec, len(rows), name, last)
    layer = _Conv(shape, kh, kw, stride, padding, mode, rows, bias, act, f"conv2d {label}")
    if min(layer.out_hw) < 1:
        raise CheckError(f"{name}: the kernel does not fit the padded image")
    return layer


def _dense_after_conv(spec: dict, shape, name: str, at: str, last: bool) -> _Conv:
    """A dense layer after a convolution (and a flatten): the conv with a whole-image kernel."""
    check_keys(spec, at, *DENSE_KEYS)
    C, H, W = shape
    weight = _matrix(spec.get("weight"), f"{name} weight", cols=C * H * W)
    bias, act, label = _bias_and_activation(spec, len(weight), name, last)
    return _Conv(shape, H, W, 1, 0, "zeros", weight, bias, act, f"conv2d (dense) {label}")


def _as_channel_pixel(m: Matrix, shape) -> tuple | None:
    """A dense group matrix as (source, factor, pixels) on (C, H, W), or None if it is not of that form."""
    C, H, W = shape
    P = H * W
    cols, vals = [], []
    for row in m:
        nz = [(c, x) for c, x in enumerate(row) if x]
        if len(nz) != 1:
            return None
        cols.append(nz[0][0])
        vals.append(nz[0][1])
    pix = tuple(c % P for c in cols[:P])
    src, fac = [], []
    for c in range(C):
        sc, fc = cols[c * P] // P, vals[c * P]
        if any(cols[c * P + p] != sc * P + pix[p] or vals[c * P + p] != fc for p in range(P)):
            return None
        src.append(sc)
        fac.append(fc)
    return tuple(src), tuple(fac), pix


def _channel_pixel(value, shape, where: str) -> tuple:
    check_keys(_dict(value, where), where, *CHANNEL_PIXEL_KEYS)
    C, H, W = shape
    if value.get("kind") != "channel-pixel":
        raise CheckError(f"{where}: a conv2d layer's action must be of kind 'channel-pixel'")
    if value.get("height") != H or value.get("width") != W:
        raise CheckError(f"{where}: height and width must be {H} and {W}")
    ch = value.get("channels")
    check_keys(_dict(ch, f"{where}.channels"), f"{where}.channels", *CHANNELS_KEYS)
    src = tuple(_indices(ch.get("source"), C, f"{where}.channels.source"))
    fac = _vector(ch.get("factor"), f"{where}.channels.factor", C)
    pix = tuple(_indices(value.get("pixels"), H * W, f"{where}.pixels"))
    if len(set(src)) != C or len(set(pix)) != H * W:
        raise CheckError(f"{where}: source and pixels must be permutations")
    if any(f == 0 for f in fac):
        raise CheckError(f"{where}: a factor is 0 (not invertible)")
    return src, fac, pix


_PLANE_MAPS = ((1, 0, 0, 1), (0, -1, 1, 0), (-1, 0, 0, -1), (0, 1, -1, 0),
               (-1, 0, 0, 1), (1, 0, 0, -1), (0, 1, 1, 0), (0, -1, -1, 0))


def _grid_pixels(R, h: int, w: int):
    a, b, c, d = R
    if b and h != w:
        return None
    d0 = h - 1 if (a < 0 or b < 0) else 0
    d1 = w - 1 if (c < 0 or d < 0) else 0
    return tuple((a * y + b * x + d0) * w + (c * y + d * x + d1) for y in range(h) for x in range(w))


def _conv_failure(layer: _Conv, p: tuple, q: tuple) -> str | None:
    """Why act(conv(P x)) == Q act(conv(x)) fails, or None: the kernel identities when P's pixels are a
    grid symmetry R that the conv's geometry carries to Q's pixels; otherwise neuron by neuron."""
    C, H, W = layer.in_shape
    (ps, pf, pp), (qs, qf, qp) = p, q
    oh, ow = layer.out_hw
    for R in _PLANE_MAPS:
        if _grid_pixels(R, H, W) != pp:
            continue
        a, b, c, d = R
        fits = not b or (layer.kh == layer.kw)
        for row in ((a, b), (c, d)):
            src = 0 if row[0] else 1
            n, k = ((H, layer.kh), (W, layer.kw))[src]
            if row[src] < 0 and (n + 2 * layer.padding - k) % layer.stride:
                fits = False
        if not fits or _grid_pixels(R, oh, ow) != qp:
            break
        kh, kw = layer.kh, layer.kw
        e0 = kh - 1 if (a < 0 or b < 0) else 0
        e1 = kw - 1 if (c < 0 or d < 0) else 0
        for o, r in enumerate(layer.rows):  # K'[o, source[c], R t] = factor[c] K[o, c, t]
            u = [Fraction(0)] * len(r)
            for t, x in enumerate(r):
                ci, ij = divmod(t, kh * kw)
                i, j = divmod(ij, kw)
                u[(ps[ci] * kh + a * i + b * j + e0) * kw + c * i + d * j + e1] = x * pf[ci]
            k, f = qs[o], qf[o]
            if layer.act is None:
                if any(x != f * y for x, y in zip(u, layer.rows[k])) or layer.bias[o] != f * layer.bias[k]:
                    break
            elif _neuron_failure(layer.act, u, layer.rows[k], layer.bias[o], layer.bias[k], f):
                break
        else:
            return None
        break
    # the general decision on sparse rows (necessary and sufficient, linear in taps x neurons)
    src = layer.sources()
    npix = oh * ow
    P = H * W
    pcol = lambda s: ps[s // P] * P + pp[s % P]  # noqa: E731 - row s of P has factor pf[s // P] there
    for j in range(layer.out_dim):
        o, qq = divmod(j, npix)
        k = qs[o] * npix + qp[qq]
        rows = []
        for n_, (oo, px) in ((j, (o, qq)), (k, divmod(k, npix))):
            acc: dict = {}
            for t, x in enumerate(layer.rows[oo]):
                s = src[t][px]
                if x and s >= 0:
                    acc[s] = acc.get(s, 0) + x
            rows.append(acc)
        u = {pcol(s): x * pf[s // P] for s, x in rows[0].items()}
        v = rows[1]
        keys = sorted(set(u) | set(v)) or [0]
        uu = [u.get(x, Fraction(0)) for x in keys]
        vv = [v.get(x, Fraction(0)) for x in keys]
        f = qf[o]
        bj, bk = layer.bias[o], layer.bias[k // npix]
        if layer.act is None:
            if any(x != f * y for x, y in zip(uu, vv)) or bj != f * bk:
                return f"neuron {j + 1}: W P != Q W or b != Q b"
            continue
        why = _neuron_failure(layer.act, uu, vv, bj, bk, f)
        if why:
            return f"neuron {j + 1} (channel {o + 1}, pixel {qq}): {why}"
    return None


def _cp_mul(x: tuple, y: tuple) -> tuple:
    (s1, f1, p1), (s2, f2, p2) = x, y
    return (tuple(s2[s] for s in s1), tuple(a * f2[s] for a, s in zip(f1, s1)), tuple(p2[p] for p in p1))


def _check_conv_layerwise(report: CheckReport, cert: dict, layers: list, group: list, cap: int) -> None:
    """The layer checks and the homomorphism for a chain of conv2d layers (sparse channel-pixel actions)."""
    if not all(layer.image for layer in layers):  # not a rejection: nothing is claimed false
        report.checks.append("nothing this checker can re-verify: a chain mixing dense and conv2d layers "
                             "(dense layers before the first convolution) is not checked by this checker")
        report.unverifiable = True
        return
    actions = cert.get("latent_actions")
    if not isinstance(actions, list) or len(actions) != len(layers) - 1:
        report.reasons.append(f"latent_actions must list one entry per hidden layer ({len(layers) - 1})")
        return
    offsets = cert.get("latent_offsets")
    if offsets is not None and any(any(_vector(c, "offset")) for e in offsets if isinstance(e, list) for c in e):
        report.reasons.append("latent_offsets on conv2d layers are not supported by this checker")
        return
    rho = []
    first = []
    for g, (a, _) in enumerate(group):
        cp = _as_channel_pixel(a, layers[0].in_shape)
        if cp is None:
            report.reasons.append(f"generator {g + 1}: the input matrix is not a channel action times a pixel permutation")
            return
        first.append(cp)
    rho.append(first)
    for i, (entry, layer) in enumerate(zip(actions, layers), 1):
        if not isinstance(entry, list) or len(entry) != len(group):
            report.reasons.append(f"layer {i}: latent_actions must give one action per generator ({len(group)})")
            return
        mats = [_channel_pixel(m, layer.out_shape, f"certificate.latent_actions[{i - 1}][{g}]")
                for g, m in enumerate(entry)]
        if layer.act in ("relu", "max") and any(f <= 0 for m in mats for f in m[1]):  # "max": a pooling layer
            report.reasons.append(f"layer {i}: a {layer.act} layer needs positive factors")
            return
        rho.append(mats)
    last = []
    for g, (_, b) in enumerate(group):
        cp = _as_channel_pixel(b, layers[-1].out_shape)
        if cp is None:
            report.reasons.append(f"generator {g + 1}: the output matrix is not monomial on the output channels")
            return
        last.append(cp)
    rho.append(last)
    for g in range(len(group)):
        for i, layer in enumerate(layers, 1):
            why = (_pool_failure if layer.pools else _conv_failure)(layer, rho[i - 1][g], rho[i][g])
            if why:
                report.reasons.append(f"layer {i}, generator {g + 1}: {why}")
            else:
                report.checks.append(f"layer {i}, generator {g + 1}: " + (
                    f"max(P x) = Q max(x) verified on the windows ({layer.label}, {layer.out_dim} neurons)"
                    if layer.pools else
                    f"act(conv(P x)) = Q act(conv(x)) verified on the kernels ({layer.label}, {layer.out_dim} neurons)"))
    if report.reasons:
        return
    tuples = [tuple(rho[i][g] for i in range(len(rho))) for g in range(len(group))]
    if not tuples:
        report.checks.append("homomorphism: trivial group (no generators)")
        return
    ident = tuple((tuple(range(len(m[0]))), tuple(Fraction(1) for _ in m[1]), tuple(range(len(m[2]))))
                  for m in tuples[0])
    seen = _close_tuples(report, tuples, ident, _cp_mul, cap)
    if seen is None:
        return
    by_input: dict = {}
    for t in seen:
        if by_input.setdefault(t[0], t) != t:
            report.reasons.append("homomorphism: two group elements with the same input action act differently on "
                                  "a latent space; the actions do not respect a relation of the group")
            return
    report.checks.append(f"homomorphism: group of order {len(seen)}, all {len(layers) - 1} latent actions consistent "
                         "(channel-pixel actions composed on their factors)")
