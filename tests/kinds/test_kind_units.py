"""One generic test body over every layer kind x number backend (issue 26, item 8).

The kinds come from symeq's registry (``symeq.layers.registry.kind_names``), the instances from
tests/kinds/kind_instances.py (a kind with no builder there fails here by name).  For each kind:

* the layer protocol (symeq/layers/base.py) on the exact layer and its float64 twin;
* parity: the float twin gives the exact forward to 1e-12 (real activations: the float value lies in
  the exact layer's arb ball), and torch (float64) gives the float forward;
* the model file: write, read, the same forward exactly, the same digest (``symeq.digest``), and a
  changed number changes the digest; the float reader gives the float twin's forward;
* ``.npz`` and ONNX: write and read back, the same forward (where the format holds the kind; a
  format that does not is refused with an InputError, and the test is skipped with its message);
* the Jacobian rows of the rank method (symeq/fibre/jacobian.py), lifted from mod p to Q, against
  central finite differences of the float forward, where the kind declares ``jacobian-rank``;
* theta -> theta^g with the identity action gives theta back: the matching of actions finds the
  identity, the exact check accepts it, and the adjoint parameters are theta's.

A capability a kind lacks is skipped with a reason that names the kind.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from flint import arb, fmpq, fmpq_mat

from kind_instances import BUILDERS, JACOBIAN_VARIANTS, kind_schema, rational_points, registered_kinds, supports, \
    to_float
from symeq.digest import layers_digest
from symeq.errors import InputError, NotExactError
from symeq.io import model_from_json, model_to_json
from symeq.layers.base import Layer, LayerBase
from symeq.numbers import identity, mat_rows

KINDS = registered_kinds()
BACKENDS = ("exact", "float64")
SEED = 3


def _instances(kind: str):
    builder = BUILDERS.get(kind)
    if builder is None:
        pytest.fail(f"layer kind {kind!r} is registered in symeq but tests/kinds/kind_instances.py has no instance "
                    "builder for it: declare examples(seed) on its class, or add a builder to BUILDERS (the generic "
                    "tests then cover it)")
    inst = builder.models(SEED)
    assert inst, f"the {kind} builder made no instances"
    for variant, model, i in inst:
        assert model.layers[i].kind == kind, (kind, variant, model.layers[i].kind)
    return inst


def _float_model(model):
    from symeq.numeric import from_exact

    return from_exact(model)


def _backend_layers(kind: str, backend: str):
    """(variant, model, exact layer, the layer on ``backend``: the exact one or its float twin) of each
    instance of the kind."""
    for variant, model, i in _instances(kind):
        exact = model.layers[i]
        yield variant, model, exact, exact if backend == "exact" else _float_model(model).layers[i]


def _close(a, b, tol=1e-12) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = float(np.max(np.abs(a - b) / (1.0 + np.abs(b)))) if a.size else 0.0
    assert err <= tol, f"relative error {err:.3g} > {tol:g}"
    return err


def _exact_forward(layer, X):
    """The exact layer on X, or None when its activation has no rational values there (real ones)."""
    try:
        return layer.forward(X)
    except NotExactError:
        return None


# -- the registry and the builders ----------------------------------------------------------------------

def test_every_registered_kind_has_a_builder():
    missing = [k for k in KINDS if k not in BUILDERS]
    assert not missing, f"registered layer kinds without a builder in tests/kinds/kind_instances.py: {missing}"
    assert {"dense", "conv2d", "attention", "heads"} <= set(KINDS)  # the kinds of today, all under test


def test_an_unknown_kind_fails_the_generic_tests(monkeypatch):
    """A kind added to the registry without a builder is not silently left out."""
    monkeypatch.delitem(BUILDERS, "dense")
    with pytest.raises(pytest.fail.Exception, match="'dense' is registered"):
        _instances("dense")


# -- the layer protocol -----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_layer_protocol(kind, backend):
    for variant, model, exact, layer in _backend_layers(kind, backend):
        assert isinstance(layer, Layer if backend == "exact" else LayerBase), (kind, variant)
        assert type(layer).kind == layer.kind == kind  # a class attribute
        assert (layer.in_dim, layer.out_dim) == (exact.in_dim, exact.out_dim)
        assert f"{layer.in_dim}->{layer.out_dim}" in layer.label, layer.label
        assert isinstance(layer.hidden_label, str) and layer.hidden_label
        name = layer.latent_group_name
        assert name is None or (isinstance(name, str) and name)
        # both backends name the layer and its spaces alike (the exact lightning attention layer says
        # "attention", its float twin "lightning attention": the one difference, compared without it)
        assert (layer.hidden_label, name) == (exact.hidden_label, exact.latent_group_name), (kind, variant)
        assert layer.label.removeprefix("lightning ") == exact.label.removeprefix("lightning "), (kind, variant)
        X = rational_points(layer.in_dim, 3, seed=1)
        if backend == "exact":
            Y = _exact_forward(layer, X)
            if Y is not None:
                assert (Y.nrows(), Y.ncols()) == (layer.out_dim, 3)
        else:
            Y = layer.forward(to_float(X))
            assert Y.shape == (3, layer.out_dim) and np.all(np.isfinite(Y))


# -- parity between the backends ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_parity_exact_float64(kind):
    """The float twin of an exact layer gives the exact forward (1e-12); without rational values
    (real activations) the float value lies in the exact layer's arb ball."""
    checked = 0
    for variant, model, i in _instances(kind):
        exact, twin = model.layers[i], _float_model(model).layers[i]
        X = rational_points(exact.in_dim, 4, seed=2)
        Y = _exact_forward(exact, X)
        F = twin.forward(to_float(X))
        if Y is not None:
            _close(F, to_float(Y))
            checked += 1
            continue
        if not hasattr(exact, "ball_forward"):
            pytest.skip(f"{kind} layers ({variant}) have no rational values and no ball forward")
        for p, col in enumerate(mat_rows(X.transpose())):
            balls = exact.ball_forward(list(col))
            for b, f in zip(balls, F[p]):
                assert (b - arb(float(f))).contains(0) or abs(float(b.mid()) - f) <= 1e-12 * (1 + abs(f)), \
                    (kind, variant, b, f)
        checked += 1
    assert checked


