"""Numeric twin of :mod:`symeq.attention`: lightning and softmax multi-head attention in floats.

The lightning layer is the exact one in float64 (or torch): f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h.
The softmax layer is the usual one, f(X) = sum_h softmax(X Q_h K_h^T X^T / sqrt(d_k)) X V_h O_h
(row-wise softmax), which is not polynomial and lives only here.  Both act on batches of shape
(N, T, d) and flatten by rows like the exact side (index t*d + c).  The latent space and group are
the same as for the exact layer: value spaces, prod_h GL(d_v) x| S_H on every token.

For the derivation of the actions a model is walked as its chain, like the exact one: the
:func:`NumericHeads` layer (value spaces) and the output projection merged into the next
token-wise layer.  :func:`match_heads_numeric` is the float twin of
:func:`symeq.attention.match_heads`: heads matched by their score matrices up to a scalar
(exactly equal for softmax), value maps solved by least squares, giving P (x) R.

:func:`value_space_action` fits, by least squares, the action of a group element on the
concatenated value spaces (the paper's metric applied to the heads layer) and projects it to a
block-monomial matrix (a head permutation with GL(d_v) blocks), reporting both residuals — never
"verified".

Examples
--------
>>> from symeq.attention import random_equivariant_attention, scramble_attention
>>> exact = scramble_attention(random_equivariant_attention(rng=0), rng=1)
>>> layer = from_exact(exact.layers[0])
>>> import numpy as np
>>> X = np.random.default_rng(0).integers(-3, 4, size=(5, 8)).astype(float)
>>> ref = exact([int(v) for v in X[0]])      # exact evaluation of the same point
>>> bool(np.allclose(layer.forward(X)[0], [float(v) for v in ref]))
True
"""

from __future__ import annotations


import numpy as np

from ...backends import FLOAT64, run_forward
from ...errors import InputError
from . import AttentionLayer, AttentionProgram, Head, HeadsLayer
from ...numeric.monomial import MonomialAction, as_action

__all__ = ["scoring_from_json", "NumericAttention", "NumericHeads", "from_exact", "head_outputs", "value_space_action", "factor_kron_numeric", "match_heads_numeric"]


def _f(M) -> np.ndarray:
    return np.array([[float(int(x.p)) / float(int(x.q)) for x in row] for row in M.table()], dtype=float)


def scoring_from_json(spec: dict, at: str) -> tuple:
    """(scoring, scale, score biases, output bias) of an attention layer of a model file, floats
    allowed: ``"scoring"`` ("lightning", the default, or "softmax"), the softmax ``"scale"``
    (absent: 1/sqrt(d_k)), the heads' ``"score_bias"`` and the layer's ``"bias"``."""
    scoring = spec.get("scoring", "lightning")
    if scoring not in ("lightning", "softmax"):
        raise InputError(f"{at}.scoring: must be \"lightning\" or \"softmax\", got {scoring!r}")
    v = spec.get("scale")
    heads = spec.get("heads") or []
    sb = [None if not isinstance(hs, dict) or hs.get("score_bias") is None else
          np.array([_float(x, f"{at}.heads[{h}].score_bias") for x in _list(hs["score_bias"], f"{at}.heads[{h}].score_bias")])
          for h, hs in enumerate(heads)]
    sb = None if all(b is None for b in sb) else sb
    bias = spec.get("bias")
    bias = None if bias is None else np.array([_float(x, f"{at}.bias") for x in _list(bias, f"{at}.bias")])
    if v is None:
        return scoring, None, sb, bias
    if scoring != "softmax":
        raise InputError(f"{at}.scale: a scale belongs to softmax attention only (\"scoring\": \"softmax\")")
    q = _float(v, f"{at}.scale")
    if not q > 0:
        raise InputError(f"{at}.scale: must be positive, got {v!r}")
    return scoring, q, sb, bias


def _list(v, where: str) -> list:
    if not isinstance(v, list):
        raise InputError(f"{where}: expected a list of numbers, got {type(v).__name__}")
    return v


