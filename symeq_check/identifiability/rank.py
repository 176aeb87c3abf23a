"""``jacobian-rank`` certificates of ``locally-identifiable`` (docs/identifiability.md, "Local
identifiability"): the certified Jacobian rows recomputed modulo a prime by reverse mode from the checker's
own reading of the model, their rank, and the orbit tangent of K's continuous part in their kernel.
"""
from __future__ import annotations

from fractions import Fraction
from math import comb

from .._numbers import CheckError, _dict, _is_int, _short, _vector
from ..accel import STDLIB_ENV, accelerator_name, nmod_rank, nmod_reduced_rank
from ..activations import _apply
from ..attention import _Attention
from ..conv import _Conv, _out_dim
from ..digest import _digest_differs
from ..model import _Layer, _model, bias_field, declared_biases
from ..real import _Real
from ..report import CheckReport
from ..schema import check_keys


# ----------------------------------------------------------------------------- local: Jacobian rank mod p
#
# ``"method": "jacobian-rank"`` (written by symeq/fibre/jacobian.py, docs/identifiability.md, "Local
# identifiability"): the certificate names rational points x_1..x_N and r rows (point, output) of the
# Jacobian J of theta -> (f_theta(x_1), ..., f_theta(x_N)).  The checker recomputes those rows modulo
# p = 2^61 - 1 by reverse mode (its own reading of the model and of the parameter order: per layer W
# row-major, then b when the model has a nonzero bias), eliminates them (rank r mod p: a nonzero r x r
# minor, so rank over Q >= r), recomputes the orbit tangent of K's continuous part from the activations
# (c (t - s)^d + e scalings), checks that it lies in the kernel of those rows and that r = P - its rank:
# the two bounds rank_Q J <= P - dim K.theta meet, and theta is locally identifiable.  A conv2d layer (and a
# dense layer after it, read as a whole-image kernel) is re-read by this checker's own conv reader
# (_conv_layer, _Conv.sources): its parameters are the kernel rows (taps in (c, i, j) order), then the
# channel biases; its rows cost taps x output pixels x channels each (MAX_JACOBIAN_ROW_WORK).

JACOBIAN_METHOD = "jacobian-rank"
JACOBIAN_PRIME = (1 << 61) - 1
#: the checker's size limit: rows x r x P (the elimination's slot operations; 4.2e9 took 15 s, 2.5e11 (6 288
#: parameters) about a quarter of an hour on a loaded 2-core machine), above it nothing is checked (exit 3)
MAX_JACOBIAN_WORK = 3 * 10 ** 11
#: ... and the recomputation of the certified rows: rows x (sum over layers of weights, a conv2d layer's kernel
#: taps times its output pixels), the multiplications of one reverse-mode row (pure Python: ~10^7 a second)
MAX_JACOBIAN_ROW_WORK = 2 * 10 ** 9
JACOBIAN_KEYS = ("format", "method", "verdict", "widths", "bias", "layers_sha256", "prime", "seed", "parameters",
                 "parameter_order", "points", "rows", "rank", "orbit_dimension", "orbit_generators", "pivot_columns")

_SLOT = 128


def _jac_mod(x: Fraction, p: int = JACOBIAN_PRIME) -> int:
    if x.denominator % p == 0:
        raise CheckError(f"the prime divides the denominator of {x}")
    return x.numerator % p * pow(x.denominator, -1, p) % p


def _jac_poly(coeffs, z: int, p: int = JACOBIAN_PRIME) -> int:
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * z + c) % p
    return acc


def _jac_mm(A, B, p: int):
    """A B mod p (lists of lists)."""
    from operator import mul

    cols = list(zip(*B))
    return [[sum(map(mul, row, col)) % p for col in cols] for row in A]


def _jac_tr(A):
    return [list(r) for r in zip(*A)]


def _jac_tokens(layers) -> int | None:
    """T when the chain starts with attention (its token-wise layers are I_T (x) W), else None."""
    return layers[0].tokens if isinstance(layers[0], _Attention) else None


def _jac_token_block(layer, T: int):
    """(W, b) of a token-wise layer, read off its I_T (x) W expansion (the diagonal block) and bias repeats."""
    n, d = len(layer.weight) // T, len(layer.weight[0]) // T
    return tuple(tuple(r[:d]) for r in layer.weight[:n]), tuple(layer.bias[:n])


def _jac_attention_forward(layer, h, p: int):
    """f(X) = sum_h (X Q K^T X^T) X V O mod p on the flattened X (T x d, by rows), and the cache."""
    T, d = layer.tokens, layer.d
    X = [h[t * d:(t + 1) * d] for t in range(T)]
    Y = [[0] * layer.d_out for _ in range(T)]
    cache = []
    for Q, Kk, V, O in layer.heads:
        Q, Kk, V, O = ([[_jac_mod(x, p) for x in r] for r in M] for M in (Q, Kk, V, O))
        XQ, XK, U = _jac_mm(X, Q, p), _jac_mm(X, Kk, p), _jac_mm(X, V, p)
        S = _jac_mm(XQ, _jac_tr(XK), p)
        Wh = _jac_mm(U, O, p)
        SW = _jac_mm(S, Wh, p)
        Y = [[(a + b) % p for a, b in zip(r1, r2)] for r1, r2 in zip(Y, SW)]
        cache.append((O, XQ, XK, U, S, Wh))
    return [x for r in Y for x in r], (X, cache)