@pytest.mark.parametrize("kind", KINDS)
def test_parity_float64_torch(kind):
    """The float model as torch (float64) gives the numpy forward, and reads back from torch."""
    torch = pytest.importorskip("torch", reason="the torch backend needs torch: pip install 'symeq[numeric]'")
    from symeq.numeric import from_torch

    for variant, model, i in _instances(kind):
        fm = _float_model(model)
        try:
            seq = fm.to_torch()
        except InputError as e:
            pytest.skip(f"{kind} layers ({variant}): no torch module: {e}")
        X = to_float(rational_points(fm.input_dim, 5, seed=4))
        with torch.no_grad():
            T = seq(torch.from_numpy(X)).numpy()
        _close(T, fm.forward(X))
        back = from_torch(seq)
        _close(back.forward(X), fm.forward(X))


# -- formats ------------------------------------------------------------------------------------------------

def _has_file_form(kind: str):
    schema = kind_schema(kind)
    if schema is not None and not schema:
        pytest.skip(f"{kind} layers have no model-file form (the kind declares no schema: it exists only "
                    "in a model's chain)")


def _first_number(obj):
    """A path to the first number string of a model file's layers (to change it)."""
    if isinstance(obj, str):
        try:
            Fraction(obj)
            return ()
        except ValueError:
            return None
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        if k in ("type", "activation"):
            continue
        sub = _first_number(v)
        if sub is not None:
            return (k,) + sub
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_model_file_round_trip(kind):
    from symeq.numeric.models import model_from_json as float_model_from_json

    _has_file_form(kind)
    for variant, model, i in _instances(kind):
        data = model_to_json(model)
        back = model_from_json(json.loads(json.dumps(data)))
        assert [l.kind for l in back.layers] == [l.kind for l in model.layers]
        X = rational_points(model.input_dim, 3, seed=5)
        Y = _exact_forward(model, X)
        if Y is not None:
            assert back.forward(X) == Y, (kind, variant)
        again = model_to_json(back)
        assert again["layers"] == data["layers"], (kind, variant)
        d0 = layers_digest(data["layers"], data["input_dim"])
        assert layers_digest(again["layers"], again["input_dim"]) == d0
        # the digest sees the parameters: one changed number changes it
        path = _first_number(data["layers"])
        assert path is not None, (kind, variant)
        changed = json.loads(json.dumps(data["layers"]))
        node = changed
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = str(Fraction(node[path[-1]]) + Fraction(1, 7))
        assert layers_digest(changed, data["input_dim"]) != d0
        # the float reader of the same file: the float twin's forward
        fx = to_float(X)
        _close(float_model_from_json(json.loads(json.dumps(data))).forward(fx), _float_model(model).forward(fx))


