"""The exact dense layer x -> sigma(W x + b) and the exact check of an action on it.

A dense layer has rational weight W (out x in) and bias b, and an activation sigma (None: the
layer is affine, as the last layer of a model).  Its latent group K is the activation's
(``symeq.activations``: permutations, signed permutations, monomial or positive monomial
matrices; ``docs/theory.md``).  Convolutions are a kind of their own, kept as kernels
(:mod:`symeq.layers.conv`), and the token-wise layers after an attention layer are dense layers
with weight I_T (x) W (``tokens`` set).

:meth:`DenseLayer.check_action` decides f(P x + c_in) = Q f(x) + c_out for all real x exactly:
for Q monomial, row j reads sigma(u.x + b'_j) = q sigma(v.x + b_k) + o_j, comparing leading forms
forces u = alpha v, and what remains is a univariate identity in t, compared coefficientwise
(ReLU: alpha > 0, b'_j = alpha b_k, q = alpha, o = 0; a real activation such as tanh: membership
of (alpha, beta, q, o) in its complete symmetry table, docs/theory.md).  This is necessary and
sufficient.

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

import itertools
from dataclasses import dataclass, field
from typing import ClassVar, Iterator, Sequence

import numpy as np
from flint import fmpq, fmpq_mat

from ...canonical import Form, plain_form
from ...activations import Activation
from ...backends import EXACT, Backend, run_forward
from ...errors import InputError, ShapeError
from ...numbers import as_fmpq, mat_rows, matrix, monomial_matrix, monomial_parts
from ..base import DenseNames, NoPartner

_EXACT = EXACT

__all__ = ["DenseLayer", "activation_label", "canonical_rows", "expand_affine", "neuron_relation"]


def activation_label(activation: Activation | None) -> str:
    """The short name of an activation in reports: ``tanh_series(3)``, ``relu``, ``affine``.

    >>> from symeq.activations import monomial
    >>> activation_label(monomial(2)), activation_label(None)
    ('monomial(2)', 'affine')
    >>> from symeq.activations import real
    >>> activation_label(real("tanh")), activation_label(real("leaky_relu"))
    ('tanh', 'leaky_relu(1/100)')
    """
    return "affine" if activation is None else activation.label


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
    """None if sigma(u.x + bu) = q sigma(v.x + bv) + o for all x, else the reason it fails.

    For a real activation (tanh, sigmoid, ...) the identity sigma(alpha t + beta) = q sigma(t) + o
    is decided by its complete symmetry table (:meth:`symmetry_holds`), exactly: no evaluation.

    >>> from symeq.activations import real
    >>> u, v = [fmpq(-1), fmpq(-2)], [fmpq(1), fmpq(2)]
    >>> neuron_relation(real("tanh"), u, 0, v, 0, -1) is None
    True
    >>> neuron_relation(real("sigmoid"), u, 1, v, -1, -1, 1) is None
    True
    >>> neuron_relation(real("gelu"), u, 0, v, 0, 1)
    'gelu(-1 t + 0) = 1 gelu(t) + 0 is not an identity of gelu (its symmetry table: docs/theory.md)'
    """
    if all(x == 0 for x in v):
        if any(x != 0 for x in u):
            return "its partner has a zero incoming row but it does not"
        if act.kind == "real":
            return _real_constant_relation(act, bu, bv, q, o)
        return None if act(bu) == q * act(bv) + o else "constant outputs differ"
    k = next(i for i, x in enumerate(v) if x != 0)
    alpha = u[k] / v[k]
    if any(a != alpha * b for a, b in zip(u, v)):
        return "incoming rows are not proportional"
    beta = bu - alpha * bv
    if act.kind == "real":
        if act.symmetry_holds(alpha, beta, q, o):
            return None
        return (f"{act.name}({alpha} t + {beta}) = {q} {act.name}(t) + {o} is not an identity of {act.name} "
                "(its symmetry table: docs/theory.md)")
    if act.kind == "relu":
        ok = alpha > 0 and beta == 0 and q == alpha and o == 0
        return None if ok else f"relu(alpha t + beta) != q relu(t) for alpha={alpha}, beta={beta}, q={q}"
    lhs = expand_affine(list(act.coeffs), alpha, beta)
    rhs = [q * c for c in act.coeffs]
    rhs[0] += o
    return None if lhs == rhs else f"sigma({alpha} t + {beta}) != {q} sigma(t) + {o}"


def _real_constant_relation(act: Activation, bu, bv, q, o) -> str | None:
    """sigma(bu) = q sigma(bv) + o for constants: proved by a table identity with alpha bv + beta = bu,
    or by exact values where they are rational; otherwise not proved (reported as failing, which the
    pipeline reads as "no action found", never as a refutation)."""
    for alpha in (fmpq(1), fmpq(-1)):
        if act.symmetry_holds(alpha, bu - alpha * bv, q, o):
            return None
    try:
        return None if act(bu) == q * act(bv) + o else "constant outputs differ"
    except InputError:
        return f"constant outputs {act.name}({bu}) and {q} {act.name}({bv}) + {o}: equality not provable exactly"


def canonical_rows(rows, bias, act: Activation, affine: bool = False):
    """Canonical keys of the shifted pre-activation rows [w | b - s] and their scales.

    Row j equals ``scale[j] * key[j]``; two rows are related by an admissible scaling alpha
    exactly when their keys agree, and then alpha is the ratio of their scales.  With
    ``affine=True`` the affine sign flips of odd-plus-constant activations count too.

    >>> from symeq.activations import tanh_series
    >>> keys, scales = canonical_rows([[fmpq(1), fmpq(2)], [fmpq(-1), fmpq(-2)]], [0, 0], tanh_series(3))
    >>> keys[0] == keys[1], scales[0] / scales[1]
    (True, -1)
    """
    s = act.shift
    keys, scales = [], []
    for r, b in zip(rows, bias):
        vec = list(r) + [b - s]
        c = act.affine_canonical_scale(vec) if affine else act.canonical_scale(vec)
        if c != 1:
            vec = [x / c for x in vec]
        # the numerators then the denominators (reduced, so equal rows give equal keys), as fmpz: they hash
        # ~5x faster than fmpq (whose hash goes through Fraction) and build 2x faster than python ints
        keys.append(tuple([x.p for x in vec] + [x.q for x in vec]))
        scales.append(c)
    return keys, scales


def _partner_classes(keys: list, index: dict, li: int, up_to: str) -> dict:
    """theta^g's neurons of hidden layer li grouped by key; each group needs as many in theta.

    ``index`` maps theta's keys to its neurons; a group of another size leaves some neuron without
    a partner (:class:`symeq.layers.base.NoPartner`, with ``up_to`` saying what the keys forget).
    """
    classes: dict = {}
    for j, key in enumerate(keys):
        classes.setdefault(key, []).append(j)
    for key, js in classes.items():
        ks = index.get(key, [])
        if len(ks) != len(js):
            raise NoPartner(
                f"neuron {js[0] + 1} of hidden layer {li + 1}, after the action on its input, has no partner: "
                f"{len(js)} neuron(s) of theta^g but {len(ks)} of theta share its incoming weights and bias "
                f"up to the activation's symmetry{up_to}")
    return classes


def _bijections(act: Activation, n: int, base: dict, tied: list, uscales, vscales) -> Iterator[tuple]:
    """Every (rho, offset) from a bijection inside the tie classes (clones), lazily; without ties
    there is one.  ``base`` maps the untied neurons of theta^g to theta's, ``tied`` lists the
    classes (neurons of theta^g, neurons of theta)."""
    choices = [list(itertools.permutations(ks)) for _, ks in tied]
    for combo in itertools.product(*choices):
        target = dict(base)
        for (js, _), ks in zip(tied, combo):
            target.update(zip(js, ks))
        cols, vals, offs = [0] * n, [fmpq(0)] * n, [fmpq(0)] * n
        for j in range(n):
            k = target[j]
            alpha = uscales[j] / vscales[k]
            qo = act.affine_admissible(alpha)
            if qo is None:  # cannot happen for keys built from admissible scales
                raise AssertionError("inadmissible scale between equal canonical keys")
            cols[j], (vals[j], offs[j]) = k, qo
        yield monomial_matrix(cols, vals), (offs if any(x != 0 for x in offs) else None)


@dataclass(eq=False)
class DenseLayer(DenseNames):
    """x -> sigma(W x + b), W (out x in) and b held in a number backend; sigma None means affine.

    Implements :class:`symeq.layers.base.Layer` (kind ``"dense"``).  The one class of the kind, exact or
    float by ``backend``: over ``EXACT`` (the default) W is an ``fmpq_mat``, b a list of ``fmpq``, sigma an
    :class:`~symeq.activations.Activation`, and a batch is an ``fmpq_mat`` with one point per column; over
    ``FLOAT64`` (the float twin, :func:`symeq.layers.dense.floating.NumericDenseLayer`) W and b are float64
    arrays, sigma a float unit (:class:`~symeq.activations.floating.NumericActivation`), and a batch has one
    point per row.  The forward pass is the kind's one program (:class:`DenseProgram`) over the backend;
    the matching of actions is exact (canonical rows) or float (linear assignment, with its record, in the
    kind's float side), and only an exact layer decides an action (:meth:`check_action`).
    """

    kind: ClassVar[str] = "dense"
    #: the kind's float side (symeq.numeric.models.float_class): the float matching, reading and torch modules
    float_module: ClassVar[str] = "symeq.layers.dense.floating"
    #: what the kind can do (symeq.layers.registry.CAPABILITIES); a token-wise layer has fewer
    capabilities: ClassVar[frozenset] = frozenset({
        "last-layer", "plain-dense", "dense-rows", "dense-expansion", "tie-walk", "neuron-reduction", "ball-evaluation",
        "tensor-decision", "fibre-ideal", "jacobian-rank", "rank-certificate", "reynolds",
        "onnx-export", "npz-layout"})
    schema: ClassVar[dict] = {"dense": (("type", "weight", "bias", "activation"), ("type", "weight", "bias"))}
    #: the model-file types the float side reads with floats allowed (symeq.numeric.models.model_from_json)
    json_types: ClassVar[tuple] = ("dense",)

    weight: fmpq_mat
    bias: list
    activation: Activation | None = None
    tokens: int | None = None  # set for token-wise layers after attention: weight = I_T (x) W
    # the declared parameter space (symeq.layers.base.declared_biases): False when the layer was given no
    # bias (``"bias": null``, None here): no bias parameters; True: bias parameters, zeros included (a
    # model file's bias vector); None (a bias list given in Python without saying): as the model decides
    has_bias: bool | None = None
    #: where the layer's numbers live (symeq.backends; LayerBase): EXACT or FLOAT64
    backend: Backend = field(default=EXACT, repr=False)

    def __post_init__(self):
        if not self.backend.exact:
            self._float_parameters()
            return
        if not isinstance(self.weight, fmpq_mat):
            self.weight = matrix(self.weight)
        if self.bias is None and self.has_bias is None:
            self.has_bias = False
        if self.bias is None:
            self.bias = [fmpq(0)] * self.weight.nrows()
        self.bias = [as_fmpq(b) for b in self.bias]
        if len(self.bias) != self.weight.nrows():
            raise ShapeError(f"bias has length {len(self.bias)}, weight has {self.weight.nrows()} rows")

    def _float_parameters(self) -> None:
        """W and b as float64 arrays, checked (a float layer: non-empty, matching, finite)."""
        self.weight = np.asarray(self.weight, dtype=np.float64)
        if self.weight.ndim != 2 or 0 in self.weight.shape:
            raise ShapeError(f"a weight must be a non-empty matrix, got shape {self.weight.shape}")
        rows = self.weight.shape[0]
        self.bias = np.zeros(rows) if self.bias is None else np.asarray(self.bias, dtype=np.float64).reshape(-1)
        if self.bias.shape[0] != rows:
            raise ShapeError(f"bias has length {self.bias.shape[0]}, weight has {rows} rows")
        if not (np.all(np.isfinite(self.weight)) and np.all(np.isfinite(self.bias))):
            raise InputError("a layer has NaN or infinite weights; numeric models need finite parameters")

    def on(self, backend) -> "DenseLayer":
        """This layer with its numbers in ``backend`` (an exact layer's float twin: ``on(FLOAT64)``; a float
        layer's numbers over ``EXACT`` are the exact binary values of its floats)."""
        if backend is self.backend:
            return self
        if not backend.exact:
            return self._float_unit().float_twin(self, self._float_unit().float_activation(self.activation))
        raise InputError("a float dense layer is made exact by rounding its weights (symeq.numeric's rationalise); "
                         "on(EXACT) does not choose a rounding")

    @classmethod
    def float_twin(cls, layer, activation) -> "DenseLayer":
        """The float twin of an exact dense layer (``activation``: its float unit; token-wise kept)."""
        return cls._float_unit().float_twin(layer, activation)

    @classmethod
    def from_float_json(cls, spec: dict, ctx, at: str) -> "DenseLayer":
        """A dense layer of a model file with floats allowed, over float64 (the kind's float side)."""
        return cls._float_unit().from_float_json(spec, ctx, at)

    @classmethod
    def _float_unit(cls):
        """The kind's float side (``float_module``), imported by its name when asked: it sits above the exact
        layers (symeq.layers.registry.float_unit)."""
        from ..registry import float_unit

        return float_unit(cls.kind)

    @property
    def in_dim(self) -> int:
        w = self.weight
        return w.ncols() if isinstance(w, fmpq_mat) else w.shape[1]

    @property
    def out_dim(self) -> int:
        w = self.weight
        return w.nrows() if isinstance(w, fmpq_mat) else w.shape[0]

    @property
    def hidden_label(self) -> str:
        act = self.activation
        if act is None or self.backend.exact:
            return activation_label(act)
        spec = act.spec  # a float unit: its spec's type and order
        arg = spec.get("order", spec.get("degree"))
        return spec.get("type", act.name) + (f"({arg})" if arg is not None else "")

    def bias_matrix(self, npoints: int) -> fmpq_mat:
        return fmpq_mat(self.out_dim, npoints, [b for b in self.bias for _ in range(npoints)])

    def program(self) -> "DenseProgram":
        """The dense kind's program over the layer's backend on the whole weight (forward only: an activation
        the backend does not carry, no polynomial or a float unit, is applied entrywise by
        :func:`symeq.backends.run_forward`).  A float layer's is kept while W and b are the same arrays."""
        bk = self.backend
        if bk.exact:
            act = self.activation if bk.carries(self.activation) else None
            return DenseProgram(bk, self.weight, self.bias, True, act)
        cached = getattr(self, "_program", None)  # W and b are the program's own arrays (views, no copies)
        if cached is None or cached[0] is not self.weight or cached[1] is not self.bias:
            cached = (self.weight, self.bias, DenseProgram(bk, self.weight, self.bias, True))
            if self.weight.dtype == np.float64 and self.bias.dtype == np.float64:  # else copies: not kept
                self._program = cached
        return cached[2]

    def pre_activation(self, X):
        """W x + b on a batch (the backend's layout: exact, a column per point; float, a row per point)."""
        bk = self.backend
        return bk.batch_out(self.program().pre_activation(bk.batch_in(X)))

    def forward(self, X):
        """Apply the layer to a batch (the backend's layout): the kind's program over the layer's backend."""
        bk = self.backend
        return bk.batch_out(run_forward(self.program(), bk.batch_in(X), self.activation))

    def __call__(self, x: Sequence) -> list:
        X = fmpq_mat(len(x), 1, [as_fmpq(v) for v in x])
        return self.forward(X).entries()

    def copy(self) -> "DenseLayer":
        if not self.backend.exact:
            return DenseLayer(self.weight.copy(), self.bias.copy(), self.activation, self.tokens, backend=self.backend)
        return DenseLayer(fmpq_mat(self.weight), list(self.bias), self.activation, self.tokens, self.has_bias)

    @property
    def token_weight(self):
        """The per-token weight W of a token-wise layer (its first diagonal block)."""
        if self.tokens is None:
            return self.weight
        r, c = self.out_dim // self.tokens, self.in_dim // self.tokens
        if not self.backend.exact:
            return self.weight[:r, :c]
        return fmpq_mat(r, c, [self.weight[i, j] for i in range(r) for j in range(c)])

    @property
    def token_bias(self) -> list:
        return self.bias if self.tokens is None else self.bias[: self.out_dim // self.tokens]

    def torch_modules(self, torch, dtype) -> list:
        """torch modules computing this float layer (NumericModel.to_torch): a Linear, then the activation."""
        return self._float_unit().torch_modules(self, torch, dtype)

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
        if not self.backend.exact:
            raise InputError("a float dense layer decides no action (a float result reports its error); check the "
                             "exact layer, or use symeq.numeric's derivation")
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
                return False, f"neuron {j + 1}: {why}"  # numbered from 1, as all text output
        form = ("rho'(g) sigma(W x + b) + c'" if c_out is not None and any(x != 0 for x in c_out)
                else "rho'(g) sigma(W x + b)")
        return True, f"sigma(W rho(g) x + b) = {form}, {W.nrows()} neurons, exactly"

    def match_reference(self, affine: bool = False):
        """theta's side of the matching: (canonical keys, scales, {key: [neurons]}) of its rows
        [W | b - s] (:func:`canonical_rows`); None for an affine layer (nothing to match).  A float layer's:
        its shifted rows [W | b - s] as one array (the float side's ``match_reference``)."""
        if self.activation is None:
            return None
        if not self.backend.exact:
            return self._float_unit().match_reference(self)
        keys, scales = canonical_rows(mat_rows(self.weight), self.bias, self.activation, affine=affine)
        index: dict = {}
        for k, key in enumerate(keys):
            index.setdefault(key, []).append(k)
        return keys, scales, index

    def match_action(self, P_in: fmpq_mat, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The candidate actions (rho, offset) on the layer's output given y -> P_in y + c_in on its input.

        Row j of [W P_in | b + W c_in] must equal, up to an admissible scaling alpha_j (an affine
        sign flip too when ``affine``), a row k of theta's [W | b]; then rho has q(alpha_j) at
        (j, k) and the offset o(alpha_j).  Rows are compared by their canonical keys
        (:func:`canonical_rows`); ``reference`` is :meth:`match_reference` (computed here if None).

        Returns
        -------
        (tied, candidates) : ``tied`` when some class of equal rows has several neurons (clones);
            ``candidates`` yields every (rho, offset) from a bijection inside those classes, lazily
            (offset None: linear).

        Raises
        ------
        NoPartner : a row of theta^g has no partner in theta (``li`` names the hidden layer).

        Examples
        --------
        >>> from symeq.activations import tanh_series
        >>> layer = DenseLayer([[1, 2], [2, 1]], [1, 1], tanh_series(3))
        >>> tied, cands = layer.match_action(matrix([[0, 1], [1, 0]]))
        >>> tied, [rho.entries() for rho, _ in cands]
        (False, [[0, 1, 1, 0]])

        A float layer returns ``(False, [(rho, record)])``, one candidate by linear assignment with its record
        (:func:`symeq.layers.dense.floating.match_action`): a float result reports its error, it never decides.
        """
        if not self.backend.exact:
            return self._float_unit().match_action(self, P_in, c_in, reference=reference)
        if self.activation is None:
            raise InputError("an affine layer's output is acted on by the group itself: check the action "
                             "(check_action), there is nothing to match")
        n = self.in_dim
        if (P_in.nrows(), P_in.ncols()) != (n, n):
            raise ShapeError(f"an action on the input of a {n}->{self.out_dim} dense layer needs a {n}x{n} matrix, "
                             f"got {P_in.nrows()}x{P_in.ncols()}")
        act = self.activation
        U = mat_rows(self.weight * P_in)
        bias = list(self.bias)
        if c_in is not None:  # an affine action y -> P y + c on the input: bias b + W c
            bias = [x + y for x, y in zip(bias, (self.weight * fmpq_mat(len(c_in), 1, list(c_in))).entries())]
        ukeys, uscales = canonical_rows(U, bias, act, affine=affine)
        vkeys, vscales, index = reference if reference is not None else self.match_reference(affine)
        classes = _partner_classes(ukeys, index, li, "")
        tied = [(js, index[key]) for key, js in classes.items() if len(js) > 1]
        base = {js[0]: index[key][0] for key, js in classes.items() if len(js) == 1}
        return bool(tied), _bijections(act, len(U), base, tied, uscales, vscales)

    @classmethod
    def layer_capabilities(cls, layer) -> frozenset:
        """A token-wise layer (after attention, ``tokens`` set) is not a plain dense layer: the tensor
        decision, the fibre ideal's dense path and the one-vector rank rows do not read it."""
        if getattr(layer, "tokens", None) is None:
            return cls.capabilities
        return cls.capabilities - {"plain-dense", "tensor-decision", "fibre-ideal"}

    def ball_forward(self, y: list) -> list:
        """The layer on arb balls (exact rationals or balls in, balls out)."""
        from flint import arb

        z = []
        for row, b in zip(mat_rows(self.weight), self.bias):
            acc = arb(b)
            for w, v in zip(row, y):
                if w != 0:
                    acc += arb(w) * v
            z.append(acc)
        return z if self.activation is None else [self.activation.ball(t) for t in z]

    def parameters_key(self) -> tuple:
        """What two layers of this kind must share to be equal."""
        return ("dense", self.weight, tuple(self.bias))

    def parameter_counts(self) -> tuple:
        """(weights, biases) in the rank method's parameter vector (token-wise: one W and b for all tokens)."""
        return DenseProgram.counts(self)

    def jacobian_program(self, bk, bias: bool) -> "DenseProgram":
        """This layer's forward pass and Jacobian over the backend ``bk`` (:class:`DenseProgram`)."""
        return DenseProgram(bk, mat_rows(self.token_weight), self.token_bias, bias, self.activation, self.tokens or 1)

    def to_json(self, declared_bias: bool) -> dict:
        """The model-file object (``symeq.io``); ``declared_bias`` False writes ``"bias": null``."""
        from ...numbers import format_matrix, format_vector

        return {
            "type": "dense",
            "weight": format_matrix(self.token_weight),
            "bias": format_vector(self.token_bias) if declared_bias else None,  # null: no bias parameters
            "activation": None if self.activation is None else self.activation.to_spec(),
        }


class DenseProgram:
    """The dense kind's forward pass and reverse-mode Jacobian, written once over a number backend
    (symeq/backends.py: exact, float64, torch, modular).

    The layer ``x -> sigma(W x + b)``; a token-wise layer after attention is ``I_T (x) W`` with ``b`` on every
    token (one W and b shared by the tokens).  The parameters are W row-major, then b when ``has_bias``.
    Batches are columns (in x N, token-major for token-wise layers).  :meth:`from_rows` builds one from
    plain rows (symeq/relu/fdim.py); :meth:`DenseLayer.jacobian_program` from a layer.
    """

    def __init__(self, bk, rows, bias, has_bias: bool, activation=None, tokens: int = 1):
        self.bk, self.bias, self.T = bk, bool(has_bias), int(tokens or 1)
        self.rows, self.bias_values = rows, bias  # lists of rationals, an fmpq_mat, or float arrays (float64)
        if isinstance(rows, fmpq_mat):
            self.out, self.inp = rows.nrows(), rows.ncols()
        else:
            self.out = len(rows)
            self.inp = len(rows[0]) if self.out else 0
        self.W, self.WT = bk.weight_operands(rows, (self.out, self.inp))
        self.b = bk.asarray(self.bias_values, (self.out,)) if self.out else bk.zeros((0,))
        self.act = bk.activation(activation)

    @staticmethod
    def counts(layer) -> tuple:
        """(weights, biases) of the layer's parameter vector (token-wise layers: one W and b for all tokens)."""
        T = layer.tokens or 1
        return (layer.out_dim // T) * (layer.in_dim // T), layer.out_dim // T

    @property
    def out_dim(self) -> int:
        return self.out * self.T

    @property
    def n_params(self) -> int:
        return self.out * self.inp + (self.out if self.bias else 0)

    @property
    def affine_plain(self) -> bool:
        """x -> W x + b on one vector (no activation, no tokens): its Jacobian block is I_K (x) [H^T, 1]."""
        return self.act is None and self.T == 1

    def values(self) -> list:
        rows = mat_rows(self.rows) if isinstance(self.rows, fmpq_mat) else self.rows
        return [x for r in rows for x in r] + (list(self.bias_values) if self.bias else [])

    def pre_activation(self, H):
        bk, T, N = self.bk, self.T, H.shape[1]
        if T == 1:  # one vector per point: transposed views, no copies
            return bk.permute(bk.affine(bk.permute(H, (1, 0)), self.WT, self.b), (1, 0))
        Ht = bk.permute(H.reshape(T, self.inp, N), (0, 2, 1)).reshape(T * N, self.inp)  # (token, point) x in
        Z = bk.affine(Ht, self.WT, self.b)                                             # (token, point) x out
        return bk.permute(Z.reshape(T, N, self.out), (0, 2, 1)).reshape(T * self.out, N)

    def forward(self, H, pointwise=None):
        """H: inputs (in x N); returns (outputs, cache).  ``pointwise(Z) -> (values, derivatives)`` replaces
        the polynomial activation (the known slopes of a ReLU at the points, say)."""
        Z = self.pre_activation(H)
        if pointwise is not None:
            out, S = pointwise(Z)
            return out, (H, S)
        if self.act is None:
            return Z, (H, None)
        c, dc = self.act
        return self.bk.poly(c, Z), (H, self.bk.poly(dc, Z))

    def backward(self, cache, D, J, col: int, need_input: bool):
        """D: cotangents of the outputs (rows x out, rows = (point, output) pairs, point-major); writes the
        parameter block into J at column ``col``; returns the cotangents of the inputs."""
        bk, (H, S) = self.bk, cache
        N, T = H.shape[1], self.T
        K = D.shape[0] // N
        D3 = D.reshape(N, K, T * self.out)
        if S is not None:
            D3 = bk.mul(D3, bk.permute(S, (1, 0))[:, None, :])
        D4 = D3.reshape(N, K, T, self.out)
        H3 = bk.permute(H.reshape(T, self.inp, N), (2, 0, 1))  # N x T x in
        width = self.out * self.inp
        step = max(1, 2_000_000 // max(1, K * width))  # points per chunk (bounded temporaries)
        for n0 in range(0, N, step):
            n1 = min(N, n0 + step)
            blk = None
            for t in range(T):  # the weights are shared by the tokens: their blocks add up
                part = bk.mul(D4[n0:n1, :, t, :, None], H3[n0:n1, None, t, None, :])
                blk = part if blk is None else bk.add(blk, part)
            J[n0 * K:n1 * K, col:col + width] = blk.reshape((n1 - n0) * K, width)
        if self.bias:
            acc = D4[:, :, 0, :]
            for t in range(1, T):
                acc = bk.add(acc, D4[:, :, t, :])
            J[:, col + width:col + width + self.out] = acc.reshape(N * K, self.out)
        if not need_input:
            return None
        Din = bk.matmul(D4.reshape(N * K * T, self.out), self.W)  # (point, output, token) x in
        return Din.reshape(N * K, T * self.inp)


def read_dense(spec: dict, ctx, at: str):
    """A ``"dense"`` object of a model file (after attention: a token-wise layer I_T (x) W; after a
    convolution the conv kind reads it, ``ctx.takes_over``)."""
    from ...activations import activation_from_spec
    from ...numbers import parse_matrix, parse_vector
    from ...schema import check_keys
    from ...sizes import check_width

    check_keys(spec, at, *DenseLayer.schema["dense"], error=InputError)
    tokens, n = ctx.tokens, ctx.n
    if isinstance(spec["weight"], list):  # size first: rows are neurons
        check_width(len(spec["weight"]) * (tokens or 1), f"{at}.weight (neurons)")
    W = parse_matrix(spec["weight"], f"{at}.weight", shape=(None, n))
    bias = spec.get("bias")
    b = None if bias is None else parse_vector(bias, f"{at}.bias", length=W.nrows())
    act = activation_from_spec(spec.get("activation"), f"{at}.activation")
    ctx.n = W.nrows()
    if tokens is None:
        return DenseLayer(W, b, act, has_bias=b is not None)  # a vector, zeros included: declared
    from ...numbers import identity, kron

    return DenseLayer(kron(identity(tokens), W), list(b if b is not None else [0] * W.nrows()) * tokens, act,
                      tokens, b is not None)


LAYER_KINDS = (DenseLayer,)
JSON_READERS = {"dense": read_dense}
JSON_ADVERTISED = ("dense",)


DIGEST_FORMS = {"dense": Form(plain_form)}
"""The digest form of a dense layer (docs/certificates.md "Digests"): its numbers and activation only; after
an image, conv2d's (``DIGEST_AFTER_IMAGE`` of symeq.layers.conv)."""