def _float(v, where: str) -> float:
    """A finite float from a JSON number or an exact "p/q" string."""
    from ...numbers import parse_number

    if isinstance(v, float):
        if not np.isfinite(v):
            raise InputError(f"{where}: {v!r} is not finite")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise InputError(f"{where}: expected a number, got {v!r}")
    q = parse_number(v, where)
    return float(int(q.p)) / float(int(q.q))


_FLOAT64 = FLOAT64


def softmax_scores(scale: float, score_bias=None):
    """The softmax score hook of :class:`symeq.layers.attention.AttentionProgram` over float64:
    S_h -> softmax_rows(scale (S_h + 1 (X b_h)^T)), b_h the head's score bias (None: none)."""
    def score(S, Xs, h):
        if score_bias is not None and score_bias[h] is not None:
            S = S + (Xs @ score_bias[h])[:, None, :]
        S = S * scale
        S = np.exp(S - S.max(axis=-1, keepdims=True))
        return S / S.sum(axis=-1, keepdims=True)
    return score


def NumericAttention(tokens: int, query: list, key: list, value: list, out: list,  # noqa: N802
                     scoring: str = "lightning", scale: float | None = None, score_bias: list | None = None,
                     bias=None) -> AttentionLayer:
    """Multi-head attention on ``tokens`` tokens over float64: the kind's one class,
    :class:`symeq.layers.attention.AttentionLayer`, with ``backend=FLOAT64``; per head the query, key (d x d_k),
    value (d x d_v) and out (d_v x d_out) matrices; ``scoring`` "lightning" or "softmax" (``scale``: the score
    scale s, None for torch's 1/sqrt(d_k); ``score_bias``: per head b_h or None, S_ts = x_t^T A_h x_s +
    b_h^T x_s; ``bias``: the output bias c, added to every token).  The float model's (symeq.numeric)
    constructor."""
    if scoring not in ("lightning", "softmax"):
        raise InputError(f"attention scoring must be 'lightning' or 'softmax', got {scoring!r}")
    sb = list(score_bias) if score_bias is not None else [None] * len(query)
    heads = [Head(q, k, v, o, b, FLOAT64) for q, k, v, o, b in zip(query, key, value, out, sb)]
    return AttentionLayer(tokens, heads, None, scoring, scale, bias, FLOAT64)


def float_parameters(layer) -> None:
    """A float attention layer's checks and numbers (its heads float64 arrays; shapes, scoring, scale, score
    biases and output bias as the float model has them)."""
    if layer.scoring not in ("lightning", "softmax"):
        raise InputError(f"attention scoring must be 'lightning' or 'softmax', got {layer.scoring!r}")
    if layer.scale is not None and (layer.scoring != "softmax" or not float(layer.scale) > 0):
        raise InputError(f"a scale belongs to softmax attention and must be positive, got {layer.scale!r}")
    layer.heads = [h if isinstance(h, Head) else Head(**h, backend=FLOAT64) for h in layer.heads]
    if any(h.backend.exact for h in layer.heads):
        raise InputError("a float attention layer needs float heads (symeq.layers.attention.floating.from_exact "
                         "makes the float twin of an exact layer)")
    d = layer.heads[0].query.shape[0]
    for h, hd in enumerate(layer.heads):
        q, k, v, o = hd.query, hd.key, hd.value, hd.out
        if q.shape[0] != d or k.shape != q.shape or v.shape[0] != d or o.shape[0] != v.shape[1]:
            raise InputError(f"head {h + 1}: query/key (d x d_k), value (d x d_v), out (d_v x d_out) shapes do not fit")
        if hd.score_bias is not None:
            hd.score_bias = np.asarray(hd.score_bias, dtype=float).reshape(d)
    if all(hd.score_bias is None or not np.any(hd.score_bias) for hd in layer.heads):
        for hd in layer.heads:
            hd.score_bias = None
    if layer.bias is not None:
        layer.bias = np.asarray(layer.bias, dtype=float).reshape(layer.heads[0].out.shape[1])
    if layer.scoring == "lightning" and (layer.score_bias is not None or layer.bias is not None):
        raise InputError("score biases and an output bias belong to softmax attention only")