def _jac_attention_backward(layer, cache, delta, p: int) -> list[int]:
    """d/d(Q_h, K_h, V_h, O_h) (each row-major, head by head) of <delta, f(X)>."""
    X, heads = cache
    T, do = layer.tokens, layer.d_out
    G = [delta[t * do:(t + 1) * do] for t in range(T)]
    XT = _jac_tr(X)
    out = []
    for O, XQ, XK, U, S, Wh in heads:
        dS = _jac_mm(G, _jac_tr(Wh), p)
        dQ = _jac_mm(XT, _jac_mm(dS, XK, p), p)
        dK = _jac_mm(XT, _jac_mm(_jac_tr(dS), XQ, p), p)
        dU = _jac_mm(_jac_mm(_jac_tr(S), G, p), _jac_tr(O), p)
        dV = _jac_mm(XT, dU, p)
        dO = _jac_mm(_jac_tr(_jac_mm(S, U, p)), G, p)
        out += [x for M in (dQ, dK, dV, dO) for r in M for x in r]
    return out


def _jac_attention_tangents(layers, offs) -> list[dict]:
    """The reparametrisations that keep an attention chain's function (as symeq.fibre.jacobian computes them):
    GL(d_v) per head on (V_h, O_h): V E, -E O; GL(d_k) per head on (Q_h, K_h): Q E, -K E^T; the scalar
    between scores and values: Q, -V; and GL(d_out) between every O_h and the next token-wise W: O E, -W E^T."""
    att = layers[0]
    gens, c, outs = [], offs[0], []
    for Q, Kk, V, O in att.heads:
        d, dk, dv, do = len(Q), len(Q[0]), len(V[0]), len(O[0])
        oq, ok = c, c + d * dk
        ov, oo = ok + d * dk, ok + d * dk + d * dv
        for a in range(dv):
            for b in range(dv):
                v = {}
                for i in range(d):
                    if V[i][a]:
                        v[ov + i * dv + b] = V[i][a]
                for j in range(do):
                    if O[b][j]:
                        v[oo + a * do + j] = v.get(oo + a * do + j, 0) - O[b][j]
                gens.append({k: x for k, x in v.items() if x})
        for a in range(dk):
            for b in range(dk):
                v = {}
                for i in range(d):
                    if Q[i][a]:
                        v[oq + i * dk + b] = Q[i][a]
                    if Kk[i][b]:
                        v[ok + i * dk + a] = v.get(ok + i * dk + a, 0) - Kk[i][b]
                gens.append({k: x for k, x in v.items() if x})
        v = {}
        for i in range(d):
            for j in range(dk):
                if Q[i][j]:
                    v[oq + i * dk + j] = Q[i][j]
            for j in range(dv):
                if V[i][j]:
                    v[ov + i * dv + j] = -V[i][j]
        gens.append(v)
        outs.append((oo, O))
        c = oo + dv * do
    if len(layers) > 1:
        W, _ = _jac_token_block(layers[1], att.tokens)
        do = att.d_out
        for a in range(do):
            for b in range(do):
                v = {}
                for oo, O in outs:
                    for i, row in enumerate(O):
                        if row[a]:
                            v[oo + i * do + b] = row[a]
                for r, row in enumerate(W):
                    if row[b]:
                        v[offs[2] + r * do + a] = v.get(offs[2] + r * do + a, 0) - row[b]
                gens.append({k: x for k, x in v.items() if x})
    return gens


class _JacKink(Exception):
    """A certified point where a ReLU pre-activation is 0 (no Jacobian there)."""


def _jac_pl(act):
    """The slope on the negative side of a ReLU (0) or leaky ReLU (its slope) activation, else None."""
    if act == "relu":
        return Fraction(0)
    if isinstance(act, _Real) and act.name == "leaky_relu":
        return act.param
    return None


def _jac_weight(layer, tokens: int | None = None):
    """The parameters' weight rows of a layer: a dense layer's W, a conv2d layer's kernel rows (taps in
    (c, i, j) order), a token-wise layer's one W (``tokens``: T after attention)."""
    if isinstance(layer, _Conv):
        return layer.rows
    if tokens is not None:
        return _jac_token_block(layer, tokens)[0]
    return layer.weight


def _jac_bias(layer, tokens: int | None = None):
    return _jac_token_block(layer, tokens)[1] if tokens is not None else layer.bias


def _flag(bias, i: int) -> bool:
    """Layer ``i``'s bias flag: ``bias`` is one bool for every layer or one per layer (the declared space)."""
    return bias if isinstance(bias, bool) else bool(bias[i])


