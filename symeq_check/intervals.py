"""Rigorous interval arithmetic on Fractions (Taylor series with explicit remainders, outward rounding),
the real activations' enclosures, and the witnesses of ``not-equivariant``: an exact x with f(P x) != Q f(x)
(re-evaluated with integers over one denominator per space, :class:`_ExactForward`), or a ball witness
(``"kind": "arb"``) whose enclosure of some output of f(P x) - Q f(x) excludes 0.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from math import gcd, lcm
from operator import mul

from ._numbers import CheckError, _count, _dict, _fmt, _short, _vector
from .activations import _apply
from .algebra import _matmul, _matvec, _transpose
from .attention import _Attention
from .conv import _Conv
from .evaluate import _evaluate
from .model import _Layer
from .real import _Real, _real_exact
from .report import CheckReport
from .schema import EQ_WITNESS_KEYS, check_keys


def _check_witness(report: CheckReport, eq: dict, n_in: int, layers: list[_Layer],
                   group: list, forward=None, interval_forward=None) -> None:
    """The witness of ``not-equivariant``; ``forward(layers, x)`` and ``interval_forward(layers, x, bits)``
    evaluate the network (by default :class:`_ExactForward`, a chain's or a graph's; the interval one a chain's,
    a graph's from :mod:`symeq_check.graph`)."""
    forward = _ExactForward() if forward is None else forward
    witness = eq.get("witness")
    if witness is None:
        report.reasons.append("a not-equivariant certificate needs a witness")
        return
    if isinstance(witness, dict) and witness.get("kind") == "arb":  # real activations: a ball witness
        _check_ball_witness(report, witness, n_in, layers, group, interval_forward)
        return
    check_keys(_dict(witness, "witness"), "certificate.equivariance.witness", *EQ_WITNESS_KEYS)
    g = witness.get("generator")
    if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < len(group):
        raise CheckError(f"witness: generator must be an index below {len(group)}, got {_short(g)}")
    x = _vector(witness.get("x"), "witness x", n_in)
    p, q = group[g]
    work = forward.work(layers) if isinstance(forward, _ExactForward) else 0
    if work > MAX_WITNESS_WORK:
        report.checks.append(f"nothing this checker can re-verify: the witness's evaluation takes {work} multiply-adds, "
                             f"more than this checker does ({MAX_WITNESS_WORK})")
        report.unverifiable = True
        return
    lhs, rhs = forward(layers, _sparse_matvec(p, x)), _sparse_matvec(q, forward(layers, x))
    report.checks.append(f"witness, generator {g + 1}, x = {_fmt(x)}: f(P x) = {_fmt(lhs)}")
    report.checks.append(f"witness, generator {g + 1}, x = {_fmt(x)}: Q f(x) = {_fmt(rhs)}")
    if lhs == rhs:
        report.reasons.append("the witness does not break equivariance: f(P x) == Q f(x)")
    else:
        report.checks.append(f"f(P x) != Q f(x): the model is not equivariant under generator {g + 1}")
BALL_WITNESS_KEYS = (("kind", "generator", "generator_name", "x", "precision", "output", "enclosures"),
                     ("kind", "generator", "x", "precision", "output", "enclosures"))
MAX_BALL_PRECISION = 4096


# -- rigorous interval evaluation (Fractions, outward rounding) --------------------------------
#
# An interval is a pair (lo, hi) of Fractions with lo <= value <= hi.  Every function below
# returns bounds that are proved: Taylor series with an explicit remainder bound, alternating series
# bounded by their first omitted term, and outward rounding to dyadic numbers of `bits` significant
# bits (to keep the Fractions small).  Nothing is a float.

def _round_down(x: Fraction, bits: int) -> Fraction:
    """The largest number m 2^e <= x with m of about `bits` bits (x itself when 0)."""
    if x == 0:
        return x
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length() - bits if n > 0 else (-n).bit_length() - d.bit_length() - bits
    if e >= 0:
        return Fraction(n // (d << e) << e)
    return Fraction((n << -e) // d, 1 << -e)


def _round_up(x: Fraction, bits: int) -> Fraction:
    return -_round_down(-x, bits)


def _iv_round(a, bits):
    return _round_down(a[0], bits), _round_up(a[1], bits)


def _iv_mul(a, b):
    ps = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(ps), max(ps)


def _iv_scale(c: Fraction, a):
    return (c * a[0], c * a[1]) if c >= 0 else (c * a[1], c * a[0])


def _exp_bounds(r: Fraction, bits: int):
    """lo <= exp(r) <= hi: r / 2^s in [-1/2, 1/2], Taylor series with its tail bound, then s squarings.

    Callers pass r <= 0 or small r (the activations below are written with exp of non-positive
    arguments); for r <= -(bits + 64), 0 < exp(r) <= 2^r <= 2^-(bits + 64) is returned at once, so no
    huge number is ever formed.
    """
    cut = bits + 64
    if r <= -cut:
        return Fraction(0), Fraction(1, 1 << cut)
    if r > 4 * cut:
        raise CheckError(f"exp({_round_down(r, 20)}): argument beyond the checker's range")
    s = 0
    while abs(r) > Fraction(1, 2) * 2 ** s:
        s += 1
    x = r / 2 ** s
    wp = bits + s + 20
    eps = Fraction(1, 1 << wp)
    total, term, k = Fraction(1), Fraction(1), 0
    while True:
        k += 1
        term = term * x / k
        total += term
        if abs(term) <= eps:
            break
    # tail: sum_{j > k} |x|^j / j! <= |term| sum_{i >= 1} (|x| / (k + 1))^i <= |term| (|x| <= 1/2)
    lo, hi = _round_down(total - abs(term), wp), _round_up(total + abs(term), wp)
    for _ in range(s):
        lo, hi = _round_down(lo * lo, wp), _round_up(hi * hi, wp)
    return lo, hi


def _sqrt_bounds(q: Fraction, bits: int):
    """lo <= sqrt(q) <= hi for q >= 0 (integer square roots of q 4^k)."""
    from math import isqrt

    k = bits + 8
    n = q.numerator * 4 ** k
    lo = isqrt(n // q.denominator)
    return Fraction(lo, 2 ** k), Fraction(lo + 1, 2 ** k)


def _atan_inv_bounds(m: int, bits: int):
    """atan(1/m) for an integer m >= 2: an alternating series, between consecutive partial sums."""
    eps = Fraction(1, 1 << (bits + 8))
    total, k = Fraction(0), 0
    while True:
        term = Fraction(1, (2 * k + 1) * m ** (2 * k + 1))
        if term < eps:
            return (total - term, total) if k % 2 else (total, total + term)
        total += term if k % 2 == 0 else -term
        k += 1


@lru_cache(maxsize=16)
def _pi_bounds(bits: int):
    """pi = 16 atan(1/5) - 4 atan(1/239) (Machin), with bounds."""
    a, b = _atan_inv_bounds(5, bits + 8), _atan_inv_bounds(239, bits + 8)
    return 16 * a[0] - 4 * b[1], 16 * a[1] - 4 * b[0]


def _atanh_bounds(z: Fraction, bits: int):
    """atanh(z) for 0 <= z <= 1/3: positive terms z^(2n+1)/(2n+1), tail <= next term / (1 - z^2)."""
    eps = Fraction(1, 1 << (bits + 8))
    total, n, p = Fraction(0), 0, z
    while True:
        term = p / (2 * n + 1)
        if term < eps:
            return total, total + term / (1 - z * z)
        total += term
        n += 1
        p *= z * z


@lru_cache(maxsize=16)
def _log2_bounds(bits: int):
    lo, hi = _atanh_bounds(Fraction(1, 3), bits + 8)  # log 2 = 2 atanh(1/3)
    return 2 * lo, 2 * hi


def _log_bounds(y: Fraction, bits: int):
    """lo <= log(y) <= hi for y > 0: y = 2^k m with 1 <= m < 2, log m = 2 atanh((m - 1) / (m + 1))."""
    k = y.numerator.bit_length() - y.denominator.bit_length()
    m = y / Fraction(2) ** k
    while m >= 2:
        m, k = m / 2, k + 1
    while m < 1:
        m, k = m * 2, k - 1
    wp = bits + abs(k).bit_length() + 8
    z = _atanh_bounds((m - 1) / (m + 1), wp)
    l2 = _iv_scale(Fraction(k), _log2_bounds(wp))
    return 2 * z[0] + l2[0], 2 * z[1] + l2[1]


def _erf_bounds(u: Fraction, bits: int):
    """lo <= erf(u) <= hi: the alternating Maclaurin series (2/sqrt pi) sum (-1)^n u^(2n+1) / (n! (2n+1)),
    past its largest term bounded by the first omitted one; for u >= 6, 1 - exp(-u^2) <= erf(u) <= 1."""
    if u < 0:
        lo, hi = _erf_bounds(-u, bits)
        return -hi, -lo
    if u == 0:
        return Fraction(0), Fraction(0)
    if u >= 6:  # erfc(u) <= exp(-u^2) / (u sqrt(pi)) <= exp(-u^2)
        return 1 - _exp_bounds(-u * u, bits)[1], Fraction(1)
    wp = bits + 16
    eps = Fraction(1, 1 << wp)
    total, n, p, fact = Fraction(0), 0, u, 1
    u2 = u * u
    while True:
        term = p / (fact * (2 * n + 1))
        if n > u2 + 1 and term < eps:
            break  # from n > u^2 on the terms decrease: the tail is within one term
        total += term if n % 2 == 0 else -term
        n += 1
        p *= u2
        fact *= n
    s = (total - term, total + term)
    pi = _pi_bounds(wp)
    root = (_sqrt_bounds(pi[0], wp)[0], _sqrt_bounds(pi[1], wp)[1])
    c = (Fraction(2) / root[1], Fraction(2) / root[0])
    lo, hi = _iv_mul(s, c)
    return max(lo, Fraction(-1)), min(hi, Fraction(1))


def _tanh_bounds(t: Fraction, bits: int):
    """tanh(t) = 1 - 2 E / (1 + E) with E = exp(-2t) for t >= 0 (decreasing in E); odd."""
    if t < 0:
        lo, hi = _tanh_bounds(-t, bits)
        return -hi, -lo
    lo, hi = _exp_bounds(-2 * t, bits + 4)
    return 1 - 2 * hi / (1 + hi), 1 - 2 * lo / (1 + lo)


def _sigmoid_bounds(t: Fraction, bits: int):
    """1 / (1 + exp(-t)) for t >= 0, exp(t) / (1 + exp(t)) for t < 0 (both monotone in the exp)."""
    if t >= 0:
        lo, hi = _exp_bounds(-t, bits + 4)
        return 1 / (1 + hi), 1 / (1 + lo)
    lo, hi = _exp_bounds(t, bits + 4)
    return lo / (1 + lo), hi / (1 + hi)


def _softplus_bounds(t: Fraction, bits: int):
    """log(1 + exp(t)) = max(t, 0) + log(1 + y), y = exp(-|t|) in (0, 1]; y / (1 + y) <= log(1 + y) <= y
    when y is below 2^-bits, else the atanh series of log."""
    lo, hi = _exp_bounds(-abs(t), bits + 4)
    base = max(t, Fraction(0))
    if hi < Fraction(1, 1 << bits):
        return base + lo / (1 + lo), base + hi
    return base + _log_bounds(1 + lo, bits)[0], base + _log_bounds(1 + hi, bits)[1]


def _monotone(f, a, bits):
    """f([lo, hi]) for an increasing f given by its bounds at a point."""
    return f(a[0], bits)[0], f(a[1], bits)[1]


def _hull_pieces(point, a):
    """Enclosure of a function monotone on t <= 0 and on t >= 0: the hull at the ends (and 0)."""
    pts = [point(a[0]), point(a[1])] + ([point(Fraction(0))] if a[0] < 0 < a[1] else [])
    return min(p[0] for p in pts), max(p[1] for p in pts)


def _real_interval(act: _Real, a, bits: int):
    """An enclosure of act([a_lo, a_hi])."""
    name = act.name
    if name == "tanh":
        return _monotone(_tanh_bounds, a, bits)
    if name == "erf":
        return _monotone(_erf_bounds, a, bits)
    if name == "sigmoid":
        return _monotone(_sigmoid_bounds, a, bits)
    if name == "silu":
        return _iv_mul(a, _monotone(_sigmoid_bounds, a, bits))
    if name == "softplus":
        return _monotone(_softplus_bounds, a, bits)
    if name == "gelu":
        if act.param == "tanh":  # t (1 + tanh(sqrt(2 / pi) (t + c t^3))) / 2, with t + c t^3 increasing
            c = Fraction(44715, 1000000)
            p = (a[0] + c * a[0] ** 3, a[1] + c * a[1] ** 3)
            pi = _pi_bounds(bits + 8)
            k = (_sqrt_bounds(2 / pi[1], bits + 8)[0], _sqrt_bounds(2 / pi[0], bits + 8)[1])
            v = _iv_round(_iv_mul(p, k), bits + 8)
            th = _monotone(_tanh_bounds, v, bits)
        else:  # t Phi(t), Phi(t) = (1 + erf(t / sqrt 2)) / 2 increasing
            r = _sqrt_bounds(Fraction(1, 2), bits + 8)
            v = _iv_round(_iv_mul(a, r), bits + 8)
            th = _monotone(_erf_bounds, v, bits)
        return _iv_mul(a, ((1 + th[0]) / 2, (1 + th[1]) / 2))
    if name == "elu":
        def point(t):
            if t >= 0:
                return t, t
            e = _exp_bounds(t, bits + 4)
            return _iv_scale(act.param, (e[0] - 1, e[1] - 1))
        return _hull_pieces(point, a)
    if name == "leaky_relu":
        return _hull_pieces(lambda t: (_real_exact(act, t),) * 2, a)
    raise CheckError(f"no interval evaluation for {name}")


def _interval_apply(act, a, bits: int):
    if act is None:
        return a
    if isinstance(act, _Real):
        return _iv_round(_real_interval(act, a, bits), bits)
    if act == "relu":
        return max(a[0], Fraction(0)), max(a[1], Fraction(0))
    if isinstance(act, tuple):  # a polynomial: interval Horner (a valid, if loose, enclosure)
        acc = (act[-1], act[-1])
        for c in reversed(act[:-1]):
            acc = _iv_round(_iv_mul(acc, a), bits)
            acc = (acc[0] + c, acc[1] + c)
        return acc
    raise CheckError(f"no interval evaluation for the layer activation {_short(act)}")


def _interval_attention(layer: _Attention, x, bits: int):
    """An enclosure of an attention layer (the model's first layer) at an exact x: lightning exactly;
    softmax with exact scores S_tu = x_t^T A_h x_u + b_h^T x_u, the scale s (rational, or 1/sqrt(d_k) as
    an interval), e_u = exp(s (S_tu - max_w S_tw)) <= 1 enclosed, softmax_u in
    [e_u_lo / (e_u_lo + sum_{w != u} e_w_hi), e_u_hi / (e_u_hi + sum_{w != u} e_w_lo)], then the exact
    x_u^T V_h O_h and the output bias."""
    if layer.scoring != "softmax":
        return [(v, v) for v in _evaluate([layer], x)]
    T, d, do = layer.tokens, layer.d, layer.d_out
    X = [tuple(x[t * d:(t + 1) * d]) for t in range(T)]
    if layer.scale is not None:
        s = (layer.scale, layer.scale)
    else:
        r = _sqrt_bounds(Fraction(len(layer.heads[0][0][0])), bits + 8)
        s = (1 / r[1], 1 / r[0])
    c = layer.bias or (Fraction(0),) * do
    out = [[(c[k], c[k]) for k in range(do)] for _ in range(T)]
    for h, (Q, K, V, O) in enumerate(layer.heads):
        A = _matmul(Q, _transpose(K))
        b = layer.score_biases[h] if layer.score_biases and layer.score_biases[h] else (Fraction(0),) * d
        VO = _matmul(V, O)
        XA = [tuple(sum(X[t][i] * A[i][j] for i in range(d)) for j in range(d)) for t in range(T)]
        XB = [sum(X[u][j] * b[j] for j in range(d)) for u in range(T)]
        XVO = [tuple(sum(X[u][i] * VO[i][k] for i in range(d)) for k in range(do)) for u in range(T)]
        for t in range(T):
            S = [sum(XA[t][j] * X[u][j] for j in range(d)) + XB[u] for u in range(T)]
            m = max(S)
            e = [(_exp_bounds(s[1] * (v - m), bits)[0], _exp_bounds(s[0] * (v - m), bits)[1]) for v in S]
            lo_sum, hi_sum = sum(a for a, _ in e), sum(z for _, z in e)
            for u in range(T):
                lo, hi = e[u]
                w = (lo / (lo + (hi_sum - hi)), hi / (hi + (lo_sum - lo)))
                for k in range(do):
                    a, z = _iv_scale(XVO[u][k], w)
                    out[t][k] = (out[t][k][0] + a, out[t][k][1] + z)
    return [_iv_round(v, bits) for row in out for v in row]


def _interval_evaluate(layers: list, x, bits: int):
    """An enclosure of f(x) for exact x: interval affine maps and activations, rounded outward."""
    ys = [(v, v) for v in x]
    for layer in layers:
        if layer.splits_in_chain:  # attention (the first layer, so its input is exact)
            ys = _interval_attention(layer, x, bits)
            continue
        if not layer.dense_matrix:
            raise CheckError("ball witnesses cover dense and attention layers only")
        out = []
        for row, b in zip(layer.weight, layer.bias):
            lo = hi = b
            for w, (yl, yh) in zip(row, ys):
                if w > 0:
                    lo, hi = lo + w * yl, hi + w * yh
                elif w < 0:
                    lo, hi = lo + w * yh, hi + w * yl
            out.append(_interval_apply(layer.act, _iv_round((lo, hi), bits), bits))
        ys = out
    return ys


def _sparse_matvec(a, x) -> tuple:
    return tuple(sum((w * x[j] for j, w in enumerate(row) if w), Fraction(0)) for row in a)


def _check_ball_witness(report: CheckReport, witness: dict, n_in: int, layers: list, group: list,
                        interval_forward=None) -> None:
    """A ball witness: the checker's own enclosure of some output of f(P x) - Q f(x) excludes 0.

    The enclosures in the certificate are symeq's (arb); each must meet the checker's own (both
    contain the true value), and the claimed output's must exclude 0, as must the checker's.
    """
    check_keys(witness, "certificate.equivariance.witness", *BALL_WITNESS_KEYS)
    g = witness.get("generator")
    if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < len(group):
        raise CheckError(f"witness: generator must be an index below {len(group)}, got {_short(g)}")
    x = _vector(witness.get("x"), "witness x", n_in)
    prec = _count(witness.get("precision"), "witness precision", 2, MAX_BALL_PRECISION)
    n_out = len(group[g][1])
    j = _count(witness.get("output"), "witness output", 0, n_out - 1)
    encl = witness.get("enclosures")
    if not isinstance(encl, list) or len(encl) != n_out:
        raise CheckError(f"witness: enclosures must list {n_out} intervals [lo, hi]")
    claimed = [_vector(e, f"witness enclosures[{i}]", 2) for i, e in enumerate(encl)]
    if any(lo > hi for lo, hi in claimed):
        report.reasons.append("witness: an enclosure has lo > hi")
        return
    if claimed[j][0] <= 0 <= claimed[j][1]:
        report.reasons.append(f"witness: the certificate's enclosure of output {j + 1} contains 0: it proves nothing")
        return
    bits = prec + 32
    p, q = group[g]
    evaluate = _interval_evaluate if interval_forward is None else interval_forward
    lhs = evaluate(layers, _matvec(p, x), bits)
    fx = evaluate(layers, x, bits)
    own = []
    for i, row in enumerate(q):
        lo, hi = lhs[i]
        for c, (yl, yh) in zip(row, fx):
            if c > 0:
                lo, hi = lo - c * yh, hi - c * yl
            elif c < 0:
                lo, hi = lo - c * yl, hi - c * yh
        own.append((lo, hi))
    for i, ((lo, hi), (cl, ch)) in enumerate(zip(own, claimed)):
        if hi < cl or ch < lo:
            report.reasons.append(f"witness: the certificate's enclosure of output {i + 1} [{cl}, {ch}] is disjoint from "
                                  f"the checker's own [{_round_down(lo, 30)}, {_round_up(hi, 30)}]")
            return
    lo, hi = own[j]
    report.checks.append(f"ball witness, generator {g + 1}, x = {_fmt(x)}: output {j + 1} of f(P x) - Q f(x) lies in "
                         f"[{_round_down(lo, 30)}, {_round_up(hi, 30)}] (stdlib intervals at {bits} bits)")
    if lo <= 0 <= hi:
        report.reasons.append(f"witness: the checker's own enclosure of output {j + 1} contains 0 at {bits} bits: the "
                              "witness is not confirmed")
    else:
        report.checks.append(f"0 is outside it: the model is not equivariant under generator {g + 1}")


# -- the exact witness at width: integers over one denominator per space --------------------------
#
# f(x) at a rational x is re-evaluated with a space's values held as integers X over one positive
# denominator D (the value is X / D): an affine layer with integer weights W = Dk w and biases Dk b (Dk
# the common denominator of its weights and biases) maps (X, D) to (W X + Dk D b, Dk D); ReLU is the sign
# test on the integers, a maximum (pooling) the maximum of the integers; any other layer or activation is
# evaluated on the Fractions.  A conv2d reads, per output pixel, the inputs under its taps once (index lists
# precomputed once per geometry, a padded pixel reads an appended 0) and takes one integer dot product per
# output channel; taps that are zero in every output channel are dropped.  Everything is exact: f(x) is
# X / D at the end.  (The C4 ResNet at 28 x 28, 32 channels, 4 blocks: 58 million multiply-adds, seconds.)

MAX_WITNESS_WORK = 500_000_000  # multiply-adds of one exact evaluation (size guard, checked before the work)


def _integers(values) -> tuple:
    """Fractions as (integers, their common denominator)."""
    d = lcm(*(Fraction(v).denominator for v in values)) if values else 1
    return [Fraction(v).numerator * (d // Fraction(v).denominator) for v in values], d


def _reduced(X: list, d: int) -> tuple:
    g = gcd(d, *X)
    return (X, d) if g == 1 else ([v // g for v in X], d // g)


class _ExactForward:
    """``forward(model, x)``: f(x) exactly for a chain of layers or a graph model (symeq_check.graph's, read by
    its nodes' ``kind``, ``inputs``, ``layers`` and ``act``), with integer plans of its layers kept between calls."""

    def __init__(self):
        self.plans: dict = {}

    def work(self, model) -> int:
        layers = [l for n in model.nodes for l in n.layers] if hasattr(model, "nodes") else list(model)
        return sum(len(l.rows) * len(l.rows[0]) * l.out_hw[0] * l.out_hw[1] if l.kernels else
                   len(l.weight) * len(l.weight[0]) if l.dense_matrix and l.weight else 0 for l in layers)

    def __call__(self, model, x) -> tuple:
        X, d = _integers(list(x))
        if not hasattr(model, "nodes"):
            X, d = self.chain(model, X, d)
            return tuple(Fraction(v, d) for v in X)
        vals = {"input": (X, d)}
        for node in model.nodes:
            if node.kind == "layers":
                vals[node.name] = self.chain(node.layers, *vals[node.inputs[0]])
                continue
            parts = [vals[n] for n in node.inputs]
            d = lcm(*(p[1] for p in parts))
            parts = [[v * (d // e) for v in Y] for Y, e in parts]
            Y = [sum(t) for t in zip(*parts)] if node.kind == "add" else [v for p in parts for v in p]
            vals[node.name] = self.act(node.act, Y, d)
        X, d = vals[model.output]
        return tuple(Fraction(v, d) for v in X)

    def chain(self, layers, X: list, d: int) -> tuple:
        for layer in layers:
            if layer.pools:
                X = [max(X[i] for i in win) for win in layer.windows]
                continue
            if not (layer.kernels or layer.dense_matrix):  # attention and heads: on the Fractions
                X, d = _integers(_evaluate([layer], [Fraction(v, d) for v in X]))
                continue
            plan = self.plans.get(id(layer))
            if plan is None:
                plan = self.plans[id(layer)] = (_conv_plan(layer, self.plans) if layer.kernels else
                                                _dense_plan(layer))
            X, d = self.act(layer.act, _conv_apply(plan, X, d) if layer.kernels else
                            [sum(map(mul, row, X)) + c * d for row, c in zip(plan[1], plan[2])], d * plan[0])
        return X, d

    @staticmethod
    def act(act, X: list, d: int) -> tuple:
        if act is None:
            return _reduced(X, d)
        if act == "relu":
            return _reduced([v if v > 0 else 0 for v in X], d)
        return _integers([_apply(act, Fraction(v, d)) for v in X])


def _dense_plan(layer: _Layer) -> tuple:
    dk = lcm(*(w.denominator for row in layer.weight for w in row), *(b.denominator for b in layer.bias))
    return (dk, [[int(w * dk) for w in row] for row in layer.weight], [int(b * dk) for b in layer.bias])


def _conv_plan(layer: _Conv, cache: dict) -> tuple:
    """(Dk, per output channel its integer taps Dk w and Dk b, per output pixel the input indices of its taps).
    Taps zero in every output channel are dropped; the index lists are shared by the layers of one geometry."""
    dk = lcm(*(w.denominator for row in layer.rows for w in row), *(b.denominator for b in layer.bias))
    used = [t for t in range(len(layer.rows[0])) if any(row[t] for row in layer.rows)]
    rows = [[int(row[t] * dk) for t in used] for row in layer.rows]
    geometry = (layer.in_shape, layer.kh, layer.kw, layer.stride, layer.padding, layer.mode, tuple(used))
    if geometry not in cache:
        src = layer.sources()  # -1 (padding) reads the 0 appended to the input
        cache[geometry] = list(zip(*(src[t] for t in used))) or [()] * (layer.out_hw[0] * layer.out_hw[1])
    return dk, rows, [int(b * dk) for b in layer.bias], cache[geometry]


def _conv_apply(plan: tuple, X: list, d: int) -> list:
    """One pass over the output pixels: each reads its taps' inputs once for all output channels."""
    _, rows, bias, pixels = plan
    Xp = X + [0]
    cols = [list(map(Xp.__getitem__, s)) for s in pixels]
    out = []
    for row, c in zip(rows, bias):
        c *= d
        out.extend([sum(map(mul, row, col)) + c for col in cols])
    return out


@lru_cache(maxsize=64)
def _interval_plan(layer: _Conv) -> tuple:
    """A conv2d's integer plan (:func:`_conv_plan`) with the absolute values of its taps."""
    dk, rows, bias, pixels = _conv_plan(layer, {})
    return dk, [(r, [abs(w) for w in r]) for r in rows], bias, pixels


def _iv_conv(layer: _Conv, ys: list) -> list:
    """The exact image of intervals ``ys`` [(lo, hi)] under a conv2d's affine map, neuron by neuron: b + the sum of
    w lo (w > 0) and w hi (w < 0) for its lo, the other way for its hi (as a dense row would), on integers as
    (W s -+ |W| r) / 2 with s = hi + lo, r = hi - lo."""
    dk, rows, bias, pixels = _interval_plan(layer)
    n = len(ys)
    V, d = _integers([a for a, _ in ys] + [b for _, b in ys])
    S = [a + b for a, b in zip(V[:n], V[n:])] + [0]
    R = [b - a for a, b in zip(V[:n], V[n:])] + [0]
    wide = any(R)
    cols = [(list(map(S.__getitem__, s)), list(map(R.__getitem__, s)) if wide else None) for s in pixels]
    out, e = [], 2 * d * dk
    for (row, size), c in zip(rows, bias):
        c *= 2 * d
        for s, r in cols:
            a, b = sum(map(mul, row, s)) + c, sum(map(mul, size, r)) if r else 0
            out.append((Fraction(a - b, e), Fraction(a + b, e)))
    return out