def from_float_json(spec: dict, ctx, at: str) -> AttentionLayer:
    """An attention layer of the model file format on ``ctx.n`` inputs, floats allowed (the kind's keys,
    :mod:`symeq.io`); sets the reader's token count and width for the layers after it."""
    from ...errors import ShapeError
    from ...schema import check_keys
    from ...numeric.floats import float_matrix

    check_keys(spec, at, *AttentionLayer.schema[spec["type"]], error=InputError)
    T = spec.get("tokens")
    if not isinstance(T, int) or isinstance(T, bool) or T < 1:
        raise InputError(f"{at}: \"tokens\" must be a positive integer (the number of tokens T)")
    if ctx.n % T:
        raise ShapeError(f"{at}: input_dim {ctx.n} is not a multiple of {T} tokens "
                         "(inputs are T x d, flattened by rows)")
    d = ctx.n // T
    heads = spec.get("heads")
    if not isinstance(heads, list) or not heads:
        raise InputError(f"{at}: \"heads\" must be a non-empty list of {{query, key, value, out}}")
    mats = {"query": [], "key": [], "value": [], "out": []}
    for h, hs in enumerate(heads):
        if not isinstance(hs, dict):
            raise InputError(f"{at}.heads[{h}] must be an object with \"query\", \"key\", \"value\" and \"out\" "
                             "matrices")
        check_keys(hs, f"{at}.heads[{h}]", *AttentionLayer.head_keys(), error=InputError)
        for k in mats:
            m = float_matrix(hs[k], f"{at}.heads[{h}].{k}")
            rows = mats["value"][-1].shape[1] if k == "out" else d
            if m.shape[0] != rows:
                raise ShapeError(f"{at}.heads[{h}].{k} has {m.shape[0]} rows, expected {rows}")
            mats[k].append(m)
    try:
        att = NumericAttention(T, mats["query"], mats["key"], mats["value"], mats["out"], *scoring_from_json(spec, at))
    except InputError as e:
        raise InputError(f"{at}: {e}") from None
    ctx.tokens, ctx.n = att.tokens, att.d_out
    return att


def from_exact(layer, scoring: str | None = None) -> AttentionLayer:
    """The float twin of an exact :class:`symeq.layers.attention.AttentionLayer` (its scoring and scale
    unless ``scoring`` is given)."""
    scoring = scoring if scoring is not None else getattr(layer, "scoring", "lightning")
    scale = getattr(layer, "scale", None)
    scale = float(int(scale.p)) / float(int(scale.q)) if scale is not None and scoring == "softmax" else None
    fl = lambda v: None if v is None else np.array([float(int(x.p)) / float(int(x.q)) for x in v])  # noqa: E731
    sb = [fl(getattr(h, "score_bias", None)) for h in layer.heads]
    return NumericAttention(layer.tokens, [_f(h.query) for h in layer.heads], [_f(h.key) for h in layer.heads],
                            [_f(h.value) for h in layer.heads], [_f(h.out) for h in layer.heads], scoring, scale,
                            None if all(b is None for b in sb) else sb, fl(getattr(layer, "bias", None)))


def score_scale(layer) -> float:
    """The factor s in softmax(s X A X^T): the given scale, else 1/sqrt(d_k) (as torch)."""
    return float(layer.scale) if layer.scale is not None else 1.0 / np.sqrt(layer.query[0].shape[1])


def heads_layer(layer) -> HeadsLayer:
    """The first layer of a float layer's chain: the value spaces (see :func:`symeq.models.Model.chain`)."""
    return NumericHeads(layer.tokens, [q @ k.T for q, k in zip(layer.query, layer.key)], list(layer.value),
                        layer.scoring, layer.query[0].shape[1], layer.scale, layer.score_bias)