def _jac_count(layer, bias: bool, tokens: int | None = None) -> int:
    """The layer's number of parameters in the certificate's order."""
    if isinstance(layer, _Attention):
        return sum(len(M) * len(M[0]) for hd in layer.heads for M in hd)
    W = _jac_weight(layer, tokens)
    return len(W) * len(W[0]) + (len(W) if bias else 0)


def _jac_rows(layers, bias, point, outputs, p: int = JACOBIAN_PRIME, geometry=None) -> list[list[int]]:
    """The rows d f_k(x) / d theta mod p for the outputs k, by reverse mode (one forward pass).

    A conv2d layer (:class:`_Conv`) is read on its kernels: ``geometry[i]`` is its ``sources()`` map
    (src[t][q]: the input index tap t reads at output pixel q, -1 for zero padding); its parameters are
    the kernel rows, then the channel biases (the order of the conv kind's ``parameter_counts`` in symeq).  After
    a first attention layer (parameters Q_h, K_h, V_h, O_h, head by head) every layer is token-wise: one
    W and b for the T tokens."""
    T = _jac_tokens(layers)
    h, hs, ss, Ws = _jac_forward(layers, point, p, geometry, T)
    return _jac_backward(layers, bias, outputs, h, hs, ss, Ws, p, geometry, T)


def _jac_forward(layers, point, p: int, geometry, T):
    """The forward pass of :func:`_jac_rows` mod p: the output, and per layer its input, slopes and weights."""
    from operator import mul

    h = [_jac_mod(x, p) for x in point]
    # with ReLU the slopes need the exact signs of the pre-activations: an exact forward pass alongside
    hx = list(point) if any(_jac_pl(l.act) is not None for l in layers) else None
    hs, ss, Ws = [], [], []
    for li, layer in enumerate(layers):
        if hx is not None:
            hx, h = _jac_forward_exact(layer, li, hx, h, p, hs, ss, Ws)
            continue
        if isinstance(layer, _Attention):
            if li:
                raise CheckError("attention must be the model's first layer")
            h, cache = _jac_attention_forward(layer, h, p)
            hs.append((None, "attention", cache))
            Ws.append(None)
            ss.append(None)
            continue
        W = [[_jac_mod(x, p) for x in row] for row in _jac_weight(layer, T)]
        b = [_jac_mod(x, p) for x in _jac_bias(layer, T)]
        if isinstance(layer, _Conv):
            src = geometry[li]
            cols = [[h[s] if s >= 0 else 0 for s in srow] for srow in src]  # taps x npix
            patches = list(zip(*cols))                                        # npix x taps
            z = [(sum(map(mul, row, patch)) + bo) % p for row, bo in zip(W, b) for patch in patches]
            hs.append((h, "conv", cols))
        elif T is not None:
            d = len(W[0])
            z = [(sum(map(mul, row, h[t * d:(t + 1) * d])) + bo) % p for t in range(T) for row, bo in zip(W, b)]
            hs.append((h, "tokens", None))
        else:
            z = [(sum(map(mul, row, h)) + bj) % p for row, bj in zip(W, b)]
            hs.append((h, "dense", None))
        Ws.append(W)
        if layer.act is None:
            ss.append(None)
            h = z
        else:
            c = [_jac_mod(x, p) for x in layer.act]
            dc = [k * x % p for k, x in enumerate(c)][1:] or [0]
            ss.append([_jac_poly(dc, zj, p) for zj in z])
            h = [_jac_poly(c, zj, p) for zj in z]
    return h, hs, ss, Ws


def _jac_forward_exact(layer, li: int, hx, h, p: int, hs, ss, Ws):
    """One dense layer of the forward pass alongside the exact one (ReLU): appends to hs, ss, Ws; the new hx, h."""
    zx = [sum(w * v for w, v in zip(row, hx)) + bj for row, bj in zip(layer.weight, layer.bias)]
    slope = _jac_pl(layer.act)
    if slope is not None and any(z == 0 for z in zx):
        raise _JacKink(f"hidden pre-activation {zx.index(0) + 1} of layer {li + 1} is 0 at the point "
                       "(theta -> f_theta(x) is not differentiable there)")
    hs.append((h, "dense", None))
    Ws.append([[_jac_mod(x, p) for x in row] for row in layer.weight])
    hx = [_apply(layer.act, z) for z in zx]
    h = [_jac_mod(x, p) for x in hx]
    if layer.act is None:
        ss.append(None)
    elif slope is not None:
        ss.append([1 if z > 0 else _jac_mod(slope, p) for z in zx])
    else:
        dc = [_jac_mod(k * x, p) for k, x in enumerate(layer.act)][1:] or [0]
        ss.append([_jac_poly(dc, _jac_mod(z, p), p) for z in zx])
    return hx, h


