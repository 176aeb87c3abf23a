"""Reading torch attention into symeq: ``nn.MultiheadAttention`` and the common hand-written block.

Two kinds of torch module are read as one softmax attention layer
(:func:`symeq.layers.attention.floating.NumericAttention`, docs/attention.md):

* ``nn.MultiheadAttention`` (self-attention, ``batch_first`` or not, with or without the
  in-projection bias; ``kdim = vdim = embed_dim``, no ``add_bias_kv``, no ``add_zero_attn``), given
  alone or as the ``attn`` (or ``mha``, ``attention``, ``self_attn``) attribute of a wrapper module
  whose input is the flattened tokens (N, T*d) or the tokens (N, T, d);
* the hand-written block: a module with ``Linear`` maps named q/k/v (or query/key/value,
  q_proj/k_proj/v_proj, to_q/to_k/to_v), an output ``Linear`` (o, out, out_proj, o_proj, to_out),
  and its number of heads as ``num_heads``, ``heads`` or ``n_heads``.

torch computes, per head h with q = x W_q^T + b_q (and k, v alike)::

    softmax((q_h k_h^T) / sqrt(d_k)) v_h,   concatenated over h, then  . W_o^T + b_o.

In symeq's form (tokens as rows, flattened t*d + c): Q_h = W_q[h]^T, K_h = W_k[h]^T,
V_h = W_v[h]^T, O_h = W_o[:, h]^T.  The biases enter exactly as follows: the score
(x_t Q + b_q)(x_s K + b_k)^T equals x_t^T Q K^T x_s + (K b_q)^T x_s plus terms constant along each
row, which softmax drops (softmax(s + c 1) = softmax(s)); so the head's ``score_bias`` is K_h b_q[h],
and b_k never matters.  The value bias passes through softmax (rows sum to 1) into the constant
output bias c = b_o + sum_h O_h^T b_v[h].

A module's ``forward`` is not inspected: after reading, the module and the symeq layer are
evaluated on seeded Gaussian inputs, and a relative difference above :data:`READ_TOLERANCE` is
refused (the block computes something else: a mask, a positional encoding, another scale).  The
difference found is kept in ``meta["reader_check"]``.

Examples
--------
>>> import pytest
>>> torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
>>> torch.manual_seed(0) and None
>>> mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
>>> layer, meta = read_torch_attention(mha, tokens=3)
>>> layer.scoring, len(layer.query), meta["reader_check"]["max_relative_difference"] < 1e-10
('softmax', 2, True)

``symeq.numeric.models.from_torch`` calls :func:`read_torch_attention` for such modules.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError

__all__ = ["READ_TOLERANCE", "is_attention_module", "read_torch_attention", "attention_layer_from_weights",
           "TokenAttention", "to_torch_attention"]

READ_TOLERANCE = 1e-6
"""Largest relative difference between the torch module and the layer read from it."""

_ATTN_NAMES = ("attn", "mha", "attention", "self_attn")
_Q_NAMES = (("q", "k", "v"), ("query", "key", "value"), ("q_proj", "k_proj", "v_proj"), ("to_q", "to_k", "to_v"),
            ("wq", "wk", "wv"))
_O_NAMES = ("o", "out", "out_proj", "o_proj", "to_out", "wo", "proj")
_H_NAMES = ("num_heads", "heads", "n_heads", "n_head", "nhead")


def _torch():
    from ...errors import EngineMissing

    try:
        import torch
    except ImportError:
        raise EngineMissing("this needs torch: pip install 'symeq[numeric]' (or pip install torch)") from None
    return torch


def _np(t) -> np.ndarray:
    return t.detach().cpu().double().numpy()


def attention_layer_from_weights(tokens: int, heads: int, Wq, Wk, Wv, Wo, bq=None, bk=None, bv=None, bo=None,
                                 scale: float | None = None):
    """A softmax :func:`NumericAttention` from torch-style projection weights (out x in).

    ``Wq, Wk, Wv``: (H d_k) x d, (H d_k) x d, (H d_v) x d; ``Wo``: d_out x (H d_v); biases
    optional; ``scale`` None means 1/sqrt(d_k) (torch's).  b_k is accepted and has no effect.
    """
    from .floating import NumericAttention

    Wq, Wk, Wv, Wo = (np.asarray(w, dtype=float) for w in (Wq, Wk, Wv, Wo))
    if Wq.shape != Wk.shape or Wq.shape[0] % heads or Wv.shape[0] % heads or Wv.shape[1] != Wq.shape[1] \
            or Wo.shape[1] != Wv.shape[0]:
        raise InputError(f"attention weights do not fit {heads} heads: W_q {Wq.shape}, W_k {Wk.shape}, "
                         f"W_v {Wv.shape}, W_o {Wo.shape}")
    dk, dv = Wq.shape[0] // heads, Wv.shape[0] // heads
    Q, K, V, O, sb = [], [], [], [], []
    c = np.zeros(Wo.shape[0]) if bo is None else np.asarray(bo, dtype=float).copy()
    for h in range(heads):
        qs, vs = slice(h * dk, (h + 1) * dk), slice(h * dv, (h + 1) * dv)
        Q.append(Wq[qs].T.copy())
        K.append(Wk[qs].T.copy())
        V.append(Wv[vs].T.copy())
        O.append(Wo[:, vs].T.copy())
        sb.append(None if bq is None else K[-1] @ np.asarray(bq, dtype=float)[qs])
        if bv is not None:
            c = c + O[-1].T @ np.asarray(bv, dtype=float)[vs]
    sb = None if all(b is None for b in sb) else sb
    return NumericAttention(tokens, Q, K, V, O, "softmax", scale, sb, c if np.any(c) else None)


def _find(module, names):
    for n in names:
        sub = getattr(module, n, None)
        if sub is not None:
            return n, sub
    return None, None


def _mha_of(module):
    torch = _torch()
    if isinstance(module, torch.nn.MultiheadAttention):
        return module
    _, sub = _find(module, _ATTN_NAMES)
    return sub if isinstance(sub, torch.nn.MultiheadAttention) else None


def _block_parts(module):
    torch = _torch()
    for names in _Q_NAMES:
        mods = [getattr(module, n, None) for n in names]
        if all(isinstance(m, torch.nn.Linear) for m in mods):
            break
    else:
        return None
    _, out = _find(module, _O_NAMES)
    if isinstance(out, torch.nn.Sequential) and len(out) >= 1 and isinstance(out[0], torch.nn.Linear) \
            and all(type(m).__name__ in ("Dropout", "Identity") for m in list(out)[1:]):
        out = out[0]
    if not isinstance(out, torch.nn.Linear):
        return None
    _, H = _find(module, _H_NAMES)
    return mods, out, H


def is_attention_module(module) -> bool:
    """Whether :func:`read_torch_attention` reads this module (MHA, a wrapper of one, or the block)."""
    try:
        torch = _torch()
    except InputError:
        return False
    if not isinstance(module, torch.nn.Module) or isinstance(module, torch.nn.Sequential):
        return False
    return _mha_of(module) is not None or _block_parts(module) is not None


def _read(module, tokens: int):
    """(layer, how the module is called: "mha" or "module", batch_first)."""
    mha = _mha_of(module)
    if mha is not None:
        if not getattr(mha, "_qkv_same_embed_dim", True):
            raise InputError("nn.MultiheadAttention with kdim or vdim other than embed_dim is not read: symeq reads "
                             "self-attention, where queries, keys and values are the same tokens")
        if mha.bias_k is not None or mha.bias_v is not None:
            raise InputError("nn.MultiheadAttention(add_bias_kv=True) appends a learned token: not read")
        if mha.add_zero_attn:
            raise InputError("nn.MultiheadAttention(add_zero_attn=True) appends a zero token: not read")
        E, H = mha.embed_dim, mha.num_heads
        W = _np(mha.in_proj_weight)
        b = None if mha.in_proj_bias is None else _np(mha.in_proj_bias)
        Wo = _np(mha.out_proj.weight)
        bo = None if mha.out_proj.bias is None else _np(mha.out_proj.bias)
        layer = attention_layer_from_weights(tokens, H, W[:E], W[E:2 * E], W[2 * E:], Wo,
                                             None if b is None else b[:E], None if b is None else b[E:2 * E],
                                             None if b is None else b[2 * E:], bo)
        return layer, ("mha" if module is mha else "module"), bool(mha.batch_first), mha
    parts = _block_parts(module)
    if parts is None:
        raise InputError(f"{type(module).__name__} is not an attention module symeq reads: give an "
                         "nn.MultiheadAttention (or a module holding one as .attn), or a block with Linear q/k/v "
                         f"({', '.join('/'.join(n) for n in _Q_NAMES)}), an output Linear ({', '.join(_O_NAMES)}) "
                         f"and its number of heads ({', '.join(_H_NAMES)})")
    (q, k, v), out, H = parts
    if not isinstance(H, int) or isinstance(H, bool) or H < 1:
        raise InputError(f"{type(module).__name__}: the number of heads must be an attribute "
                         f"({', '.join(_H_NAMES)}), got {H!r}")
    bias = lambda m: None if m.bias is None else _np(m.bias)  # noqa: E731
    layer = attention_layer_from_weights(tokens, H, _np(q.weight), _np(k.weight), _np(v.weight), _np(out.weight),
                                         bias(q), bias(k), bias(v), bias(out))
    return layer, "module", True, None


def _run_torch(module, how: str, batch_first: bool, X: np.ndarray, T: int, d: int) -> np.ndarray:
    torch = _torch()
    x = torch.tensor(X, dtype=torch.float64)
    was = module.training
    dtype = next((p.dtype for p in module.parameters()), torch.float32)
    module.eval()
    try:
        with torch.no_grad():
            m64 = module.double()
            if how == "mha":
                t = x.reshape(-1, T, d)
                t = t if batch_first else t.transpose(0, 1)
                y = m64(t, t, t, need_weights=False)[0]
                y = y if batch_first else y.transpose(0, 1)
            else:
                try:
                    y = m64(x)
                except Exception:  # a block taking the tokens (N, T, d)
                    y = m64(x.reshape(-1, T, d))
                if isinstance(y, tuple):
                    y = y[0]
            return y.reshape(X.shape[0], -1).cpu().numpy()
    finally:
        module.to(dtype)
        module.train(was)


def read_torch_attention(module, tokens: int | None = None, input_shape=None, samples: int = 64, seed: int = 0):
    """(layer, meta): the softmax :func:`~symeq.layers.attention.floating.NumericAttention` read from torch,
    and what the reader checked.

    ``tokens`` (or ``input_shape = (T, d)``, or a ``tokens`` attribute of the module) is the number
    of tokens T of the flattened input (N, T*d).  The read layer is checked against the module on
    ``samples`` seeded Gaussian inputs (float64); a relative difference above
    :data:`READ_TOLERANCE` is refused with the difference found.
    """
    if tokens is None and input_shape is not None:
        shape = tuple(int(v) for v in input_shape)
        if len(shape) != 2:
            raise InputError(f"an attention module's input_shape is (tokens, d), got {input_shape!r}")
        tokens = shape[0]
    tokens = tokens if tokens is not None else getattr(module, "tokens", None)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise InputError("reading an attention module needs the number of tokens: tokens=T, input_shape=(T, d), "
                         "or a 'tokens' attribute on the module")
    layer, how, batch_first, _ = _read(module, tokens)
    T, d = tokens, layer.d
    X = np.random.default_rng(seed).standard_normal((samples, T * d))
    try:
        ref = _run_torch(module, how, batch_first, X, T, d)
    except Exception as e:  # the module's own forward failed on (N, T*d) and (N, T, d) inputs
        raise InputError(f"{type(module).__name__}: calling the module on {samples} inputs of {T} tokens x {d} "
                         f"failed ({type(e).__name__}: {e})") from None
    got = layer(X)
    if ref.shape != got.shape:
        raise InputError(f"{type(module).__name__}: the module returns {ref.shape[1]} values per input, the attention "
                         f"read from its weights {got.shape[1]} (not a plain attention block)")
    rel = float(np.max(np.linalg.norm(ref - got, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-300)))
    if not rel <= READ_TOLERANCE:
        raise InputError(f"{type(module).__name__}: the module does not compute standard softmax multi-head "
                         f"attention of its weights (relative difference {rel:.3g} > {READ_TOLERANCE:g} on {samples} "
                         "seeded inputs: a mask, a positional encoding, dropout in training mode or another scale?)")
    meta = {"reader_check": {"samples": samples, "seed": seed, "max_relative_difference": rel},
            "source": f"torch {type(module).__name__}"}
    return layer, meta


def TokenAttention(tokens: int, d: int, heads: int, bias: bool = True, batch_first: bool = True):
    """A torch module: flattened tokens (N, T*d) -> nn.MultiheadAttention self-attention -> (N, T*d).

    The one-layer attention autoencoder of ``symeq experiment attention``; exported with
    ``torch.onnx.export`` it gives the subgraph :mod:`symeq.layers.attention.onnx` reads.
    """
    torch = _torch()

    class _TokenAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = tokens
            self.attn = torch.nn.MultiheadAttention(d, heads, bias=bias, batch_first=batch_first)

        def forward(self, x):
            X = x.reshape(x.shape[0], self.tokens, -1)
            if not self.attn.batch_first:
                X = X.transpose(0, 1)
            Y = self.attn(X, X, X, need_weights=False)[0]
            if not self.attn.batch_first:
                Y = Y.transpose(0, 1)
            return Y.reshape(x.shape[0], -1)

    return _TokenAttention()


def to_torch_attention(layer, batch_first: bool = True):
    """A :func:`TokenAttention` module computing the softmax layer ``layer`` (NumericAttention).

    Needs torch's shapes: d_k = d_v = d / H, d_out = d, the default scale, and every score bias
    of the form K_h b_q (solved by least squares, refused when the residual is above 1e-9
    relative); the output bias becomes ``out_proj.bias`` (value and key biases 0).
    """
    torch = _torch()
    H, d = len(layer.query), layer.d
    dk, dv = layer.query[0].shape[1], layer.value[0].shape[1]
    if layer.scoring != "softmax" or layer.scale is not None or d % H or dk != d // H or dv != d // H \
            or layer.d_out != d:
        raise InputError(f"this attention layer is not an nn.MultiheadAttention (needs softmax with the default scale, "
                         f"d_k = d_v = d/H and d_out = d; got d = {d}, H = {H}, d_k = {dk}, d_v = {dv}, "
                         f"d_out = {layer.d_out})")
    bq = np.zeros(d)
    for h in range(H):
        b = np.zeros(d) if layer.score_bias is None or layer.score_bias[h] is None else layer.score_bias[h]
        q = np.linalg.lstsq(layer.key[h], b, rcond=None)[0]
        if np.linalg.norm(layer.key[h] @ q - b) > 1e-9 * max(np.linalg.norm(b), 1e-300) and np.any(b):
            raise InputError(f"head {h + 1}: its score bias is not K_h b_q for any query bias (not an "
                             "nn.MultiheadAttention)")
        bq[h * dk:(h + 1) * dk] = q
    m = TokenAttention(layer.tokens, d, H, bias=True, batch_first=batch_first)
    W = np.vstack([np.hstack(layer.query).T, np.hstack(layer.key).T, np.hstack(layer.value).T])
    with torch.no_grad():
        m.attn.in_proj_weight.copy_(torch.tensor(W))
        m.attn.in_proj_bias.copy_(torch.tensor(np.concatenate([bq, np.zeros(2 * d)])))
        m.attn.out_proj.weight.copy_(torch.tensor(np.vstack(layer.out).T))
        m.attn.out_proj.bias.copy_(torch.tensor(np.zeros(d) if layer.bias is None else layer.bias))
    return m.eval()


def read_torch_model(module, input_shape=None):
    """The kind's reader of a whole torch module (:func:`symeq.numeric.models.kind_model_readers`):
    ``(layer, meta)`` of an ``nn.MultiheadAttention``, a wrapper of one or the hand-written block
    (:func:`read_torch_attention`), or None for any other module."""
    if not is_attention_module(module):
        return None
    return read_torch_attention(module, input_shape=input_shape)
