"""The checker of ``symeq-certificate/1`` and ``/2`` (Theorem 4.1 at theta): the actions' reading, the
layer identities f_i(rho_{i-1}(g) x) = rho_i(g) f_i(x) identically in x, the parameters theta' and their
digest, the homomorphism of the generated group, and (``not-equivariant``) the witness, re-proved by
:mod:`symeq_check.intervals`.  With the modules of :data:`symeq_check.KERNEL` this is the kernel a
``layerwise-equivariant`` verdict rests on.
"""
from __future__ import annotations

from fractions import Fraction
from math import comb

from ._numbers import CheckError, Sparse, _count, _dict, _fmt, _indices, _matrix, _short, _vector
from .activations import _neuron_failure
from .algebra import (_homomorphism, _invertible, _matvec, _monomial_failure, _smatvec, _sparse, _sparse_times,
    _times_sparse)
from .attention import _Heads, _block_monomial_failure, _softmax_heads_failure
from .conv import _check_conv_layerwise, _conv_canonical_form, _out_dim
from .digest import _digest_differs
from .evaluate import MAX_LATTICE, _degree, _evaluate, _lattice, _lattice_size, _same_function_failure
from .intervals import _check_witness
from .model import _Layer, _chain, _group, _layers, _model
from .real import _Real, _positive_only
from .report import CheckReport
from .schema import (ACTION_KEYS, CERT_FORMAT, CERT_KEYS, CERT_REQUIRED, CHECKS_KEYS, EQUIVARIANCE_KEYS,
    PARAMETER_KEYS, PARAMS_DIFFER, UNVERIFIABLE, VERIFIABLE, check_keys)


def _layer_failure(layer: _Layer, p: Sparse, q: Sparse, last: bool, c_in=None, c_out=None) -> str | None:
    """Why f(P x + c_in) == Q f(x) + c_out fails (offsets: affine latent actions), or None.

    P and Q are sparse; q is monomial for a hidden layer (checked before), so that row j of the
    identity reads sigma((W P)_j x + b_j) = q_j sigma(W_k x + b_k) for the one k with Q_jk = q_j.
    """
    wp = _times_sparse(layer.weight, p)
    bias = layer.bias if c_in is None else tuple(b + y for b, y in zip(layer.bias, _matvec(layer.weight, c_in)))
    if last:
        if wp != _sparse_times(q, layer.weight):
            return "W P != Q W"
        qb = _smatvec(q, layer.bias)
        if c_out is not None:
            qb = tuple(x + y for x, y in zip(qb, c_out))
        return None if qb == bias else "b + W c != Q b" if c_in is not None else "b != Q b"
    for j, row in enumerate(q):
        k, factor = row[0]
        o = c_out[j] if c_out is not None else Fraction(0)
        why = _neuron_failure(layer.act, wp[j], layer.weight[k], bias[j], layer.bias[k], factor, o)
        if why:
            return f"neuron {j + 1} (sent to neuron {k + 1} with factor {factor}): {why}"
    return None


def _action(value, n: int, where: str, layer, sparse_format: bool):
    """One latent action as sparse rows, or a string saying why it cannot be one (a rejection).

    Format 1 gives a dense n x n matrix. Format 2 gives an object: ``{"kind": "monomial",
    "source": [s_0 ..], "factor": [c_0 ..]}`` (row j holds c_j in column s_j), ``{"kind":
    "block-monomial", "tokens": [..], "heads": [..], "blocks": [B_0 ..]}`` (attention heads:
    P (x) R with P[t][tokens[t]] = 1 and block row h of R holding B_h in block column heads[h]),
    or ``{"kind": "dense", "matrix": [[..]]}``. Whether the result really is monomial (or block
    monomial) is checked afterwards, on the sparse rows, for every form alike.
    """
    if not sparse_format:
        m = _matrix(value, where)
        if len(m) != n or len(m[0]) != n:
            return f"latent action must be {n} x {n}"
        return _sparse(m)
    kind = _dict(value, where).get("kind")
    if isinstance(kind, str) and kind in ACTION_KEYS:
        check_keys(value, where, ACTION_KEYS[kind], ACTION_KEYS[kind])
    if kind == "dense":
        m = _matrix(value.get("matrix"), f"{where} matrix")
        if len(m) != n or len(m[0]) != n:
            return f"latent action must be {n} x {n}"
        return _sparse(m)
    if kind == "monomial":
        source = value.get("source")
        if not isinstance(source, list) or len(source) != n:
            return f"latent action must be {n} x {n} ('source' needs {n} entries)"
        source = _indices(source, n, f"{where} source")
        factor = _vector(value.get("factor"), f"{where} factor", n)
        return tuple(((c, x),) if x else () for c, x in zip(source, factor))
    if kind == "block-monomial":
        if not layer.head_blocks:
            return "a block-monomial action belongs to attention heads only"
        T, H, dv = layer.tokens, len(layer.scores), layer.dv
        w = H * dv
        tokens = _indices(value.get("tokens"), T, f"{where} tokens")
        heads = _indices(value.get("heads"), H, f"{where} heads")
        blocks = value.get("blocks")
        if not isinstance(blocks, list) or len(blocks) != H:
            raise CheckError(f"{where}: 'blocks' must list one {dv} x {dv} block per head ({H})")
        blocks = [_matrix(b, f"{where} block {h}", dv, dv) for h, b in enumerate(blocks)]
        return tuple(tuple((tokens[t] * w + heads[h] * dv + c, blocks[h][a][c]) for c in range(dv)
                           if blocks[h][a][c])
                     for t in range(T) for h in range(H) for a in range(dv))
    raise CheckError(f"{where}: unknown action kind {_short(kind)} (monomial, block-monomial or dense)")