def _jac_backward(layers, bias, outputs, h, hs, ss, Ws, p: int, geometry, T) -> list[list[int]]:
    """The reverse-mode pass of :func:`_jac_rows` mod p: one row d f_k(x) / d theta per output k."""
    from operator import mul

    out, WT = [], {}
    for k in outputs:
        delta = [int(i == k) for i in range(len(h))]
        blocks = []
        for i in range(len(layers) - 1, -1, -1):
            if ss[i] is not None:
                delta = [d * s % p for d, s in zip(delta, ss[i])]
            hin, kind, extra = hs[i]
            W = Ws[i]
            if kind == "attention":
                blocks.append(_jac_attention_backward(layers[i], extra, delta, p))
                continue
            if kind == "dense":
                blk = [d * v % p for d in delta for v in hin]
                if _flag(bias, i):
                    blk += delta
            elif kind == "tokens":
                n, d = len(W), len(W[0])
                Dt = [delta[t * n:(t + 1) * n] for t in range(T)]
                Ht = [hin[t * d:(t + 1) * d] for t in range(T)]
                blk = [sum(Dt[t][r] * Ht[t][c] for t in range(T)) % p for r in range(n) for c in range(d)]
                if _flag(bias, i):
                    blk += [sum(Dt[t][r] for t in range(T)) % p for r in range(n)]
            else:
                cols = extra
                npix = len(cols[0]) if cols else 0
                D = [delta[o * npix:(o + 1) * npix] for o in range(len(W))]
                blk = [sum(map(mul, d, col)) % p for d in D for col in cols]
                if _flag(bias, i):
                    blk += [sum(d) % p for d in D]
            blocks.append(blk)
            if not i:
                continue
            if kind == "dense":
                if i not in WT:
                    WT[i] = list(zip(*W))  # W's columns, once per point
                delta = [sum(map(mul, delta, col)) % p for col in WT[i]]  # delta W, column by column
            elif kind == "tokens":
                delta = [sum(Dt[t][r] * W[r][c] for r in range(n)) % p for t in range(T) for c in range(d)]
            else:
                din = [0] * len(hin)
                for t, srow in enumerate(geometry[i]):
                    acc = [0] * npix
                    for o, d in enumerate(D):
                        w = W[o][t]
                        if w:
                            acc = [a + w * x for a, x in zip(acc, d)]
                    for q, s in enumerate(srow):
                        if s >= 0:
                            din[s] += acc[q]
                delta = [x % p for x in din]
        out.append([x for blk in reversed(blocks) for x in blk])
    return out


def _jac_pack(row) -> int:
    x = 0
    for v in reversed(row):
        x = (x << _SLOT) | v
    return x


def _pivot_row(packed, sh: int, mask: int, p: int):
    """Index of the first packed row whose slot at bit ``sh`` (``mask`` wide) is nonzero modulo the
    prime p, or None: the pivot search of the packed eliminations below."""
    for idx, x in enumerate(packed):
        if ((x >> sh) & mask) % p:
            return idx
    return None


def _jac_rank(rows: list[list[int]], ncols: int) -> int:
    """Rank modulo 2^61 - 1 of the rows by elimination on packed integers.

    Each row is one Python integer with 128-bit slots (column j in slot j).  The columns are
    eliminated from the highest down, so a row operation row + (p - f) pivot is one multiplication
    and one addition: the eliminated slots above the current column hold garbage, into which the
    carries of the live slots below can only flow upward, and which is cut off every 16 columns.
    Every 30 operations each slot is folded back below 2^62 (2^61 = 1 mod p), so no live slot
    overflows into the next.
    """
    p = JACOBIAN_PRIME
    lo61 = sum(((1 << 61) - 1) << (_SLOT * i) for i in range(ncols))
    lo67 = sum(((1 << 67) - 1) << (_SLOT * i) for i in range(ncols))
    slot = (1 << _SLOT) - 1

    def fold(x):
        x = (x & lo61) + ((x >> 61) & lo67)
        return (x & lo61) + ((x >> 61) & lo67)

    live = [[_jac_pack(r), 0] for r in rows]
    rank = 0
    for c in range(ncols - 1, -1, -1):
        if not live:
            break
        sh = _SLOT * c
        piv = _pivot_row((item[0] for item in live), sh, slot, p)
        if piv is not None:
            pv = fold(live.pop(piv)[0]) & ((1 << (sh + _SLOT)) - 1)
            inv = pow(((pv >> sh) & slot) % p, -1, p)
            rank += 1
            for item in live:
                x = item[0]
                f = ((x >> sh) & slot) % p
                if f:
                    x += (p - f * inv % p) * pv
                    item[1] += 1
                    if item[1] >= 30:
                        x, item[1] = fold(x), 0
                    item[0] = x
        if c % 16 == 0:
            cut = (1 << sh) - 1
            for item in live:
                item[0] &= cut
    return rank


#: the checker's own primes: below 2^30, so that a row operation multiplies by one CPython digit; a rank
#: r modulo any prime proves rank >= r over Q, and 2^61 - 1 (the certificate's) is the last resort
_CHECK_PRIMES = (1073741789, 1073741783)
_SMALL_SLOT = 96


