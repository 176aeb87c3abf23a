"""Lightning attention f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h: its reading from a model file, its heads
(the theorem's layers), their exact outputs, and the block-monomial actions on them.  Softmax attention
(``"scoring": "softmax"``: f(X) = sum_h softmax_rows(s (X A_h X^T + 1 b_h^T X^T)) X V_h O_h + 1 c^T, s the
rational ``scale`` or 1/sqrt(d_k)) has no exact value at a point; its heads are checked by the algebraic
rule :func:`_softmax_heads_failure` (docs/attention.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ._numbers import CheckError, Sparse, _count, _dict, _matrix, _vector, parse_number
from .algebra import _invertible, _matmul, _transpose
from .layer import Kind, Layer
from .schema import ATTENTION_KEYS, HEAD_KEYS, check_keys


@dataclass(frozen=True)
class _Attention(Layer):
    """Lightning attention f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h on T tokens (flattened by rows)."""

    LEGACY_FIELDS = ("tokens", "heads")
    token_mixing = splits_in_chain = True

    tokens: int
    heads: tuple  # of (Q, K, V, O) matrices
    label: str = field(compare=False, default="attention")
    act: object = field(compare=False, default="attention")
    scoring: str = "lightning"
    scale: object = None         # softmax: a rational scale, or None for 1/sqrt(d_k)
    bias: object = None          # softmax: the output bias c (a vector), or None
    score_biases: object = None  # softmax: per head b_h (a vector) or None

    @property
    def d(self) -> int:
        return len(self.heads[0][0])

    @property
    def d_out(self) -> int:
        return len(self.heads[0][3][0])

    @property
    def weight(self):  # only its number of rows (the flattened output size) is used generically
        return [None] * (self.tokens * self.d_out)

    def forward(self, x) -> tuple:
        z = [[Fraction(0)] * self.d_out for _ in range(self.tokens)]
        for y, (_, _, _, o) in zip(_head_outputs(self, x), self.heads):
            z = [[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(z, _matmul(y, o))]
        return tuple(v for row in z for v in row)


@dataclass(frozen=True)
class _Heads(Layer):
    """The chain's first layer: X -> [Y_1 ... Y_H], Y_h = (X A_h X^T) X V_h (flattened by rows)."""

    token_mixing = head_blocks = True

    tokens: int
    scores: tuple
    values: tuple
    label: str = field(compare=False, default="attention heads")
    act: object = field(compare=False, default="heads")
    scoring: str = "lightning"
    score_biases: object = None

    @property
    def dv(self) -> int:
        return len(self.values[0][0])

    @property
    def weight(self):
        return [None] * (self.tokens * len(self.scores) * self.dv)

    def forward(self, x) -> tuple:
        ys = _head_outputs(self, x)
        return tuple(v for t in range(self.tokens) for y in ys for v in y[t])


