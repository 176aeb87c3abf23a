"""Lightning attention f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h: its reading from a model file, its heads
(the theorem's layers), their exact outputs, and the block-monomial actions on them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ._numbers import CheckError, Sparse, _count, _dict, _matrix
from .algebra import _invertible, _matmul, _transpose
from .schema import HEAD_KEYS, check_keys


@dataclass(frozen=True)
class _Attention:
    """Lightning attention f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h on T tokens (flattened by rows)."""

    tokens: int
    heads: tuple  # of (Q, K, V, O) matrices
    label: str = field(compare=False, default="attention")
    act: object = field(compare=False, default="attention")

    @property
    def d(self) -> int:
        return len(self.heads[0][0])

    @property
    def d_out(self) -> int:
        return len(self.heads[0][3][0])

    @property
    def weight(self):  # only its number of rows (the flattened output size) is used generically
        return [None] * (self.tokens * self.d_out)


@dataclass(frozen=True)
class _Heads:
    """The chain's first layer: X -> [Y_1 ... Y_H], Y_h = (X A_h X^T) X V_h (flattened by rows)."""

    tokens: int
    scores: tuple
    values: tuple
    label: str = field(compare=False, default="attention heads")
    act: object = field(compare=False, default="heads")

    @property
    def dv(self) -> int:
        return len(self.values[0][0])

    @property
    def weight(self):
        return [None] * (self.tokens * len(self.scores) * self.dv)


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
    return _Attention(tokens, tuple(parsed))


def _head_outputs(layer, x):
    """Y_h = (X A_h X^T) X V_h for X = x reshaped to tokens x channels."""
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