def _jac_rank_small(rows: list[list[int]], ncols: int, q: int) -> int:
    """Rank modulo a prime q < 2^30 of rows with entries in [0, q), on packed integers (96-bit slots).

    As :func:`_jac_rank`, columns from the highest down; a row receives at most one update per
    pivot, each below 2^60, so no slot of a row ever overflows (fewer than 2^35 pivots) and only a
    pivot is reduced (unpacked, reduced modulo q, repacked) before it is used.
    """
    nb = _SMALL_SLOT // 8
    mask = (1 << _SMALL_SLOT) - 1

    def pack(vals):
        return int.from_bytes(b"".join(v.to_bytes(nb, "little") for v in vals), "little")

    def reduce(x, n):
        raw = x.to_bytes(n * nb + 16, "little")
        return pack([int.from_bytes(raw[i * nb:(i + 1) * nb], "little") % q for i in range(n)])

    live = [pack(r) for r in rows]  # rows: any iterable (packed one by one)
    rank = 0
    for c in range(ncols - 1, -1, -1):
        if not live:
            break
        sh = _SMALL_SLOT * c
        piv = _pivot_row(live, sh, mask, q)
        if piv is not None:
            pv = reduce(live.pop(piv) & ((1 << (sh + _SMALL_SLOT)) - 1), c + 1)
            inv = pow(((pv >> sh) & mask) % q, -1, q)
            rank += 1
            for idx, x in enumerate(live):
                f = ((x >> sh) & mask) % q
                if f:
                    live[idx] = x + (q - f * inv % q) * pv
        if c % 16 == 0:
            cut = (1 << sh) - 1
            live = [x & cut for x in live]
    return rank


def _rank_mod(rows, ncols: int, q: int, fast=None) -> int:
    """Rank modulo the prime q of rows (iterables of residues in [0, q)): ``fast`` (the optional accelerator
    of :mod:`symeq_check.accel`) when given, else this module's packed-integer elimination
    (:func:`_jac_rank_small` below 2^30, else :func:`_jac_rank` for 2^61 - 1)."""
    if fast is not None:
        return fast([list(r) for r in rows], q)
    if q < (1 << 30):
        return _jac_rank_small(rows, ncols, q)
    return _jac_rank(list(rows), ncols)


def _structured_rank(rows: list, K: int, wl: int, m_in: int, last_bias: bool, q: int, reduced_rank) -> int | None:
    """rank_q of the Jacobian rows by eliminating the last affine layer's block first, or None when the rows
    do not have its structure.

    ``rows`` are all N K rows, point-major (row n K + k: output k at point n), recomputed here; the last
    layer's columns start at ``wl`` (W_L row-major, K x m_in, then b_L when ``last_bias``).  Each row (n, k)
    is checked to be e_k (x) C[n] there, C[n] = [h(x_n), 1] (h the last layer's input, read off row (n, 0)).
    Then row operations inside each output's rows give, over GF(q) and without any assumption,
    rank = K rank C + rank [Q A_1; ...; Q A_K] (A_k: output k's rows in the other columns, Q a basis of
    the left null space of C), the identity the prover uses (docs/identifiability.md); ``reduced_rank``
    (:func:`symeq_check.accel.nmod_reduced_rank`) computes both ranks."""
    N = len(rows) // K
    width = K * m_in + (K if last_bias else 0)
    C, A = [], []
    for n in range(N):
        h = rows[n * K][wl:wl + m_in]
        joined = []
        for k in range(K):
            row = rows[n * K + k]
            if len(row) != wl + width:
                return None
            want = [0] * width
            want[k * m_in:(k + 1) * m_in] = h
            if last_bias:
                want[K * m_in + k] = 1
            if row[wl:] != want:
                return None
            joined.extend(row[:wl])
        C.append(list(h) + ([1] if last_bias else []))
        A.append(joined)
    rc, rest = reduced_rank(C, A, K, q)
    return K * rc + rest


def _jac_is_prime(n: int) -> bool:
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for q in small:
        if n % q == 0:
            return n == q
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:  # deterministic below 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _jac_continuous(coeffs, bias: bool, nxt: bool | None = None):
    """(s, d, e) when sigma = c (t - s)^d + e has every alpha != 0 as a latent scaling, else None: the shift
    s (1 - alpha) needs the layer's own biases (``bias``) unless s = 0, the offset e (1 - alpha^d) the next
    layer's (``nxt``; None: as ``bias``) unless e = 0."""
    nxt = bias if nxt is None else nxt
    if not isinstance(coeffs, tuple) or len(coeffs) < 3:
        return None
    d = len(coeffs) - 1
    s = -coeffs[d - 1] / (d * coeffs[d])
    # the coefficients of sigma(u + s): binomial expansion
    shifted = [sum(coeffs[j] * comb(j, k) * s ** (j - k) for j in range(k, d + 1)) for k in range(d + 1)]
    if any(shifted[k] != 0 for k in range(1, d)):
        return None
    e = shifted[0]
    if e != 0 and not nxt:
        return None
    if not bias and s != 0:
        return None
    return s, d, e


def _jac_dense_like(layer) -> bool:
    """A dense layer that is not token-wise (symeq.models reads a dense layer after a convolution as a conv2d
    layer with a whole-image kernel: it is not one of these)."""
    return isinstance(layer, _Layer) and "token-wise" not in layer.label


