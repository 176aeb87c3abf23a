"""The exact dense layer x -> sigma(W x + b) and the exact check of an action on it.

A dense layer has rational weight W (out x in) and bias b, and an activation sigma (None: the
layer is affine, as the last layer of a model).  Its latent group K is the activation's
(``symeq.activations``: permutations, signed permutations, monomial or positive monomial
matrices; ``docs/theory.md``).  Convolutions are dense layers with shared weights
(:mod:`symeq.layers.conv`), and the token-wise layers after an attention layer are dense layers
with weight I_T (x) W (``tokens`` set).

:meth:`DenseLayer.check_action` decides f(P x + c_in) = Q f(x) + c_out for all real x exactly:
for Q monomial, row j reads sigma(u.x + b'_j) = q sigma(v.x + b_k) + o_j, comparing leading forms
forces u = alpha v, and what remains is a univariate identity in t, compared coefficientwise
(ReLU: alpha > 0, b'_j = alpha b_k, q = alpha, o = 0).  This is necessary and sufficient.

Examples
--------
>>> from symeq.activations import tanh_series
>>> from symeq.numbers import matrix
>>> layer = DenseLayer(matrix([[1, 2], [2, 1]]), [1, 1], tanh_series(3))
>>> layer.label, layer.latent_group_name
('dense 2->2 tanh_series(3)', 'signed permutations')
>>> swap = matrix([[0, 1], [1, 0]])
>>> layer.check_action(swap, swap)[0], layer.check_action(swap, -swap)[0]
(True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from flint import fmpq, fmpq_mat

from ..activations import Activation
from ..errors import ShapeError
from ..numbers import as_fmpq, mat_rows, matrix, monomial_parts

__all__ = ["DenseLayer", "activation_label", "expand_affine", "neuron_relation"]


def activation_label(activation: Activation | None) -> str:
    """The short name of an activation in reports: ``tanh_series(3)``, ``relu``, ``affine``.

    >>> from symeq.activations import monomial
    >>> activation_label(monomial(2)), activation_label(None)
    ('monomial(2)', 'affine')
    """
    if activation is None:
        return "affine"
    spec = activation.spec
    arg = spec.get("order", spec.get("degree"))
    return spec["type"] + (f"({arg})" if arg is not None else "")


def expand_affine(coeffs, alpha, beta) -> list:
    """Coefficients of sigma(alpha t + beta) from those of sigma.

    >>> expand_affine([0, 0, 1], 2, 1)   # (2t + 1)^2
    [1, 4, 4]
    """
    out = [fmpq(0)] * len(coeffs)
    power = [fmpq(1)]  # (alpha t + beta)^k
    for k, c in enumerate(coeffs):
        if k > 0:
            nxt = [fmpq(0)] * (len(power) + 1)
            for i, p in enumerate(power):
                nxt[i] += p * beta
                nxt[i + 1] += p * alpha
            power = nxt
        if c != 0:
            for i, p in enumerate(power):
                out[i] += c * p
    return out


def neuron_relation(act: Activation, u, bu, v, bv, q, o=0) -> str | None:
    """None if sigma(u.x + bu) = q sigma(v.x + bv) + o for all x, else the reason it fails."""
    if all(x == 0 for x in v):
        if any(x != 0 for x in u):
            return "its partner has a zero incoming row but it does not"
        return None if act(bu) == q * act(bv) + o else "constant outputs differ"
    k = next(i for i, x in enumerate(v) if x != 0)
    alpha = u[k] / v[k]
    if any(a != alpha * b for a, b in zip(u, v)):
        return "incoming rows are not proportional"
    beta = bu - alpha * bv
    if act.kind == "relu":
        ok = alpha > 0 and beta == 0 and q == alpha and o == 0
        return None if ok else f"relu(alpha t + beta) != q relu(t) for alpha={alpha}, beta={beta}, q={q}"
    lhs = expand_affine(list(act.coeffs), alpha, beta)
    rhs = [q * c for c in act.coeffs]
    rhs[0] += o
    return None if lhs == rhs else f"sigma({alpha} t + {beta}) != {q} sigma(t) + {o}"


@dataclass(eq=False)
class DenseLayer:
    """x -> sigma(W x + b) with exact W (out x in) and b; sigma None means affine.

    Implements :class:`symeq.layers.base.Layer` (kind ``"dense"``).
    """

    kind: ClassVar[str] = "dense"

    weight: fmpq_mat
    bias: list
    activation: Activation | None = None
    tokens: int | None = None  # set for token-wise layers after attention: weight = I_T (x) W

    def __post_init__(self):
        if not isinstance(self.weight, fmpq_mat):
            self.weight = matrix(self.weight)
        if self.bias is None:
            self.bias = [fmpq(0)] * self.weight.nrows()
        self.bias = [as_fmpq(b) for b in self.bias]
        if len(self.bias) != self.weight.nrows():
            raise ShapeError(f"bias has length {len(self.bias)}, weight has {self.weight.nrows()} rows")

    @property
    def in_dim(self) -> int:
        return self.weight.ncols()

    @property
    def out_dim(self) -> int:
        return self.weight.nrows()

    @property
    def hidden_label(self) -> str:
        return activation_label(self.activation)

    @property
    def label(self) -> str:
        return f"dense {self.in_dim}->{self.out_dim} {self.hidden_label}"

    @property
    def latent_group_name(self) -> str | None:
        return None if self.activation is None else self.activation.latent_group

    def bias_matrix(self, npoints: int) -> fmpq_mat:
        return fmpq_mat(self.out_dim, npoints, [b for b in self.bias for _ in range(npoints)])

    def pre_activation(self, X: fmpq_mat) -> fmpq_mat:
        return self.weight * X + self.bias_matrix(X.ncols())

    def forward(self, X: fmpq_mat) -> fmpq_mat:
        """Apply the layer to a batch (one column per point)."""
        Z = self.pre_activation(X)
        if self.activation is None:
            return Z
        sigma = self.activation
        return fmpq_mat(Z.nrows(), Z.ncols(), [sigma(z) for z in Z.entries()])

    def __call__(self, x: Sequence) -> list:
        X = fmpq_mat(len(x), 1, [as_fmpq(v) for v in x])
        return self.forward(X).entries()

    def copy(self) -> "DenseLayer":
        return DenseLayer(fmpq_mat(self.weight), list(self.bias), self.activation, self.tokens)

    @property
    def token_weight(self) -> fmpq_mat:
        """The per-token weight W of a token-wise layer (its first diagonal block)."""
        if self.tokens is None:
            return self.weight
        r, c = self.out_dim // self.tokens, self.in_dim // self.tokens
        return fmpq_mat(r, c, [self.weight[i, j] for i in range(r) for j in range(c)])

    @property
    def token_bias(self) -> list:
        return self.bias if self.tokens is None else self.bias[: self.out_dim // self.tokens]

    def check_action(self, P_in: fmpq_mat, Q_out: fmpq_mat, c_in=None, c_out=None) -> tuple[bool, str]:
        """Decide f(P_in x + c_in) = Q_out f(x) + c_out for all real x, exactly.

        The offsets c_in, c_out (default zero) carry the affine sign flips of activations that
        are odd up to a constant (sigmoid series).  For an affine layer this is W P = Q W and
        b + W c_in = Q b + c_out.  For sigma(W x + b) with Q monomial, row j reads
        sigma(u.x + b'_j) = q sigma(v.x + b_k) + o_j with b' = b + W c_in; comparing leading
        forms forces u = alpha v, and what remains is a univariate identity in t, checked
        coefficientwise (ReLU: alpha > 0, b_j = alpha b_k, q = alpha, o = 0).  This is necessary
        and sufficient.

        Returns
        -------
        (holds, detail) : the decision and a sentence saying why.
        """
        P, Q = P_in, Q_out
        n, m = self.in_dim, self.out_dim
        if (P.nrows(), P.ncols()) != (n, n) or (Q.nrows(), Q.ncols()) != (m, m):
            raise ShapeError(f"an action on a {n}->{m} dense layer needs {n}x{n} and {m}x{m} matrices, got "
                             f"{P.nrows()}x{P.ncols()} and {Q.nrows()}x{Q.ncols()}")
        W, b = self.weight, list(self.bias)
        if c_in is not None:
            b = [x + y for x, y in zip(b, (W * fmpq_mat(len(c_in), 1, list(c_in))).entries())]
        if self.activation is None:
            if W * P != Q * W:
                return False, "W rho_in != rho_out W"
            bq = (Q * fmpq_mat(len(b), 1, list(self.bias))).entries()
            if c_out is not None:
                bq = [x + y for x, y in zip(bq, c_out)]
            if bq != b:
                return False, "b + W c != rho_out b" if c_in is not None else "b != rho_out b"
            return True, f"W rho(g) = rho'(g) W and b = rho'(g) b ({W.nrows()}x{W.ncols()})"
        parts = monomial_parts(Q)
        if parts is None:
            return False, "the latent action is not a monomial matrix"
        cols, vals = parts
        U = mat_rows(W * P)
        V = mat_rows(W)
        base = self.bias
        for j, (k, q) in enumerate(zip(cols, vals)):
            o = c_out[j] if c_out is not None else 0
            why = neuron_relation(self.activation, U[j], b[j], V[k], base[k], q, o)
            if why:
                return False, f"neuron {j}: {why}"
        form = ("rho'(g) sigma(W x + b) + c'" if c_out is not None and any(x != 0 for x in c_out)
                else "rho'(g) sigma(W x + b)")
        return True, f"sigma(W rho(g) x + b) = {form}, {W.nrows()} neurons, exactly"