def _check_layerwise(report: CheckReport, cert: dict, n_in: int, layers: list[_Layer],
                     group: list, cap: int, sparse_format: bool = True) -> None:
    layers = _checked_parameters(report, cert, n_in, layers)
    if layers is None:
        return
    layers = _chain(layers)
    if any(layer.kernels for layer in layers):  # sparse channel-pixel actions
        _check_conv_layerwise(report, cert, layers, group, cap)
        return
    rho = _read_actions(report, cert, layers, group, sparse_format)
    offs = None if rho is None else _read_offsets(report, cert, layers, group)
    if offs is None:
        return
    for g in range(len(group)):
        for i, layer in enumerate(layers, 1):
            _check_one_layer(report, layer, i, g, i == len(layers), rho, offs)
    for g, (p, _) in enumerate(group):
        if not _invertible(p):
            report.reasons.append(f"generator {g + 1}: input matrix is singular (not a group element)")
    if not report.reasons:
        def action(i, g):  # affine y -> M y + c as the augmented matrix [[M, c], [0, 1]]
            m, c = rho[i][g], offs[i][g]
            if c is None:
                return m
            n = len(m)
            return tuple(row + (((n, c[r]),) if c[r] else ()) for r, row in enumerate(m)) + (((n, Fraction(1)),),)
        _homomorphism(report, [tuple(action(i, g) for i in range(len(rho))) for g in range(len(group))], cap)


def _checked_parameters(report: CheckReport, cert: dict, n_in: int, layers: list) -> list | None:
    """The layers the actions are checked on: the model's, or a re-parametrized theta' proven the same
    function; None (a reason or an unverifiable note in ``report``) when the parameters do not stand."""
    params = _dict(cert.get("parameters"), "certificate parameters")
    check_keys(params, "certificate.parameters", *PARAMETER_KEYS)
    digest = params.get("layers_sha256")
    if digest is not None and _digest_differs(report, digest, layers):
        return None
    if params.get("layers") is None and digest is not None and params.get("reparametrized") is not True:
        theta2 = layers  # theta itself, bound to the model by the digest just checked
    else:
        theta2 = _layers(params.get("layers"), n_in, "certificate parameters")
    if theta2 != layers and params.get("reparametrized") is not True:
        report.reasons.append(f"{PARAMS_DIFFER} (and the certificate does not declare a re-parametrization)")
        # without a digest the copy of theta is what names the model; with a matching digest the
        # copy contradicts the certificate's own digest: a tampered certificate (exit 1)
        report.mismatch = digest is None
        return None
    if theta2 == layers:
        report.checks.append(f"parameters: equal to the model's ({len(layers)} layers)")
        return layers
    why = _same_function_failure(layers, theta2, n_in)
    if why and why.startswith(("equality of ReLU", "equality of conv", "equality of functions with max pooling")):
        report.checks.append(f"nothing this checker can re-verify: {why}")
        report.unverifiable = True
        return None
    if why:
        report.reasons.append(f"{PARAMS_DIFFER}: {why}")
        return None
    if all(l.kernels for l in layers) and _conv_canonical_form(layers) == _conv_canonical_form(theta2):
        report.checks.append("parameters: re-parametrized theta' with the model's widths and activations; theta "
                             "and theta' have the same canonical form (dead channels dropped, equal channels "
                             "merged): the same function")
    elif any(isinstance(l.act, _Real) for l in layers):
        report.checks.append("parameters: re-parametrized theta' with the model's widths and activations; theta "
                             "and theta' have the same canonical form (dead neurons dropped, clones merged by the "
                             "identity table): the same function")
    else:
        report.checks.append(f"parameters: re-parametrized theta' with the model's widths and activations; "
                             f"f(x; theta') = f(x; theta) on all {_lattice_size(layers, n_in)} points of the "
                             f"principal lattice of degree {_degree(layers)} (unisolvent): the same function")
    return theta2