def _jac_tangents(layers, bias, offs) -> list[dict]:
    """The scalings' generators at theta; a CheckError names a continuous scaling next to a convolution
    (symeq.fibre.jacobian writes no certificate there: the tangent is computed between dense layers only)."""
    gens = []
    for i, layer in enumerate(layers[:-1]):
        # ReLU: the positive rescalings relu(alpha z) = alpha relu(z), i.e. (s, d, e) = (0, 1, 0)
        cont = (Fraction(0), 1, Fraction(0)) if _jac_pl(layer.act) is not None else \
            _jac_continuous(layer.act, _flag(bias, i), _flag(bias, i + 1))
        if cont is None:
            continue
        if not (_jac_dense_like(layer) and _jac_dense_like(layers[i + 1])):
            raise CheckError(f"layer {i + 1} ({layer.label}): jacobian-rank certificates recompute the orbit tangent "
                             "of continuous scalings between dense layers only, not next to a convolution or a "
                             "token-wise layer")
        s, d, e = cont
        nxt = layers[i + 1]
        weight, nweight = _jac_weight(layer), _jac_weight(nxt)
        nin = len(weight[0])
        for j, row in enumerate(weight):
            v = {}
            for k, x in enumerate(row):
                if x:
                    v[offs[2 * i] + j * nin + k] = x
            if _flag(bias, i) and layer.bias[j] - s:
                v[offs[2 * i + 1] + j] = layer.bias[j] - s
            for k, nrow in enumerate(nweight):
                if nrow[j]:
                    v[offs[2 * i + 2] + k * len(nrow) + j] = -d * nrow[j]
                    if _flag(bias, i + 1) and e:
                        v[offs[2 * i + 3] + k] = d * e * nrow[j]
            gens.append(v)
    return gens