@pytest.mark.parametrize("kind", KINDS)
def test_npz_round_trip(kind, tmp_path):
    from symeq.numeric.models import load_npz, save_npz

    for variant, model, i in _instances(kind):
        fm = _float_model(model)
        p = tmp_path / f"{kind}-{variant}.npz"
        try:
            save_npz(fm, p)
        except InputError as e:
            pytest.skip(f"{kind} layers ({variant}): the .npz layout refuses them: {e}")
        back = load_npz(p)
        assert [l.kind for l in back.layers] == [l.kind for l in fm.layers]
        X = to_float(rational_points(fm.input_dim, 4, seed=6))
        assert np.array_equal(back.forward(X), fm.forward(X)), (kind, variant)


@pytest.mark.parametrize("kind", KINDS)
def test_onnx_round_trip(kind, tmp_path):
    pytest.importorskip("onnx", reason="ONNX export needs onnx: pip install 'symeq[onnx]'")
    from symeq.numeric.onnx_io import export_onnx, load_onnx

    for variant, model, i in _instances(kind):
        p = tmp_path / f"{kind}-{variant}.onnx"
        try:
            export_onnx(model, p)
        except InputError as e:
            pytest.skip(f"{kind} layers ({variant}): ONNX export refuses them: {e}")
        back = load_onnx(p)
        fm = _float_model(model)
        X = to_float(rational_points(fm.input_dim, 4, seed=7))
        _close(back.forward(X), fm.forward(X))
        assert back.input_dim == fm.input_dim and back.output_dim == fm.output_dim


# -- Jacobian rows ------------------------------------------------------------------------------------------