def _read_actions(report: CheckReport, cert: dict, layers: list, group: list, sparse_format: bool) -> list | None:
    """rho[i][g]: the input's, each hidden layer's (monomial or block-monomial, checked) and the output's
    action of generator g; None when a reason was given."""
    actions = cert.get("latent_actions")
    if not isinstance(actions, list) or len(actions) != len(layers) - 1:
        report.reasons.append(f"latent_actions must list one entry per hidden layer "
                              f"({len(layers) - 1})")
        return None
    rho = [[_sparse(p) for p, _ in group]]
    for i, (entry, layer) in enumerate(zip(actions, layers), 1):
        n = len(layer.weight)
        if not isinstance(entry, list) or len(entry) != len(group):
            report.reasons.append(f"layer {i}: latent_actions must give one matrix per generator "
                                  f"({len(group)})")
            return None
        mats = [_action(m, n, f"certificate.latent_actions[{i - 1}][{g}]", layer, sparse_format)
                for g, m in enumerate(entry)]
        for g, m in enumerate(mats):
            if isinstance(m, str):
                report.reasons.append(f"layer {i}, generator {g + 1}: {m}")
                return None
            if layer.head_blocks:
                why = _block_monomial_failure(m, layer)
            else:
                why = _monomial_failure(m, layer.act == "relu" or _positive_only(layer.act))
            if why:
                report.reasons.append(f"layer {i}, generator {g + 1}: latent action {why}")
        rho.append(mats)
    rho.append([_sparse(q) for _, q in group])
    return None if report.reasons else rho


def _read_offsets(report: CheckReport, cert: dict, layers: list, group: list) -> list | None:
    """offs[i][g]: the affine part of each space's action of generator g (None: linear); None when a reason
    was given."""
    offsets = cert.get("latent_offsets")
    offs = [[None] * len(group)]
    if offsets is not None:
        if not isinstance(offsets, list) or len(offsets) != len(layers) - 1:
            report.reasons.append(f"latent_offsets must list one entry per hidden layer ({len(layers) - 1})")
            return None
        # a bias-free model's latent groups have no offsets (docs/theory.md): no next bias absorbs them
        bias_free = all(not any(getattr(layer, "bias", ())) for layer in layers)
        if bias_free and any(any(_vector(c, "offset")) for entry in offsets if isinstance(entry, list)
                             for c in entry):
            report.reasons.append("latent_offsets are nonzero but the model is bias-free: its latent groups "
                                  "have no affine part")
            return None
        for i, (entry, layer) in enumerate(zip(offsets, layers), 1):
            if not isinstance(entry, list) or len(entry) != len(group):
                report.reasons.append(f"layer {i}: latent_offsets must give one vector per generator")
                return None
            if layer.head_blocks and any(any(_vector(c, "offset")) for c in entry):
                report.reasons.append(f"layer {i}: attention heads admit no offsets")
                return None
            offs.append([_vector(c, f"latent_offsets layer {i} generator {g + 1}", len(layer.weight))
                         for g, c in enumerate(entry)])
    else:
        offs += [[None] * len(group) for _ in range(len(layers) - 1)]
    offs.append([None] * len(group))
    return offs


def _check_one_layer(report: CheckReport, layer, i: int, g: int, last: bool, rho: list, offs: list) -> None:
    """Layer i's equation for generator g (heads, or sigma(W P x + b) = Q sigma(W x + b)): a check or a reason."""
    if layer.head_blocks:
        soft = layer.scoring == "softmax"
        why = (_softmax_heads_failure if soft else _heads_failure)(layer, rho[i - 1][g], rho[i][g])
        if why:
            report.reasons.append(f"layer {i}, generator {g + 1}: {why}")
        elif soft:
            report.checks.append(f"layer {i}, generator {g + 1}: C^T A_h C = A_pi(h), C^T b_h = b_pi(h), "
                                 f"C^T V_h = V_pi(h) B_h^T exactly for the {len(layer.scores)} softmax heads "
                                 "(softmax(P S P^T) = P softmax(S) P^T): verified")
        else:
            report.checks.append(f"layer {i}, generator {g + 1}: heads(P x) = Q heads(x) on all "
                                 f"{comb(len(rho[0][g]) + 3, 3)} points of the degree-3 principal "
                                 f"lattice (unisolvent): verified ({len(layer.scores)} heads)")
        return
    why = _layer_failure(layer, rho[i - 1][g], rho[i][g], last, offs[i - 1][g], offs[i][g])
    if why:
        report.reasons.append(f"layer {i}, generator {g + 1}: {why}")
    elif last:
        report.checks.append(f"layer {i}, generator {g + 1}: W P = Q W and b = Q b verified "
                             f"(affine output layer, {len(layer.weight)} outputs)")
    else:
        s = "relu" if layer.act == "relu" else "sigma"
        report.checks.append(f"layer {i}, generator {g + 1}: {s}(W P x + b) = Q {s}(W x + b) "
                             f"verified ({layer.label}, {len(layer.weight)} neurons)")