def check_jacobian_rank(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a ``jacobian-rank`` certificate (local identifiability), standard library only.

    Exit codes through the report: accepted 0, rejected 1, beyond the size limit
    (:data:`MAX_JACOBIAN_WORK` slot operations rows x r x P) 3 with nothing verified.
    """
    n_in, layers, _ = _model(model)
    check_keys(_dict(cert, "certificate"), "certificate", JACOBIAN_KEYS, JACOBIAN_KEYS[:14], error=CheckError)
    report = CheckReport(None, str(cert.get("verdict")))
    if cert.get("verdict") != "locally-identifiable":
        raise CheckError(f"certificate: a jacobian-rank certificate says \"locally-identifiable\", got "
                         f"{_short(cert.get('verdict'))}")
    T = _jac_tokens(layers)
    if _jac_unsupported(layers, T):
        report.reasons.append("jacobian-rank certificates cover dense, conv2d, attention and token-wise layers with "
                              "polynomial activations, and dense ReLU / leaky ReLU networks")
        report.accepted = False
        return report
    if _digest_differs(report, cert.get("layers_sha256"), layers):
        report.accepted = False
        return report
    # the declared parameter space (issue 25): a layer's biases are parameters when the file gives it a bias
    # vector (zeros included), none with "bias": null -- per layer
    bias = declared_biases(layers)
    widths, P, r = _jac_header(report, cert, n_in, layers, bias, T)
    if report.reasons:
        report.accepted = False
        return report
    K = widths[-1]
    chosen = _jac_selection(report, cert, n_in, K, r, P)
    if chosen is None:
        return report
    points, rows, pivots = chosen
    ncols = P if pivots is None else r  # with pivots: the r x r block (rows x r) is eliminated, not rows x P
    if _jac_beyond_limits(report, layers, rows, r, P, pivots, ncols):
        return report
    offs = _jac_offsets(layers, bias, T)
    try:
        gens = (_jac_attention_tangents(layers, offs) if T is not None else []) + _jac_tangents(layers, bias, offs)
    except CheckError as e:
        report.reasons.append(str(e))
        report.accepted = False
        return report
    return _jac_verify(report, cert, layers, bias, points, rows, pivots, gens, offs, K, r, P, ncols, T)


def _jac_unsupported(layers, T) -> bool:
    """Whether the model has a layer or activation that jacobian-rank certificates do not cover."""
    return not all(isinstance(l, (_Layer, _Conv)) and (l.act is None or isinstance(l.act, tuple)
                                                       or _jac_pl(l.act) is not None)
                   or (isinstance(l, _Attention) and i == 0) for i, l in enumerate(layers)) \
        or (T is None and any("token-wise" in l.label for l in layers)) \
        or (any(_jac_pl(l.act) is not None for l in layers) and not all(_jac_dense_like(l) for l in layers))


def _jac_header(report, cert, n_in, layers, bias, T):
    """The model's widths, its parameter count P and the certified rank; each header mismatch is a reason."""
    widths = [n_in] + [_out_dim(l) for l in layers]
    P = sum(_jac_count(l, b, T) for l, b in zip(layers, bias))
    for key, want in (("widths", widths), ("bias", bias_field(layers, bias)), ("parameters", P)):
        if cert.get(key) != want or isinstance(cert.get(key), bool) != isinstance(want, bool):
            report.reasons.append(f"certificate {key} {_short(cert.get(key))} differs from the model's {want}")
    prime = cert.get("prime")
    if prime != str(JACOBIAN_PRIME):
        report.reasons.append(f"certificate prime {_short(prime)}: this format uses 2^61 - 1 = {JACOBIAN_PRIME}")
    elif not _jac_is_prime(JACOBIAN_PRIME):  # pragma: no cover - a Mersenne prime
        report.reasons.append("2^61 - 1 is not prime")
    r = cert.get("rank")
    if not _is_int(r) or isinstance(r, bool) or not 0 <= r <= P:
        report.reasons.append(f"certificate rank {_short(r)} is not an integer in [0, {P}]")
    return widths, P, r


def _jac_selection(report, cert, n_in: int, K: int, r: int, P: int):
    """(points, rows, pivot columns) read off the certificate, or None with the report rejected on bad rows."""
    pts = cert.get("points")
    if not isinstance(pts, list) or not pts:
        raise CheckError("certificate points: expected a non-empty list of points")
    if len(pts) * n_in > 10 ** 7:
        raise CheckError(f"certificate points: {len(pts)} points exceed the checker's limit")
    points = [_vector(pt, f"certificate points[{i}]", n_in) for i, pt in enumerate(pts)]
    rows = cert.get("rows")
    if not isinstance(rows, list) or len(rows) < r or any(not _is_int(x) or isinstance(x, bool) for x in rows) \
            or len(set(rows)) != len(rows) or any(not 0 <= x < len(points) * K for x in rows):
        report.reasons.append(f"certificate rows must list at least {r} distinct rows (point * {K} + output) of "
                              f"the {len(points) * K} rows of the Jacobian")
        report.accepted = False
        return None
    pivots = cert.get("pivot_columns")
    if pivots is not None and (not isinstance(pivots, list) or len(pivots) != r or len(set(map(str, pivots))) != r
                               or any(not _is_int(c) or isinstance(c, bool) or not 0 <= c < P for c in pivots)):
        report.reasons.append(f"certificate pivot_columns must list {r} distinct columns of the {P} parameters")
        report.accepted = False
        return None
    return points, rows, pivots


def _jac_beyond_limits(report, layers, rows, r: int, P: int, pivots, ncols: int) -> bool:
    """Whether the check is beyond the checker's size limits (then the report says so, with nothing verified)."""
    work = len(rows) * r * ncols
    # the rows themselves: a conv2d layer costs taps x output pixels x channels per row (twice: forward, backward)
    row_work = len(rows) * sum(len(l.rows) * len(l.rows[0]) * len(l.sources()[0]) if isinstance(l, _Conv)
                               else 4 * l.tokens * (l.tokens + l.d) * _jac_count(l, False) if isinstance(l, _Attention)
                               else len(l.weight) * len(l.weight[0]) for l in layers)
    if row_work > MAX_JACOBIAN_ROW_WORK:
        report.reasons.append(f"beyond the checker's size limit: {len(rows)} Jacobian rows of this model need "
                              f"{row_work:.3g} multiplications > {MAX_JACOBIAN_ROW_WORK:.3g} "
                              "(symeq_check.identifiability.rank.MAX_JACOBIAN_ROW_WORK); nothing was verified")
        report.accepted = None
        return True
    if work > MAX_JACOBIAN_WORK:
        report.reasons.append(f"beyond the checker's size limit: {len(rows)} rows, rank {r} and {P} parameters need "
                              f"rows r {'P' if pivots is None else 'r'} = {work:.3g} "
                              f"slot operations > {MAX_JACOBIAN_WORK:.3g} "
                              "(symeq_check.identifiability.rank.MAX_JACOBIAN_WORK); nothing was verified")
        report.accepted = None
        return True
    return False


def _jac_offsets(layers, bias, T) -> list[int]:
    """Per layer: where its weights start and where its biases start in the certificate's parameter order."""
    offs, c = [], 0
    for l, b in zip(layers, bias):
        offs += [c, c + _jac_count(l, False, T)]
        c += _jac_count(l, b, T)
    return offs


def _jac_point_rows(layers, bias, points, by_point: dict, geometry, prime: int):
    """The certified Jacobian rows mod ``prime``, one point at a time (so that they are packed as they come)."""
    for n in sorted(by_point):
        yield from _jac_rows(layers, bias, points[n], sorted(by_point[n]), prime, geometry)


def _jac_block_rows(layers, bias, points, by_point: dict, geometry, pivots, prime: int):
    """The certified rows mod ``prime``, restricted to the pivot columns when the certificate names them."""
    if pivots is None:
        yield from _jac_point_rows(layers, bias, points, by_point, geometry, prime)
        return
    for row in _jac_point_rows(layers, bias, points, by_point, geometry, prime):
        yield [row[c] for c in pivots]


def _jac_verify(report, cert, layers, bias, points, rows, pivots, gens, offs, K, r, P, ncols, T) -> CheckReport:
    """The recomputation part of :func:`check_jacobian_rank`: kinks, the tangent in the kernel, the ranks."""
    geometry = [l.sources() if isinstance(l, _Conv) else None for l in layers]
    tangent = [[0] * P for _ in gens]
    for t, v in zip(tangent, gens):
        for k, x in v.items():
            t[k] = _jac_mod(x)
    by_point: dict = {}
    for x in rows:
        by_point.setdefault(x // K, []).append(x % K)
    p = JACOBIAN_PRIME
    if any(_jac_pl(l.act) is not None for l in layers):  # every certified point off every bent hyperplane
        for n in sorted(by_point):
            try:
                _jac_rows(layers, bias, points[n], [], p, geometry)
            except _JacKink as e:
                report.reasons.append(f"certificate points[{n}]: {e}")
                report.accepted = False
                return report
    if tangent:
        sparse = [{k: _jac_mod(x) for k, x in v.items()} for v in gens]
        for row in _jac_point_rows(layers, bias, points, by_point, geometry, p):
            for g, t in enumerate(sparse):
                if sum(row[k] * x for k, x in t.items()) % p:
                    report.reasons.append(f"orbit generator {g + 1} is not in the kernel of the Jacobian rows")
                    report.accepted = False
                    return report
    dim = _jac_rank(tangent, P) if tangent else 0
    if cert.get("orbit_dimension") != dim:
        report.reasons.append(f"certificate orbit_dimension {_short(cert.get('orbit_dimension'))} differs from "
                              f"the recomputed {dim}")

    def block(prime):  # the certified rows, restricted to the pivot columns when the certificate names them
        return _jac_block_rows(layers, bias, points, by_point, geometry, pivots, prime)

    nmod_mat = nmod_rank()
    rank, modulus, structured = _jac_certified_rank(block, layers, bias, rows, points, pivots, offs, K, r, ncols, T,
                                                    nmod_mat)
    _jac_conclude(report, rows, points, pivots, gens, r, P, dim, rank, modulus, structured, nmod_mat)
    return report


def _jac_certified_rank(block, layers, bias, rows, points, pivots, offs, K, r, ncols, T, nmod_mat):
    """(rank, modulus, structured): the rank of ``block``'s rows mod the checker's primes, else mod 2^61 - 1."""
    # with the accelerator and every row of every point: the last affine layer's block is eliminated first
    last = layers[-1]
    reduced = nmod_reduced_rank() if (pivots is None and T is None and isinstance(last, _Layer) and last.act is None
                                      and _jac_dense_like(last) and set(rows) == set(range(len(points) * K))
                                      and len(layers) > 1) else None
    structured = False

    def rank_at(q):
        nonlocal structured
        if reduced is not None:
            all_rows = list(block(q))
            out = _structured_rank(all_rows, K, offs[2 * len(layers) - 2], len(last.weight[0]), bias[-1], q, reduced)
            if out is not None:
                structured = True
                return out
            return _rank_mod(all_rows, ncols, q, nmod_mat)
        return _rank_mod(block(q), ncols, q, nmod_mat)

    rank, modulus = None, JACOBIAN_PRIME
    for q in _CHECK_PRIMES:  # fast: one-digit multipliers; the certificate's prime if both fall short
        try:
            rq = rank_at(q)
        except CheckError:  # q divides a denominator
            continue
        if rq == r:
            rank, modulus = rq, q
            break
    if rank is None:
        rank = rank_at(JACOBIAN_PRIME)
    return rank, modulus, structured


def _jac_conclude(report, rows, points, pivots, gens, r, P, dim, rank, modulus, structured, nmod_mat) -> None:
    """The verdict of :func:`check_jacobian_rank` from the recomputed ranks: its reasons or checks, accepted."""
    what = "rows" if pivots is None else f"rows restricted to the {r} pivot columns"
    if rank != r:
        report.reasons.append(f"the {len(rows)} certified {what} of the Jacobian have rank {rank} modulo 2^61 - 1, "
                              f"not {r}")
    elif r != P - dim:
        report.reasons.append(f"rank {r} != #params {P} - dim K.theta {dim}: not locally identifiable")
    if not report.reasons:
        report.checks.append(f"{len(rows)} rows of the Jacobian at {len(points)} rational points recomputed mod "
                             f"{modulus}" + ("" if pivots is None else f", restricted to the certificate's {r} pivot "
                                             "columns") + f": rank {r} (a nonzero {r} x {r} minor modulo a prime: "
                             f"rank over Q >= {r})")
        report.checks.append("the elimination: " + (
            f"{accelerator_name()} (an optional accelerator; {STDLIB_ENV}=1 eliminates with the standard library)"
            if nmod_mat is not None else "standard library (packed integers)")
            + ("; the last affine layer's block first (its structure e_k (x) [h(x_n), 1] checked on the recomputed "
               "rows): rank = K rank C + rank of the reduced rows" if structured else ""))
        report.checks.append(f"orbit tangent of K's continuous part: {len(gens)} generator(s) in the kernel, "
                             f"dimension {dim}; rank = #params {P} - {dim}: locally identifiable (constant-rank "
                             "theorem; the fibre far from theta is not examined)")
    report.accepted = not report.reasons