def _attention(spec: dict, input_dim: int, name: str, at: str = "layers[0]") -> _Attention:
    tokens = _count(spec.get("tokens"), f"{name} tokens", 1)
    if input_dim % tokens:
        raise CheckError(f"{name}: input_dim {input_dim} is not a multiple of {tokens} tokens")
    d = input_dim // tokens
    heads = spec.get("heads")
    if not isinstance(heads, list) or not heads:
        raise CheckError(f"{name}: 'heads' must be a non-empty list")
    parsed = []
    for h, hs in enumerate(heads):
        hs = _dict(hs, f"{name} head {h + 1}")
        check_keys(hs, f"{at}.heads[{h}]", *HEAD_KEYS)
        q = _matrix(hs.get("query"), f"{name} head {h + 1} query", rows=d)
        k = _matrix(hs.get("key"), f"{name} head {h + 1} key", rows=d, cols=len(q[0]))
        v = _matrix(hs.get("value"), f"{name} head {h + 1} value", rows=d)
        o = _matrix(hs.get("out"), f"{name} head {h + 1} out", rows=len(v[0]))
        if parsed and (len(v[0]) != len(parsed[0][2][0]) or len(o[0]) != len(parsed[0][3][0])):
            raise CheckError(f"{name} head {h + 1}: all heads need the same d_v and d_out")
        parsed.append((q, k, v, o))
    scoring = spec.get("scoring", "lightning")
    if scoring not in ("lightning", "softmax"):
        raise CheckError(f"{name}: scoring must be \"lightning\" or \"softmax\", got {scoring!r}")
    sb = [None if hs.get("score_bias") is None else _vector(hs["score_bias"], f"{name} head {h + 1} score_bias", d)
          for h, hs in enumerate(heads)]
    sb = [None if b is None or not any(b) else b for b in sb]
    c = None if spec.get("bias") is None else _vector(spec["bias"], f"{name} bias", len(parsed[0][3][0]))
    scale = None if spec.get("scale") is None else parse_number(spec["scale"], f"{name} scale")
    if scoring == "lightning" and (any(sb) or c is not None or scale is not None):
        raise CheckError(f"{name}: score_bias, bias and scale belong to softmax attention only")
    if scale is not None and scale <= 0:
        raise CheckError(f"{name}: the softmax scale must be positive")
    if scoring == "softmax" and scale is None and len({len(q[0]) for q, _, _, _ in parsed}) > 1:
        raise CheckError(f"{name}: softmax with the default scale 1/sqrt(d_k) needs one d_k in every head")
    return _Attention(tokens, tuple(parsed), scoring=scoring, scale=scale,
                      bias=None if c is None or not any(c) else c, score_biases=tuple(sb) if any(sb) else None)


class _AttentionKind(Kind):
    """``"attention"``: only as the first layer; the dense layers after it act token-wise."""

    first_only, in_graph = True, False  # token mixing: not in a graph model (docs/graphs.md)

    def read(self, spec: dict, r) -> _Attention:
        check_keys(spec, r.at, *ATTENTION_KEYS)
        att = _attention(spec, r.width, r.name, r.at)
        r.tokens, r.width = att.tokens, att.d_out
        return att

    def canonical(self, spec: dict, shape, normal) -> tuple:
        """Lightning (the default) dropped; softmax's bias and scale when null, a head's zero score_bias."""
        layer = normal(spec)
        if layer.get("scoring") == "lightning":
            del layer["scoring"]
        for key in ("bias", "scale"):  # softmax's output bias and scale: absent, null and zeros alike
            if key in layer and layer[key] is None:
                del layer[key]
        for head in layer.get("heads", []):
            if isinstance(head, dict) and "score_bias" in head and (
                    head["score_bias"] is None or all(b == "0" for b in head["score_bias"])):
                del head["score_bias"]
        return layer, shape


ATTENTION = _AttentionKind()


def _head_outputs(layer, x):
    """Y_h = (X A_h X^T) X V_h for X = x reshaped to tokens x channels."""
    if layer.scoring == "softmax":
        raise CheckError("softmax attention has no exact value at a point (its witnesses are ball witnesses)")
    T = layer.tokens
    d = len(x) // T
    X = tuple(tuple(x[t * d:(t + 1) * d]) for t in range(T))
    Xt = _transpose(X)
    if isinstance(layer, _Attention):
        pairs = [(_matmul(q, _transpose(k)), v) for q, k, v, _ in layer.heads]
    else:
        pairs = list(zip(layer.scores, layer.values))
    return [_matmul(_matmul(_matmul(X, a), Xt), _matmul(X, v)) for a, v in pairs]