def _heads_failure(layer: _Heads, p: Sparse, q: Sparse) -> str | None:
    """heads(P x) = Q heads(x) for all x: both sides are polynomials of degree <= 3 in x, so
    agreement on the principal lattice of degree 3 (unisolvent) is a proof."""
    n = len(p)
    if comb(n + 3, 3) > MAX_LATTICE:
        return f"the degree-3 lattice in {n} variables is larger than this checker evaluates ({MAX_LATTICE})"
    for x in _lattice(n, 3):
        lhs = _evaluate([layer], _smatvec(p, x))
        rhs = _smatvec(q, _evaluate([layer], x))
        if lhs != rhs:
            return f"heads(P x) != Q heads(x) at x = {_fmt(x)}"
    return None


def check_theorem_certificate(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """The checker of ``symeq-certificate/1`` and ``/2`` (Theorem 4.1 at theta)."""
    n_in, layers, model_group = _model(model)
    check_keys(cert, "certificate", CERT_KEYS, CERT_REQUIRED.get(cert.get("verdict"), ("format", "verdict"))
               if isinstance(cert.get("verdict"), str) else ("format", "verdict"))
    if cert.get("checks") is not None:
        check_keys(_dict(cert["checks"], "certificate checks"), "certificate.checks", *CHECKS_KEYS)
    params = cert.get("parameters")
    if params is not None:  # used for layerwise-equivariant only, read strictly for every verdict
        check_keys(_dict(params, "certificate parameters"), "certificate.parameters", *PARAMETER_KEYS)
        if cert.get("verdict") != "layerwise-equivariant" and params.get("layers") is not None:
            _layers(params["layers"], n_in, "certificate parameters")
    sparse_format = cert.get("format") == CERT_FORMAT
    verdict = cert.get("verdict")
    if verdict not in VERIFIABLE + UNVERIFIABLE:
        raise CheckError(f"certificate: unknown verdict {_short(verdict)}")
    report = CheckReport(None, verdict)
    cert_dim = _count(cert.get("input_dim"), "certificate input_dim", 1)
    if cert_dim != n_in:
        report.reasons.append(f"certificate input_dim {cert_dim} differs from the model's {n_in}")
        report.accepted = False
        report.mismatch = True
        return report
    group = _group(cert.get("group"), n_in, _out_dim(layers[-1]), "certificate group")
    if model_group is not None and model_group != group:
        report.reasons.append("the model's group differs from the certificate's")
        report.mismatch = True
    elif model_group is not None:
        report.checks.append(f"group: the model's group equals the certificate's "
                             f"({len(group)} generators)")
    eq = cert.get("equivariance")
    eq = {} if eq is None else _dict(eq, "certificate equivariance")
    check_keys(eq, "certificate.equivariance", EQUIVARIANCE_KEYS,
               ("witness",) if verdict == "not-equivariant" else ())
    if verdict in UNVERIFIABLE:
        report.checks.append(f"nothing this checker can re-verify: {verdict}")
        report.accepted = False if report.reasons else None
        return report
    expected = verdict == "layerwise-equivariant"
    if eq.get("holds") is not None and eq.get("holds") is not expected:
        report.reasons.append(f"equivariance.holds = {eq.get('holds')} contradicts the verdict")
    if expected:
        _check_layerwise(report, cert, n_in, layers, group, max_group_size, sparse_format)
    else:
        params = cert.get("parameters")
        digest = params.get("layers_sha256") if isinstance(params, dict) else None
        if digest is not None and _digest_differs(report, digest, layers):  # a witness for another model
            pass
        elif (isinstance(params, dict) and params.get("layers") is not None
              and _layers(params.get("layers"), n_in, "certificate parameters") != layers):
            # the witness is re-proved on the model file; a copy of theta that differs from it is
            # another model's certificate (no digest) or contradicts its own digest (tampered)
            report.reasons.append(f"{PARAMS_DIFFER}: the certificate's copy of theta is not the model's")
            report.mismatch = digest is None
        else:
            _check_witness(report, eq, n_in, layers, group)
    report.note_identifiability(cert)
    report.accepted = None if (getattr(report, "unverifiable", False) and not report.reasons) else not report.reasons
    return report