def _tokens(layer, X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim == 2:
        if X.shape[1] != layer.tokens * layer.d:
            raise InputError(f"inputs have {X.shape[1]} entries, expected T*d = {layer.tokens * layer.d}")
        X = X.reshape(X.shape[0], layer.tokens, layer.d)
    return X


def program(layer, heads_only: bool = False) -> AttentionProgram:
    """The attention kind's one program (symeq/layers/attention/__init__.py) over float64 on a float layer's
    matrices, softmax scoring as its score hook; ``heads_only``: the value-space outputs (no O_h, no bias)."""
    score = softmax_scores(score_scale(layer), layer.score_bias) if layer.scoring == "softmax" else None
    return AttentionProgram.from_matrices(_FLOAT64, layer.tokens, layer.query, layer.key, layer.value,
                                          None if heads_only else layer.out, score,
                                          None if heads_only else layer.bias)


def head_outputs(layer, X: np.ndarray) -> np.ndarray:
    """The value-space outputs [Y_1 ... Y_H] of a float attention layer, shape (N, T, H d_v), Y_h = S_h X V_h."""
    X = _tokens(layer, X)
    N = X.shape[0]
    return run_forward(program(layer, True), X.reshape(N, -1).T).T.reshape(N, layer.tokens, -1)


def forward(layer, X: np.ndarray) -> np.ndarray:
    """A float attention layer on a batch of flattened inputs (one row per point, or N x T x d)."""
    X = _tokens(layer, X)
    N = X.shape[0]
    return np.ascontiguousarray(run_forward(program(layer), X.reshape(N, -1).T).T)


def _assign(cost: np.ndarray) -> list:
    """The head permutation minimising the total cost (H is small: exhaustive up to 7 heads)."""
    import itertools

    H = cost.shape[0]
    arg = cost.argmin(axis=1)
    if len(set(arg.tolist())) == H:
        return arg.tolist()
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        if H > 7:  # greedy fallback, optimal only for clear-cut costs
            return [int(np.argmin(cost[h])) for h in range(H)]
        return list(min(itertools.permutations(range(H)), key=lambda p: sum(cost[h, p[h]] for h in range(H))))
    rows, cols = linear_sum_assignment(cost)
    return [int(c) for _, c in sorted(zip(rows, cols))]


def NumericHeads(tokens: int, scores: list, values: list, scoring: str = "lightning", dk: int = 1,  # noqa: N802
                 scale: float | None = None, score_biases: list | None = None) -> HeadsLayer:
    """X -> [Y_1 ... Y_H] with Y_h = S_h(X) X V_h over float64 (flattened t * H d_v + h d_v + j, as the exact
    layer); S_h the lightning scores X A_h X^T or their softmax (``scoring``; ``scale`` None: 1/sqrt(dk)): the
    kind's one class, :class:`symeq.layers.attention.HeadsLayer`, with ``backend=FLOAT64``."""
    return HeadsLayer(tokens, list(scores), list(values), None, scoring, scale, dk, score_biases, FLOAT64)


def heads_float_twin(layer) -> HeadsLayer:
    """The float twin of an exact heads layer (its score and value matrices in float64)."""
    from ...numeric.monomial import to_float_matrix

    return NumericHeads(layer.tokens, [to_float_matrix(a) for a in layer.scores], [to_float_matrix(v) for v in layer.values])


def heads_forward(layer, X: np.ndarray) -> np.ndarray:
    """[Y_1 ... Y_H] of a float heads layer on a batch (a row per point): the attention kind's program over
    float64 with the scores A_h (S_h = X A_h X^T, or its softmax) and no output matrices."""
    X = np.asarray(X, dtype=float).reshape(-1, layer.tokens * layer.d)
    score = None
    if layer.scoring == "softmax":
        score = softmax_scores(float(layer.scale) if layer.scale is not None else 1.0 / np.sqrt(layer.dk),
                               layer.score_biases)
    prog = AttentionProgram.from_matrices(_FLOAT64, layer.tokens, layer.scores, None, layer.values, None, score)
    return np.ascontiguousarray(run_forward(prog, X.T).T)


def match_heads_action(layer, P_in):
    """The value-space action P (x) R of a float heads layer given P_in = P (x) C on the tokens
    (:func:`match_heads_numeric`), with its record: ``(False, [(rho, (max residual, median residual, margin,
    how))])``.  One candidate: a float match does not enumerate tied heads.

    Raises :class:`~symeq.errors.InputError` when P_in is not of the form P (x) C (the question is not posed
    for this layer), as the float derivation always has.

    >>> layer = NumericHeads(2, [np.eye(1)], [np.eye(1)])
    >>> _, [(rho, rec)] = layer.match_action(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> rho.cols.tolist(), rec[0] < 1e-12
    ([1, 0], True)
    """
    P = P_in.to_dense() if isinstance(P_in, MonomialAction) else P_in
    rho, rel, margin, why = match_heads_numeric(layer, P)
    if why:  # the input action is not of the form the heads layer allows: a question not posed
        raise InputError(f"attention heads: {why}")
    how = f"{layer.heads} heads matched by linear assignment on their score matrices, values by least squares"
    return False, [(as_action(rho), (float(rel.max()), float(np.median(rel)), margin, how))]


def factor_kron_numeric(M: np.ndarray, T: int, d: int, tol: float = 1e-9):
    """(P, C) with M = P (x) C for a T x T permutation P, or None (the float twin of
    :func:`symeq.attention.factor_kron`).

    >>> P, C = np.eye(2)[[1, 0]], np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> f = factor_kron_numeric(np.kron(P, C), 2, 2)
    >>> bool(np.allclose(f[0], P) and np.allclose(f[1], C))
    True
    """
    M = np.asarray(M, dtype=float)
    if M.shape != (T * d, T * d):
        return None
    blocks = M.reshape(T, d, T, d).transpose(0, 2, 1, 3)  # blocks[t, s] = M[t d:(t+1) d, s d:(s+1) d]
    norms = np.linalg.norm(blocks, axis=(2, 3))
    scale = max(float(norms.max()), 1e-300)
    nz = norms > tol * scale
    if not np.all(nz.sum(axis=1) == 1) or not np.all(nz.sum(axis=0) == 1):
        return None
    cols = nz.argmax(axis=1)
    C = blocks[0, cols[0]]
    if any(not np.allclose(blocks[t, cols[t]], C, atol=tol * scale, rtol=0) for t in range(T)):
        return None
    return np.eye(T)[cols], C


def match_heads_numeric(layer: HeadsLayer, P_in: np.ndarray):
    """The value-space action P (x) R making the heads layer equivariant under P_in = P (x) C.

    The float twin of :func:`symeq.attention.match_heads`: head h is matched to the head k with
    C^T A_h C ~ lambda A_k (lambda = 1 for softmax scores, whose score biases are matched too:
    C^T b_h ~ b_k) by linear assignment on the relative residuals, V_k N ~ C^T V_h is solved by least squares, and block (h, k) of R is
    (lambda N)^T.  Returns (action, residuals per head, margin, failure or None).
    """
    T, H, dv = layer.tokens, layer.heads, layer.dv
    fin = factor_kron_numeric(P_in, T, layer.d)
    if fin is None:
        return None, np.full(H, np.inf), 0.0, "the group does not act as a token permutation (x) a channel matrix"
    P, C = fin
    sb = getattr(layer, "score_biases", None)
    zero = np.zeros(layer.d)

    def stack(A, b):  # softmax: the score bias is matched with the score matrix, [A; b^T]
        return A if sb is None else np.vstack([A, b[None, :]])

    At = [stack(C.T @ A @ C, C.T @ (zero if sb is None or sb[h] is None else sb[h]))
          for h, A in enumerate(layer.scores)]
    Ak_all = [stack(A, zero if sb is None or sb[k] is None else sb[k]) for k, A in enumerate(layer.scores)]
    cost = np.zeros((H, H))
    lam = np.ones((H, H))
    for h in range(H):
        nh = max(np.linalg.norm(At[h]), 1e-300)
        for k in range(H):
            Ak = Ak_all[k]
            if layer.scoring != "softmax":  # lightning scores are trilinear: a scalar moves into V
                lam[h, k] = float(np.sum(At[h] * Ak) / max(np.sum(Ak * Ak), 1e-300))
            cost[h, k] = np.linalg.norm(At[h] - lam[h, k] * Ak) / nh
    perm = _assign(cost)
    part = np.sort(cost, axis=1)
    margin = float(np.min(part[:, 1] - part[:, 0])) if H > 1 else float("inf")
    R = np.zeros((H * dv, H * dv))
    res = np.zeros(H)
    for h in range(H):
        k = int(perm[h])
        Vk, rhs = layer.values[k], C.T @ layer.values[h]
        N, *_ = np.linalg.lstsq(Vk, rhs, rcond=None)
        res_v = np.linalg.norm(Vk @ N - rhs) / max(np.linalg.norm(rhs), 1e-300)
        res[h] = max(cost[h, k], res_v)
        R[h * dv:(h + 1) * dv, k * dv:(k + 1) * dv] = (lam[h, k] * N).T
    return np.kron(P, R), res, margin, None


def value_space_action(layer: AttentionLayer, P: np.ndarray, C: np.ndarray, samples: int = 256, seed: int = 0) -> dict:
    """The action of a group element on the value spaces, fitted on Gaussian inputs.

    Two fits, both by least squares with heads(P X C^T) ~ P heads(X) R^T:

    * unconstrained R (the paper's metric on the heads layer): ``fit_error``;
    * block monomial: for every pair of heads (h, k) the best block B with
      Y_h(P X C^T) ~ P Y_k(X) B^T, then the head permutation minimising the total relative residual
      (linear assignment), giving ``projected`` and ``projected_error``.  The unconstrained fit is
      not unique when head outputs are linearly dependent (e.g. d_k = d, where heads can be
      mixed), so the projection is fitted blockwise rather than read off the unconstrained R.

    Residuals are medians of ||lhs - rhs|| / ||lhs|| over the sample rows; nothing is "verified".

    Parameters
    ----------
    P : token permutation (T x T); C : channel matrix (d x d)
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(samples, layer.tokens, layer.d))
    H, dv = len(layer.query), layer.value[0].shape[1]
    Y = head_outputs(layer, X)
    Yg = head_outputs(layer, np.einsum("ts,nsc,dc->ntd", P, X, C))
    PY = np.einsum("ts,nsk->ntk", P, Y)
    A = PY.reshape(-1, PY.shape[-1])
    B = Yg.reshape(-1, Yg.shape[-1])

    def rel(lhs, rhs):
        res = np.linalg.norm(lhs - rhs, axis=1) / np.maximum(np.linalg.norm(lhs, axis=1), 1e-300)
        return float(np.median(res))

    Rt, *_ = np.linalg.lstsq(A, B, rcond=None)
    blocks, cost = {}, np.zeros((H, H))
    for h in range(H):
        lhs = B[:, h * dv:(h + 1) * dv]
        for k in range(H):
            src = A[:, k * dv:(k + 1) * dv]
            Bt, *_ = np.linalg.lstsq(src, lhs, rcond=None)
            blocks[h, k] = Bt.T
            cost[h, k] = rel(lhs, src @ Bt)
    perm = [int(k) for k in _assign(cost)]
    Rp = np.zeros((H * dv, H * dv))
    for h, k in enumerate(perm):
        Rp[h * dv:(h + 1) * dv, k * dv:(k + 1) * dv] = blocks[h, k]
    return {"R": Rt.T, "projected": Rp, "head_permutation": perm,
            "fit_error": rel(B, A @ Rt), "projected_error": rel(B, A @ Rp.T)}


FLOAT_LAYERS = (AttentionLayer, HeadsLayer)