def _block_monomial_failure(m: Sparse, layer: _Heads) -> str | None:
    """None if m = P (x) R with P a permutation of tokens and R block monomial: one invertible
    d_v x d_v block in each block row and block column (heads permuted, GL(d_v) inside)."""
    T, H, dv = layer.tokens, len(layer.scores), layer.dv
    w = H * dv
    blocks: dict = {}  # (token row, token column) -> {(row, column) inside the w x w block: value}
    for row_index, row in enumerate(m):
        t, a = divmod(row_index, w)
        for c, x in row:
            s_, cc = divmod(c, w)
            blocks.setdefault((t, s_), {})[a, cc] = x
    if sorted(t for t, _ in blocks) != list(range(T)) or sorted(s_ for _, s_ in blocks) != list(range(T)):
        return "does not permute tokens (not P (x) R with P a permutation)"
    rs = {frozenset(b.items()) for b in blocks.values()}
    if len(rs) != 1:
        return "acts differently on different tokens (not P (x) R)"
    r = dict(next(iter(rs)))
    for h in range(H):
        cols = sorted({cc // dv for a, cc in r if a // dv == h})
        if len(cols) != 1:
            return f"head {h + 1}: {len(cols)} nonzero blocks in its block row (a block-monomial matrix needs exactly 1)"
        k = cols[0]
        b = tuple(tuple(r.get((h * dv + a, k * dv + c), Fraction(0)) for c in range(dv)) for a in range(dv))
        if not _invertible(b):
            return f"head {h + 1}: its block is not invertible"
    for k in range(H):
        rows = {a // dv for a, cc in r if cc // dv == k}
        if len(rows) != 1:
            return f"block column {k + 1} has {len(rows)} nonzero blocks (not block monomial)"
    return None


def _softmax_heads_failure(layer: _Heads, p: Sparse, q: Sparse) -> str | None:
    """Softmax heads: None if P_in = P (x) C, Q = P (x) R (R block monomial) and, for every head h with
    block B of R in block column k, C^T A_h C = A_k, C^T b_h = b_k and C^T V_h = V_k B^T exactly.  Then
    Y_h(P X C^T) = P Y_k(X) B^T, because softmax(P S P^T) = P softmax(S) P^T (a sufficient rule)."""
    T, H, dv = layer.tokens, len(layer.scores), layer.dv
    d, w = len(p) // T, H * dv

    def factor(m, size):  # (token permutation, the size x size block), or None
        perm, block = {}, {}
        for r, row in enumerate(m):
            t, a = divmod(r, size)
            for c, v in row:
                s_, b = divmod(c, size)
                if perm.setdefault(t, s_) != s_ or block.setdefault((a, b), v) != v:
                    return None
        if sorted(perm.values()) != list(range(T)) or len(perm) != T:
            return None
        full = tuple(tuple(block.get((a, b), Fraction(0)) for b in range(size)) for a in range(size))
        if any(dict(m[t * size + a]).get(perm[t] * size + b, Fraction(0)) != full[a][b]
               for t in range(T) for a in range(size) for b in range(size)):
            return None
        return perm, full

    fin, fout = factor(p, d), factor(q, w)
    if fin is None or fout is None or fin[0] != fout[0]:
        return "the actions are not one token permutation (x) channel and value-space matrices"
    C, R = fin[1], fout[1]
    Ct = _transpose(C)
    zero = (Fraction(0),) * d
    for h in range(H):
        k = next(k for k in range(H) if any(R[h * dv + a][k * dv + c] for a in range(dv) for c in range(dv)))
        B = tuple(tuple(R[h * dv + a][k * dv + c] for c in range(dv)) for a in range(dv))
        bh, bk = (layer.score_biases[i] if layer.score_biases and layer.score_biases[i] else zero for i in (h, k))
        if _matmul(_matmul(Ct, layer.scores[h]), C) != layer.scores[k]:
            return f"head {h + 1}: C^T A_h C != A_{k + 1} (softmax scores must be equal: no free scalar)"
        if tuple(sum(Ct[i][j] * bh[j] for j in range(d)) for i in range(d)) != tuple(bk):
            return f"head {h + 1}: C^T b_h != b_{k + 1}"
        if _matmul(Ct, layer.values[h]) != _matmul(layer.values[k], _transpose(B)):
            return f"head {h + 1}: C^T V_h != V_{k + 1} B^T"
    return None