def _lift(r: int, p: int) -> Fraction:
    """The rational a/b = r mod p with |a|, |b| <= sqrt(p / 2) (rational reconstruction); AssertionError if none."""
    bound = int((p // 2) ** 0.5)
    r0, r1, s0, s1 = p, r % p, 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1, s0, s1 = r1, r0 - q * r1, s1, s0 - q * s1
    assert s1 != 0 and abs(s1) <= bound and (r1 - r % p * s1) % p == 0, f"{r} mod {p} is no small rational"
    return Fraction(r1, s1)


def _jacobian_rows(model, points):
    """The rank method's rows of J (point-major, outputs per point) at rational points, lifted to Q."""
    from symeq.budget import Deadline
    from symeq.fibre import jacobian as jac

    twins = jac._twins(model)
    J = jac._jacobian(twins, jac._points_mod(points), Deadline(None))
    return twins, np.array([[float(_lift(int(x), jac.PRIME)) for x in row] for row in J])


@pytest.mark.parametrize("kind", KINDS)
def test_jacobian_rows_against_finite_differences(kind):
    """J's rows (reverse mode mod p, lifted to Q) equal central differences of the float forward, for
    every parameter of a model holding the kind (perturbed in the rows' own layout)."""
    inst = _instances(kind)
    if supports(inst[0][1].layers[inst[0][2]], "jacobian-rank") is False:
        pytest.skip(f"{kind} layers do not declare jacobian-rank (no rows for the rank method)")
    wanted = JACOBIAN_VARIANTS.get(kind)
    chosen = [(v, m) for v, m, _ in inst if wanted is None or v in wanted]
    assert chosen, (kind, wanted)
    for variant, model in chosen:
        _check_rows(kind, model)


def _check_rows(kind, model):
    import random

    rng = random.Random(8)
    points = [[Fraction(rng.randint(-2, 2), rng.choice((1, 2))) for _ in range(model.input_dim)] for _ in range(2)]
    twins, J = _jacobian_rows(model, points)
    assert J.shape[1] == sum(t.n_params for t in twins) and J.shape[0] == 2 * model.output_dim
    X = np.array([[float(x) for x in pt] for pt in points])
    h = fmpq(1, 1 << 14)
    col = 0
    for li, t in enumerate(twins):
        layer = model.layers[li]
        setter = BUILDERS[layer.kind].set_parameters
        assert setter is not None, f"{layer.kind} has Jacobian rows but its builder cannot set parameters"
        values = [fmpq(v) for v in t.values()]
        assert setter(layer, values, getattr(t, "bias", False)).forward(rational_points(layer.in_dim, 2, 9)) == \
            layer.forward(rational_points(layer.in_dim, 2, 9))  # the setter rebuilds the same layer
        for k in range(len(values)):
            fwd = []
            for sign in (1, -1):
                v = list(values)
                v[k] += sign * h
                layers = list(model.layers)
                layers[li] = setter(layer, v, getattr(t, "bias", False))
                m2 = type(model)(model.input_dim, layers, None, model.name)
                fwd.append(_float_model(m2).forward(X))
            fd = ((fwd[0] - fwd[1]) / (2 * float(h))).reshape(-1)  # point-major, outputs per point
            scale = 1.0 + np.max(np.abs(J[:, col + k]))
            assert np.max(np.abs(fd - J[:, col + k])) <= 1e-5 * scale, (kind, layer.kind, li, k)
        col += len(values)
    assert col == J.shape[1]


# -- theta -> theta^g with the identity ---------------------------------------------------------------------

def _is_identity(rho, n: int) -> bool:
    from symeq.numeric.monomial import MonomialAction

    if isinstance(rho, fmpq_mat):
        return rho == identity(n)
    if isinstance(rho, MonomialAction):
        return np.array_equal(rho.cols, np.arange(n)) and np.allclose(rho.vals, 1.0) and \
            np.allclose(rho.offset_or_zero, 0.0)
    if hasattr(rho, "to_matrix"):  # a conv action (channel action x pixel permutation)
        return rho.to_matrix() == identity(n)
    return bool(np.allclose(np.asarray(rho, dtype=np.float64), np.eye(n), atol=1e-9))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_identity_action_gives_theta_back(kind, backend):
    from symeq.layerwise import adjoint_parameters

    for variant, model, exact, layer in _backend_layers(kind, backend):
        n_in, n_out = layer.in_dim, layer.out_dim
        I_in = identity(n_in) if backend == "exact" else np.eye(n_in)
        try:
            tied, cands = layer.match_action(I_in, reference=layer.match_reference())
        except InputError as e:
            pytest.skip(f"{kind} layers ({variant}) are not matched themselves: {e}")
        cands = list(cands)
        assert cands, (kind, variant)
        rho = cands[0][0]
        assert _is_identity(rho, n_out), (kind, variant, backend)
        if backend == "exact":
            off = cands[0][1]
            assert off is None or all(x == 0 for x in off)
            holds, detail = exact.check_action(identity(n_in), identity(n_out))
            assert holds, detail
            if hasattr(exact, "transformed_rows"):  # a convolution: theta^g's kernels under (P, R) = (1, 1)
                from symeq.layers.conv import as_conv_action

                C, H, W = exact.in_shape
                P = as_conv_action(identity(n_in), C, H, W)
                assert P is not None and P.transform is not None
                assert [list(r) for r in exact.transformed_rows(P, P.transform)] == [list(r) for r in exact.rows]
            # theta^g = theta by the adjunction, for chains whose every layer has weights (not pooling)
            if all(hasattr(l, "weight") for l in model.layers) and model.layers[0].kind != "heads":
                theta = adjoint_parameters(model, identity(model.input_dim), identity(model.output_dim))
                assert [(rows, list(b)) for rows, b in theta] == \
                    [(mat_rows(l.weight), list(l.bias)) for l in model.layers]


# -- the generic bodies can fail ------------------------------------------------------------------------------

def test_a_wrong_float_forward_fails_parity(monkeypatch):
    """A float twin whose forward is off by a relative 1e-9 fails the parity body."""
    import symeq.layers.conv.floating as floating

    good = floating.pre_activation
    monkeypatch.setattr(floating, "pre_activation", lambda layer, X, numpy_pre: good(layer, X, numpy_pre) * (1 + 1e-9))
    with pytest.raises(AssertionError, match="relative error"):
        test_parity_exact_float64("conv2d")


def test_wrong_jacobian_rows_fail_the_finite_differences(monkeypatch):
    """Rows computed with a wrong derivative of the activation (sigma' + 1) fail against the float forward."""
    from symeq.backends import Modular

    good = Modular.activation

    def wrong(self, act):
        pair = good(self, act)
        if pair is None:
            return None
        c, dc = pair
        return c, [(dc[0] + 1) % self.p] + list(dc[1:])

    monkeypatch.setattr(Modular, "activation", wrong)
    with pytest.raises(AssertionError):
        test_jacobian_rows_against_finite_differences("dense")


def test_a_writer_that_drops_a_number_fails_the_round_trip(monkeypatch):
    """A model-file writer that changes a parameter (the first bias plus 1) fails the round trip."""
    import symeq.io as io

    good = io.model_to_json

    def lossy(model, *a, **k):
        data = good(model, *a, **k)
        b = data["layers"][0]["bias"]
        data["layers"][0]["bias"] = [str(Fraction(b[0]) + 1)] + list(b[1:])
        return data

    monkeypatch.setattr(__import__(__name__), "model_to_json", lossy)
    with pytest.raises(AssertionError):
        test_model_file_round_trip("dense")
