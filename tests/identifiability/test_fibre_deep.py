"""Deep networks: the Jacobian-factor certificate for two hidden layers (symeq/fibre/deep.py,
docs/identifiability.md "Deep networks"): verdicts, the checker and tampering, the hypotheses that
make it not applicable, and agreement with Gröbner bases where both answer."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import pytest

from symeq.activations import monomial, polynomial, sigmoid_series, tanh_series
from symeq_check import CheckError, check_certificate
from symeq.errors import MemoryLimit, Undetermined
from symeq.cli import main
from symeq.fibre.orbit import compare_with_orbit
from symeq.fibre.tensor import decide, tensor_identifiability
from symeq.io import model_to_json, save_model
from symeq.models import DenseLayer, Model


def _circulant(row):
    """The C_n-equivariant linear map of the regular representation with first row ``row``."""
    n = len(row)
    return [[row[(j - i) % n] for j in range(n)] for i in range(n)]


def _net(n0, weights, acts, biases=None):
    layers = []
    for i, W in enumerate(weights):
        b = biases[i] if biases else [0] * len(W)
        layers.append(DenseLayer(W, b, acts[i] if i < len(acts) else None))
    return Model(n0, layers)


def _check(t, m):
    return check_certificate(json.loads(json.dumps(t.certificate)), json.loads(json.dumps(model_to_json(m))))


# a C_3-equivariant bias-free network: every layer commutes with the cyclic shift of 3 coordinates
C3 = [_circulant([1, 2, -1]), _circulant([2, -1, 3]), _circulant([1, 1, -3])]


def test_equivariant_circulant_network_is_identifiable():
    m = _net(3, C3, [monomial(2), monomial(3)])
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert "Jacobian factors" in t.condition and t.orbit_dimension == 6 and t.orbit_size is None
    assert t.to_json()["method"] == "tensor"
    r = _check(t, m)
    assert r.accepted is True, r.reasons
    # auto stops at the structural certificate: no Gröbner basis is computed
    td, gb = decide(m, method="auto", timeout=30)
    assert td.status == "identifiable" and gb is None


def test_torch_rounded_weights():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3, bias=False), torch.nn.Linear(3, 3, bias=False),
                              torch.nn.Linear(3, 4, bias=False))
    Ws = [[[Fraction(round(float(v) * 16), 16) for v in row] for row in lin.weight.detach()] for lin in net]
    assert all(x != 0 for x in (v for row in Ws[1] for v in row)), "the seed must give a W_2 without zeros"
    m = _net(4, Ws, [monomial(2), monomial(2)])
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert _check(t, m).accepted is True


# ----------------------------------------------------------------------------- not applicable

def test_rounded_until_neurons_tie_is_not_applicable():
    # two first-layer rows that agree after rounding to integers: clones, rank W_1 < n
    raw = [[0.61, 1.01, -2.2], [0.58, 0.98, -1.8], [3.1, -1.2, 0.4]]
    W1 = [[Fraction(round(v)) for v in row] for row in raw]
    assert W1[0] == W1[1]
    m = _net(3, [W1, C3[1], C3[2]], [monomial(2), monomial(2)])
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "rank" in t.reason and "W_1" in t.reason
    assert t.certificate is None


def test_clones_in_second_hidden_layer_are_not_applicable():
    W2 = [[2, -1, 3], [2, -1, 3], [3, 2, -1]]
    t = tensor_identifiability(_net(3, [C3[0], W2, C3[2]], [monomial(2), monomial(2)]))
    assert t.status == "not-applicable" and "W_2" in t.reason


def test_blockwise_kruskal_does_not_compose():
    """The pitfall, exactly: both 2-layer blocks of theta are Kruskal-certified on their own, yet
    theta is not identifiable -- theta' below has the same polynomial map and a first layer that is
    no monomial matrix times theta's.  The deep method must not call it identifiable."""
    I, H = [[1, 0], [0, 1]], [[1, 1], [1, -1]]
    m = _net(2, [I, H, I], [monomial(2), monomial(2)])
    for block in (_net(2, [I, H], [monomial(2)]), _net(2, [H, I], [monomial(2)])):
        assert tensor_identifiability(block).status == "identifiable"
    other = _net(2, [H, H, [[Fraction(1, 4), 0], [Fraction(1, 4), Fraction(-1, 4)]]], [monomial(2), monomial(2)])
    assert other.polynomial_map() == m.polynomial_map()      # (x^2 + y^2)^2 and (x^2 - y^2)^2 both ways
    assert all(x != 0 for row in H for x in row)             # W'_1 = H is not P D W_1 = P D: outside the orbit
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "row 0 of W_2" in t.reason


def test_two_entries_in_a_row_of_w2_is_not_applicable():
    W2 = [[2, -1, 0], [-1, 3, 2], [3, 2, -1]]
    t = tensor_identifiability(_net(3, [C3[0], W2, C3[2]], [monomial(2), monomial(2)]))
    assert t.status == "not-applicable" and "row 0 of W_2" in t.reason


@pytest.mark.parametrize("what, model, phrase", [
    ("one entry and a bias", _net(2, [[[1, 2], [3, -1]], [[2, 0], [0, -3]], [[1, 2], [-1, 1]]],
                                  [monomial(2), monomial(2)], [[1, -1], [1, 0], [0, 1]]), "one nonzero entry"),
    ("tanh, three hidden layers, 3^(3-2) = 3", _net(3, C3 + [C3[0]], [tanh_series(3)] * 3), "m_1^1 = m_2"),
    ("tanh, W_2 row of two entries", _net(3, [C3[0], [[2, -1, 0], [-1, 3, 2], [3, 2, -1]], C3[2]],
                                          [tanh_series(3)] * 2, [[1, 1, 1], [1, 1, 1], [0, 0, 0]]), "row 0 of W_2"),
    ("scalar output", _net(3, C3[:2] + [[[1, 2, 3]]], [monomial(2), monomial(2)]), "widths"),
    ("wider hidden layer", _net(2, [[[1, 2], [2, 1], [1, -1]], C3[1], C3[2]], [monomial(2), monomial(2)]), "widths"),
    ("three hidden layers, r_1^(3-2) = r_2", _net(3, C3 + [C3[0]], [monomial(2)] * 3), "r_1^1 = r_2"),
    ("four hidden layers", _net(3, C3 + C3[:2], [monomial(2)] * 4), "4 hidden layers"),
])
def test_outside_the_theorem_is_not_applicable(what, model, phrase):
    t = tensor_identifiability(model)
    assert t.status == "not-applicable", what
    assert phrase in t.reason and "hidden layer" in t.reason, t.reason


def test_size_guard_before_work(monkeypatch):
    from symeq.fibre import deep

    monkeypatch.setattr(deep, "MAX_WIDTH", 2)   # a width-3 model stands in for a huge one
    t = tensor_identifiability(_net(3, C3, [monomial(2), monomial(2)]), timeout=5)
    assert t.status == "not-applicable" and "size guard" in t.reason

    def no_work(*args):
        raise AssertionError("work started before the size guard")

    # the general-activation path: the guard comes before the Taylor shifts and the ranks
    monkeypatch.setattr(deep, "_layer_scalings", no_work)
    monkeypatch.setattr(deep, "_independent_columns", no_work)
    t = tensor_identifiability(_net(3, C3, [tanh_series(3)] * 2, [[1] * 3] * 3), timeout=5)
    assert t.status == "not-applicable" and "size guard" in t.reason


# ----------------------------------------------------------------------------- the checker

def _assert_refused(bad, mj):
    """Every ``(what, certificate)`` in ``bad`` is refused for the model ``mj``: rejected, or a CheckError
    (a malformed certificate is an error, exit 2, never an acceptance)."""
    for what, b in bad:
        try:
            r = check_certificate(b, mj)
        except Exception as e:
            assert type(e).__name__ == "CheckError", (what, e)
            continue
        assert r.accepted is False, what


def _assert_not_applicable(what, model, phrase):
    t = tensor_identifiability(model)
    assert t.status == "not-applicable", what
    assert phrase in t.reason, (what, t.reason)


def _tampered(cert):
    yield "verdict", dict(cert, verdict="not-identifiable")
    yield "widths", dict(cert, widths=[3, 3, 3, 4])
    yield "degrees", dict(cert, degrees=[2, 2])
    yield "bias", dict(cert, bias=True)
    c = copy.deepcopy(cert); c["full_rank"]["W1_columns"] = [0, 1, 1]
    yield "repeated column", c
    c = copy.deepcopy(cert); c["full_rank"]["W3_rows"] = [0, 1]
    yield "short row list", c
    c = copy.deepcopy(cert); del c["full_rank"]["W2_columns"]
    yield "missing proof", c
    c = copy.deepcopy(cert); c["w2_row_supports"] = [3, 3, 1]
    yield "supports", c
    c = copy.deepcopy(cert); c["w2_centred_biases"] = ["0", "1", "0"]
    yield "centred biases", c
    yield "orbit dimension", dict(cert, orbit_dimension=5)
    yield "orbit size", dict(cert, orbit_size="36")
    yield "method", {k: v for k, v in cert.items() if k != "method"}


def test_checker_rejects_tampering():
    m = _net(3, C3, [monomial(2), monomial(3)])
    t = tensor_identifiability(m)
    mj = json.loads(json.dumps(model_to_json(m)))
    assert check_certificate(json.loads(json.dumps(t.certificate)), mj).accepted is True
    _assert_refused(_tampered(json.loads(json.dumps(t.certificate))), mj)


def test_checker_rejects_a_certificate_for_another_model():
    m = _net(3, C3, [monomial(2), monomial(2)])
    cert = json.loads(json.dumps(tensor_identifiability(m).certificate))
    for W2 in ([[2, -1, 0], [3, 2, -1], [-1, 3, 2]],      # a row with two entries
               [[2, -1, 3], [2, -1, 3], [3, 2, -1]]):     # clones: W_2 singular
        other = _net(3, [C3[0], W2, C3[2]], [monomial(2), monomial(2)])
        assert check_certificate(cert, json.loads(json.dumps(model_to_json(other)))).accepted is False
    biased = _net(3, C3, [monomial(2), monomial(2)], [[0, 0, 0], [1, 0, 0], [0, 0, 0]])
    assert check_certificate(cert, json.loads(json.dumps(model_to_json(biased)))).accepted is False


def test_biases_equivariant_network_is_identifiable():
    # biases shared by C_3 too (constant vectors); (t - 1)^2 in the first layer: the bias absorbs the shift
    m = _net(3, C3, [polynomial([1, -2, 1]), monomial(3)], [[1, 1, 1], [2, 2, 2], [-1, -1, -1]])
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert t.certificate["bias"] is True and t.certificate["w2_centred_biases"] == ["2", "2", "2"]
    assert _check(t, m).accepted is True
    # the same certificate does not fit the bias-free network, which the general-activation theorem
    # decides: (t - 1)^2 without biases allows lambda = 1 only (the flip needs the bias 2), t^3 its torus
    free = _net(3, C3, [polynomial([1, -2, 1]), monomial(3)])
    tf = tensor_identifiability(free)
    assert tf.status == "identifiable" and tf.orbit_dimension == 3 and tf.certificate["activations"] == "general"
    assert check_certificate(json.loads(json.dumps(t.certificate)),
                             json.loads(json.dumps(model_to_json(free)))).accepted is False


def _jacobian_rank(m, points, with_bias=False):
    """Exact rank of d f(x_k; theta) / d theta over the given inputs (forward differentiation in Q).

    Equal to #parameters - dim(orbit) exactly when the fibre has no continuous family beyond the
    orbit near theta (with enough generic points): an independent, necessary check of "fibre = orbit"."""
    from flint import fmpq, fmpq_mat

    layers = m.layers
    params = [(l, i, j) for l, L in enumerate(layers) for i in range(L.out_dim) for j in range(L.in_dim)]
    params += [(l, i, None) for l, L in enumerate(layers) for i in range(L.out_dim)]
    Ws = [[[fmpq(x) for x in row] for row in _rows(L.weight)] for L in layers]
    bs = [[fmpq(x) for x in L.bias] for L in layers]
    rows = []
    for x in points:
        cols = []
        for (pl, pi, pj) in params:
            v, dv = [fmpq(c.numerator, c.denominator) for c in x], [fmpq(0)] * len(x)
            for l, L in enumerate(layers):
                z = [sum((Ws[l][i][j] * v[j] for j in range(len(v))), fmpq(0)) + bs[l][i] for i in range(len(Ws[l]))]
                dz = [sum((Ws[l][i][j] * dv[j] for j in range(len(v))), fmpq(0)) for i in range(len(Ws[l]))]
                if l == pl:
                    dz[pi] += v[pj] if pj is not None else 1
                if L.activation is None:
                    v, dv = z, dz
                else:
                    c = L.activation.coeffs
                    v = [sum((c[k] * t ** k for k in range(len(c))), fmpq(0)) for t in z]
                    dv = [sum((k * c[k] * t ** (k - 1) for k in range(1, len(c))), fmpq(0)) * d for t, d in zip(z, dz)]
            cols.append(dv)
        rows += [[cols[p][o] for p in range(len(params))] for o in range(len(cols[0]))]
    free = [p for p, (l, i, j) in enumerate(params) if with_bias or j is not None]   # bias-free: weights only
    M = fmpq_mat(len(rows), len(free), [rows[r][p] for r in range(len(rows)) for p in free])
    return M.rank(), len(free)


def _rows(W):
    from symeq.numbers import mat_rows

    return mat_rows(W)


@pytest.mark.parametrize("n, exps", [(4, (2, 2, 2)), (3, (2, 3, 2))])
def test_three_hidden_layers_identifiable(n, exps):
    # C_n-equivariant (circulant) bias-free weights: every row of W_2, W_3 has n >= 3 entries, and
    # r_1^(n - 2) != r_2
    circ = [_circulant(r[:n]) for r in ([1, 2, -1, 3], [2, -1, 3, 1], [1, 1, -3, 2], [3, -1, 1, 1])]
    m = _net(n, circ, [monomial(r) for r in exps])
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert t.orbit_dimension == 3 * n and "3 hidden layers" in t.condition
    assert _check(t, m).accepted is True
    # independent necessary check: the parameter Jacobian has rank #weights - dim(orbit)
    import random

    rng = random.Random(n)
    pts = [[Fraction(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(n)] for _ in range(40)]
    rank, n_weights = _jacobian_rank(m, pts)
    assert rank == n_weights - 3 * n
    cert = json.loads(json.dumps(t.certificate))
    mj = json.loads(json.dumps(model_to_json(m)))
    for key, bad in (("w3_row_spans", [2] * n), ("w3_row_supports", [1] * n), ("orbit_dimension", 2 * n)):
        assert check_certificate(dict(cert, **{key: bad}), mj).accepted is False, key
    c = copy.deepcopy(cert); del c["full_rank"]["W3_columns"]
    with pytest.raises(CheckError, match='missing key "W3_columns"'):  # strict keys: refused, exit 2
        check_certificate(c, mj)


def test_jacobian_rank_sees_a_continuous_family():
    # the helper itself: sigma = t^2 bias-free (2,2,1) has a 1-parameter family beyond the orbit
    # (x^2 + y^2 is a sum of two squares in many ways), so the rank falls short of #weights - dim K
    m = _net(2, [[[1, 0], [0, 1]], [[1, 1]]], [monomial(2)])
    rank, n_weights = _jacobian_rank(m, [[Fraction(a), Fraction(b)] for a in range(-2, 3) for b in range(-2, 3)])
    assert rank < n_weights - 2


def _cli_certificate_and_check(m, tmp_path, capsys, phrase):
    """``symeq fibre --method tensor --certificate`` says identifiable (``phrase`` in its condition), and
    ``symeq check`` accepts the certificate it wrote."""
    path, cpath = tmp_path / "m.json", tmp_path / "c.json"
    save_model(m, path)
    assert main(["fibre", str(path), "--method", "tensor", "--json", "--certificate", str(cpath)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "identifiable" and phrase in out["condition"], out["condition"]
    assert main(["check", str(cpath), str(path)]) == 0


def test_cli_fibre_certificate_and_check(tmp_path, capsys):
    m = _net(3, C3, [monomial(2), monomial(2)])
    _cli_certificate_and_check(m, tmp_path, capsys, "Jacobian factors")


# ----------------------------------------------------------------------------- against Gröbner

# The theorem applies (W_2 rows with one entry, or n = 1) and Gröbner bases answer in about a second.
AGREE = [
    ("(2,2,2,2) t^2, diagonal W_2", _net(2, [[[1, 2], [3, -1]], [[2, 0], [0, -3]], [[1, 2], [-1, 1]]],
                                         [monomial(2), monomial(2)])),
    ("(2,2,2,2) t^3 t^2, anti-diagonal W_2", _net(2, [[[1, 2], [3, -1]], [[0, 2], [-3, 0]], [[1, 2], [-1, 1]]],
                                                  [monomial(3), monomial(2)])),
    ("(3,2,2,3) t^2", _net(3, [[[1, 2, 1], [3, -1, 2]], [[2, 0], [0, -3]], [[1, 2], [-1, 1], [2, 1]]],
                           [monomial(2), monomial(2)])),
    ("(2,1,1,2) t^2 t^3", _net(2, [[[1, 2]], [[3]], [[1], [2]]], [monomial(2), monomial(3)])),
    # with biases two entries per row suffice when b_2 is off the activation's centre
    ("(2,2,2,2) t^2, biases", _net(2, [[[1, 2], [3, -1]], [[2, 1], [1, -3]], [[1, 2], [-1, 1]]],
                                   [monomial(2), monomial(2)], [[1, -1], [1, 2], [0, 1]])),
    ("(2,2,2,2) (t+1)^2 t^3, biases", _net(2, [[[1, 2], [3, -1]], [[2, 1], [1, -3]], [[1, 2], [-1, 1]]],
                                           [polynomial([1, 2, 1]), monomial(3)], [[1, -1], [2, 1], [0, 1]])),
    # t + t^2 = (t + 1/2)^2 - 1/4: the constant -1/4 reaches layer 2 through W_2 (the bias absorbs it)
    ("(2,2,2,2) t + t^2, biases", _net(2, [[[1, 2], [3, -1]], [[2, 1], [1, -3]], [[1, 2], [-1, 1]]],
                                       [polynomial([0, 1, 1])] * 2, [[1, -1], [1, 2], [0, 1]])),
]


def test_monomial_plus_constant_centred_bias():
    # beta_0 = b_20 + kappa_1 (2 + 1) - e_2 = 1/4 - 3/4 + 1/2 = 0 with two entries: not applicable
    W = [[[1, 2], [3, -1]], [[2, 1], [1, -3]], [[1, 2], [-1, 1]]]
    t = tensor_identifiability(_net(2, W, [polynomial([0, 1, 1])] * 2, [[1, -1], [Fraction(1, 4), 2], [0, 1]]))
    assert t.status == "not-applicable" and "row 0 of W_2" in t.reason and "centred bias" in t.reason
    ok = _net(2, W, [polynomial([0, 1, 1])] * 2, [[1, -1], [1, 2], [0, 1]])
    t = tensor_identifiability(ok)
    assert t.status == "identifiable" and t.certificate["w2_centred_biases"] == ["3/4", "3"]
    assert _check(t, ok).accepted is True


@pytest.mark.needs_engine
@pytest.mark.parametrize("name, m", AGREE, ids=[a[0] for a in AGREE])
def test_agrees_with_groebner(name, m):
    t = tensor_identifiability(m)
    assert t.status == "identifiable", (name, t.reason)
    c = compare_with_orbit(m, timeout=120)
    assert c.status != "not-identifiable", (name, c.status)
    # fibre = orbit: on the gauge slice the zero-dimensional fibre has exactly the orbit's points
    assert c.dimension == 0 and c.degree == c.orbit_size, (name, c.dimension, c.degree, c.orbit_size)


@pytest.mark.needs_engine
def test_not_applicable_falls_back_to_groebner():
    # n = 2 with a full W_2: two entries per row, outside the theorem; Gröbner decides (4 points)
    m = _net(2, [[[1, 2], [3, -1]], [[2, 1], [1, -3]], [[1, 2], [-1, 1]]], [monomial(2), monomial(2)])
    td, c = decide(m, method="auto", timeout=120)
    assert td.status == "not-applicable" and "row 0 of W_2" in td.reason
    assert c is not None and c.status == "identifiable" and c.degree == c.orbit_size == 4


@pytest.mark.slow
@pytest.mark.needs_engine("msolve")
def test_agrees_with_groebner_full_rows():
    # (3,3,3,3), every row of W_2 with three entries: the case the theorem is for.  Exact Gröbner
    # bases take minutes here (giac's completion off the slice went past a 16 GB cap on this 2-core
    # machine); msolve's modular count (70 s on 2 busy cores) shows degree = orbit size = (3!)^2.
    m = _net(3, [[[1, 2, -1], [2, -1, 1], [1, 1, 3]], [[1, -2, 1], [2, 1, -1], [-1, 1, 2]],
                 [[1, 1, -2], [2, -1, 1], [1, 3, 1]]], [monomial(2), monomial(2)])
    assert tensor_identifiability(m).status == "identifiable"
    try:
        c = compare_with_orbit(m, engine="msolve", timeout=500)
    except (MemoryLimit, Undetermined) as e:  # the exact completion of the slice can need > 16 GB
        pytest.skip(f"Gröbner bases did not finish: {e}")
    assert c.status != "not-identifiable"
    if c.degree is None:
        pytest.skip(f"Gröbner gave no degree within the budget: {c.status}")
    assert c.dimension == 0 and c.degree == c.orbit_size == 36


# ----------------------------------------------------------------------------- general activations

# C_3-equivariant with biases: circulant weights and constant bias vectors (C_3-invariant)
C3_BIASES = [[1, 1, 1], [-1, -1, -1], [2, 2, 2]]
CUBIC = polynomial([1, 2, -1, 1])     # t^3 - t^2 + 2t + 1: centre 1/3, odd about it up to a constant


@pytest.mark.parametrize("name, act, bias, g, lambdas, size", [
    ("tanh_series(3), biases", tanh_series(3), True, 2, ["1", "-1"], (6 * 8) ** 2),
    ("tanh_series(5), biases", tanh_series(5), True, 2, ["1", "-1"], (6 * 8) ** 2),
    ("tanh_series(3), no biases", tanh_series(3), False, 2, ["1", "-1"], (6 * 8) ** 2),
    ("sigmoid_series(3), biases", sigmoid_series(3), True, 2, ["1", "-1"], (6 * 8) ** 2),
    ("cubic, biases", CUBIC, True, 2, ["1", "-1"], (6 * 8) ** 2),
    # without biases the flip about the centre 1/3 would need the bias 2/3: only permutations
    ("cubic, no biases", CUBIC, False, 2, ["1"], 6 ** 2),
    # s' = 4t^3 + 3t^2 + 2t + 1 centred has every lower term: g = 1, lambda = 1 only
    ("1 + t + t^2 + t^3 + t^4, biases", polynomial([1, 1, 1, 1, 1]), True, 1, ["1"], 6 ** 2),
])
def test_general_activation_is_identifiable(name, act, bias, g, lambdas, size):
    m = _net(3, C3, [act, act], C3_BIASES if bias else None)
    t = tensor_identifiability(m)
    assert t.status == "identifiable", (name, t.reason)
    assert "general polynomial activations" in t.condition and t.orbit_size == size and t.orbit_dimension == 0
    cert = t.certificate
    assert [lay["g"] for lay in cert["layers"]] == [g, g] and cert["layers"][0]["lambdas"] == lambdas
    r = _check(t, m)
    assert r.accepted is True, (name, r.reasons)


def test_general_mixed_with_monomial_layer():
    # (t + 1)^2 without biases: the scaling would need the bias -(1 - lambda), so lambda = 1; t^2 on
    # top keeps its torus: orbit of dimension 3
    m = _net(3, C3, [polynomial([1, 2, 1]), monomial(2)])
    t = tensor_identifiability(m)
    assert t.status == "identifiable" and t.orbit_dimension == 3 and t.orbit_size is None, t.reason
    assert t.certificate["layers"][1]["lambdas"] == "all"
    assert _check(t, m).accepted is True


@pytest.mark.parametrize("what, model, phrase", [
    # s' = t^3 - 1: the cube roots of unity permute its roots, complex fibre points
    ("g = 3", _net(3, C3, [polynomial([0, -1, 0, 0, Fraction(1, 4)]), tanh_series(3)], C3_BIASES),
     "lambda^3 = 1 has complex solutions"),
    # sigmoid without biases: the flip needs the offset 1 in the next bias
    ("sigmoid, no biases", _net(3, C3, [sigmoid_series(3), tanh_series(3)]), "lambda = -1 occurs"),
    ("clones", _net(3, [[[1, 2, -1], [1, 2, -1], [2, -1, 3]], C3[1], C3[2]], [tanh_series(3)] * 2, C3_BIASES),
     "W_1 is not of rank 3"),
    ("one entry", _net(3, [C3[0], [[2, 0, 0], [-1, 3, 2], [3, 2, -1]], C3[2]], [tanh_series(3)] * 2, C3_BIASES),
     "row 0 of W_2 has 1 nonzero entry"),
    ("narrow output", _net(3, C3[:2] + [[[1, 2, 3], [2, 1, 1]]], [tanh_series(3)] * 2, C3_BIASES[:2] + [[0, 0]]),
     "widths"),
])
def test_general_activation_not_applicable(what, model, phrase):
    _assert_not_applicable(what, model, phrase)


def test_general_checker_rejects_tampering():
    m = _net(3, C3, [tanh_series(3)] * 2, C3_BIASES)
    t = tensor_identifiability(m)
    assert _check(t, m).accepted is True
    model = json.loads(json.dumps(model_to_json(m)))
    base = json.loads(json.dumps(t.certificate))
    edits = [
        lambda c: c["layers"][0].update(lambdas=["1"]),           # drop the flip: a smaller orbit
        lambda c: c["layers"][1].update(g=1),
        lambda c: c["layers"][0].update(centre="1/3"),
        lambda c: c.update(orbit_size="576"),
        lambda c: c.update(orbit_size=None),
        lambda c: c.update(w2_row_supports=[3, 3, 2]),
        lambda c: c["full_rank"].update(W1_columns=[0, 1, 1]),
        lambda c: c.update(bias=False),
        lambda c: c.update(layers=c["layers"][:1]),
    ]
    for k, edit in enumerate(edits):
        c = copy.deepcopy(base)
        edit(c)
        assert check_certificate(c, model).accepted is False, k
    # the same certificate for a network whose W_2 has a row of two entries, or with sigma_1 changed to
    # an activation with g = 3, is rejected by the recomputation
    other = copy.deepcopy(model)
    other["layers"][1]["weight"][0] = ["2", "-1", "0"]
    assert check_certificate(copy.deepcopy(base), other).accepted is False
    other = copy.deepcopy(model)
    other["layers"][0]["activation"] = {"type": "polynomial", "coeffs": ["0", "-1", "0", "0", "1/4"]}
    r = check_certificate(copy.deepcopy(base), other)
    assert r.accepted is False and any("complex" in x for x in r.reasons), r.reasons


def _round16(v):
    """A trained float weight rounded to a multiple of 1/16 (exact from here on)."""
    return Fraction(round(float(v) * 16), 16)


def test_torch_tanh_series_with_biases(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")

    class TanhSeries3(torch.nn.Module):   # how users write the degree-3 Taylor polynomial of tanh
        def forward(self, x):
            return x - x ** 3 / 3

    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), TanhSeries3(), torch.nn.Linear(3, 3), TanhSeries3(),
                              torch.nn.Linear(3, 4))
    lins = [net[0], net[2], net[4]]
    Ws = [[[_round16(v) for v in row] for row in lin.weight.detach()] for lin in lins]
    bs = [[_round16(v) for v in lin.bias.detach()] for lin in lins]
    assert all(x != 0 for row in Ws[1] for x in row), "the seed must give a W_2 without zeros"
    m = _net(4, Ws, [tanh_series(3)] * 2, bs)
    x = torch.tensor([[0.5, -0.25, 1.0, 0.75]], dtype=torch.float64)
    with torch.no_grad():   # the exact model is the rounded torch network
        rounded = torch.nn.Sequential(*[torch.nn.Linear(a.in_features, a.out_features).double() for a in lins])
        for lin, W, b in zip(rounded, Ws, bs):
            lin.weight.copy_(torch.tensor([[float(v) for v in r] for r in W]))
            lin.bias.copy_(torch.tensor([float(v) for v in b]))
        y = rounded[2](TanhSeries3()(rounded[1](TanhSeries3()(rounded[0](x)))))
    _cli_certificate_and_check(m, tmp_path, capsys, "general polynomial activations")
    exact = m([Fraction(1, 2), Fraction(-1, 4), Fraction(1), Fraction(3, 4)])
    assert max(abs(float(a) - float(b)) for a, b in zip(exact, y[0])) < 1e-9


def test_general_fibre_is_finite_and_contains_the_orbit():
    # independent necessary checks for tanh_series(3) with biases: the parameter Jacobian has full
    # rank (no continuous family: the fibre is finite), and a random k in K_1 x K_2 (flips with their
    # bias offsets, permutations) gives the same function and the same verdict
    import random

    from symeq.models import scramble

    m = _net(3, C3, [tanh_series(3)] * 2, C3_BIASES)
    rng = random.Random(7)
    pts = [[Fraction(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(3)] for _ in range(20)]
    rank, n_params = _jacobian_rank(m, pts, with_bias=True)
    assert rank == n_params == 36
    s, _ = scramble(m, rng=3)
    assert all(s(x) == m(x) for x in pts[:5])
    t = tensor_identifiability(s)
    assert t.status == "identifiable" and t.orbit_size == tensor_identifiability(m).orbit_size


CIRC4 = [_circulant(r) for r in ([1, 2, -1, 3], [2, -1, 3, 1], [1, 1, -3, 2], [3, -1, 1, 1])]


@pytest.mark.parametrize("acts, bias, size, dim", [
    ([tanh_series(3)] * 3, True, (24 * 16) ** 3, 0),
    ([sigmoid_series(3), tanh_series(3), CUBIC], True, (24 * 16) ** 3, 0),
    ([tanh_series(3)] * 3, False, (24 * 16) ** 3, 0),
    # monomials with biases: the top-form argument needs no homogeneity (the monomial path's norm
    # argument did): tori in every layer
    ([monomial(2), monomial(3), monomial(2)], True, None, 12),
])
def test_general_three_hidden_layers(acts, bias, size, dim):
    # C_4-equivariant: circulant weights, constant biases; m_1^(4 - 2) != m_2 for these degrees
    m = _net(4, CIRC4, acts, [[1] * 4, [-1] * 4, [2] * 4, [0] * 4] if bias else None)
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert (t.orbit_size, t.orbit_dimension) == (size, dim) and "3 hidden layers" in t.condition
    assert _check(t, m).accepted is True
    cert, mj = json.loads(json.dumps(t.certificate)), json.loads(json.dumps(model_to_json(m)))
    for key, bad in (("w3_row_spans", [2] * 4), ("w3_row_supports", [4, 4, 4, 2]), ("orbit_dimension", dim + 4)):
        assert check_certificate(dict(cert, **{key: bad}), mj).accepted is False, key
    c = copy.deepcopy(cert); c["layers"][2]["g"] = 1
    assert check_certificate(c, mj).accepted is False
    # independent necessary check: the parameter Jacobian has rank #parameters - dim(orbit)
    import random

    rng = random.Random(4)
    pts = [[Fraction(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(4)] for _ in range(24)]
    rank, n_params = _jacobian_rank(m, pts, with_bias=bias)
    assert rank == n_params - dim


def test_general_three_hidden_layers_not_applicable():
    m = _net(4, [CIRC4[0], CIRC4[1], [[1, 2, 0, 0], [0, 1, 2, 3], [3, 0, 1, 2], [2, 3, 0, 1]], CIRC4[3]],
             [tanh_series(3)] * 3, [[1] * 4] * 4)
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "row 0 of W_3 has 2 nonzero entries" in t.reason, t.reason


@pytest.mark.slow
@pytest.mark.needs_engine("msolve")
def test_general_agrees_with_groebner_when_it_answers():
    # (3,3,3,3) t + t^2 without biases and full rows: the general path (lambda = 1 only: the flip needs
    # the bias -1) says the fibre is the 36-point orbit (3!)^2.  msolve agrees: dimension 0, degree 36,
    # in 240 s on an idle 2-core machine (330 s was not enough while other jobs ran: then it skips).
    # tanh_series(3) here is beyond msolve (2304 points), and with biases the fibre ideal exceeds the
    # monomial guard.
    m = _net(3, [[[1, 2, -1], [2, -1, 1], [1, 1, 3]], [[1, -2, 1], [2, 1, -1], [-1, 1, 2]],
                 [[1, 1, -2], [2, -1, 1], [1, 3, 1]]], [polynomial([0, 1, 1])] * 2)
    t = tensor_identifiability(m)
    assert t.status == "identifiable" and t.orbit_size == 36, t.reason
    try:
        c = compare_with_orbit(m, engine="msolve", timeout=500, witnesses=False)
    except (MemoryLimit, Undetermined) as e:
        pytest.skip(f"Gröbner bases did not finish: {e}")
    assert c.status != "not-identifiable"
    if c.degree is None:
        pytest.skip(f"Gröbner gave no degree within the budget: {c.status}")
    assert c.dimension == 0 and c.degree == c.orbit_size == 36


def test_general_jacobian_determinant_factors():
    # step 2 of the theorem, seen independently of deep.py: for (3,3,3,3) tanh_series(3) with biases
    # (square Jacobian) det Df = det W_3 det W_2 det W_1 prod (1 - l_j^2) prod (1 - g_j^2); factored over
    # Q its degree-1 factors are exactly the six l_j -+ 1 and the rest are irreducible cubics g_j -+ 1
    from flint import fmpq, fmpq_mpoly_ctx

    ctx = fmpq_mpoly_ctx.get(("x0", "x1", "x2"), "lex")
    x, zero = ctx.gens(), ctx.from_dict({})
    act = tanh_series(3)
    v = list(x)
    for k, W in enumerate(C3):
        z = [sum((fmpq(W[i][j]) * v[j] for j in range(3)), zero) + C3_BIASES[k][i] for i in range(3)]
        v = [act.compose(t, zero) for t in z] if k < 2 else z
        if k == 0:
            firsts = z
    J = [[fi.derivative(i) for i in range(3)] for fi in v]
    det = (J[0][0] * (J[1][1] * J[2][2] - J[1][2] * J[2][1]) - J[0][1] * (J[1][0] * J[2][2] - J[1][2] * J[2][0])
           + J[0][2] * (J[1][0] * J[2][1] - J[1][1] * J[2][0]))
    factors = [p for p, e in det.factor()[1] for _ in range(e)]
    assert sorted(p.total_degree() for p in factors) == [1] * 6 + [3] * 6

    def monic(p):
        q = p * (1 / p.coeffs()[0])
        return tuple(zip(q.monoms(), q.coeffs()))

    assert {monic(p) for p in factors if p.total_degree() == 1} == {monic(l - r) for l in firsts for r in (1, -1)}


# ----------------------------------------------------------------------------- widening (n < n2 <= n3)

W_UP = [[1, 2, -1], [2, -1, 1], [1, 1, 3]]
W2_UP = [[1, -2, 1], [2, 1, -1], [-1, 1, 2], [1, 3, 1]]          # 4 x 3, every row full
W3_UP = [[1, 0, 2, -1], [0, 1, 1, 2], [2, -1, 0, 1], [1, 1, -1, 0], [1, 2, 1, 1]]   # 5 x 4, rank 4


def _widening(bias=False, W2=W2_UP, W3=W3_UP, acts=(monomial(2), monomial(3))):
    b = [[1, -1, 2], [0, 1, -1, 2], [1, 0, 0, -1, 1]] if bias else None
    return _net(3, [W_UP, W2, W3], list(acts), b)


@pytest.mark.parametrize("bias", [False, True])
def test_widening_second_layer_is_identifiable(bias):
    m = _widening(bias)
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert t.orbit_dimension == 3 + 4 and "widening" in t.condition
    cert = t.certificate
    assert cert["widths"] == [3, 3, 4, 5] and len(cert["full_rank"]["W3_rows"]) == 4
    assert cert["top"]["widths"] == [3, 4, 5] and cert["top"]["verdict"] == "identifiable"
    r = _check(t, m)
    assert r.accepted is True, r.reasons
    assert any("top block" in c for c in r.checks)


def test_widening_agrees_with_the_numeric_functional_dimension():
    """The fibre is the orbit, of dimension n + n2 = 7: the float Jacobian rank of theta -> f_theta
    at random points is #params - 7 (numeric evidence, consistent with the proof)."""
    from symeq.numeric.fdim import functional_dimension
    from symeq.numeric.models import from_exact

    m = _widening(True)
    r = functional_dimension(from_exact(m, None), rng=0)
    assert r.rank == r.n_params - 7 and r.gap > 1e4
    # and exactly (rank modulo a prime, symeq/fibre/jacobian.py, an independent computation): locally
    # identifiable with an orbit of dimension 7, with and without biases
    from symeq.fibre.jacobian import jacobian_identifiability

    for bias in (False, True):
        j = jacobian_identifiability(_widening(bias), certificate=False)
        assert j.status == "locally-identifiable" and j.orbit_dimension == 7


@pytest.mark.parametrize("what, model, phrase", [
    ("W_3 not injective", _widening(W3=[[1, 0, 2, 1], [0, 1, 1, 1], [2, -1, 0, 1], [1, 1, -1, 2], [1, 2, 1, 3]]),
     "W_3 is not of rank 4"),
    ("a row of W_2 with two entries", _widening(W2=[[1, -2, 0], [2, 1, -1], [-1, 1, 2], [1, 3, 1]]), "row 0 of W_2"),
    ("narrowing", _net(4, [[[1, 2, -1, 1], [2, -1, 1, 1], [1, 1, 3, -1], [1, 0, 1, 2]],
                           [[1, -2, 1, 1], [2, 1, -1, 1], [-1, 1, 2, 3]], W_UP], [monomial(2), monomial(3)]), "widths"),
    ("more hidden neurons than outputs", _net(3, [W_UP, W2_UP, W3_UP[:3]], [monomial(2), monomial(3)]), "widths"),
    ("lambda^3 = 1 in the first layer", _widening(True, acts=(polynomial([0, -1, 0, 0, "1/4"]), tanh_series(3))),
     "complex solutions"),
])
def test_widening_outside_the_theorem_is_not_applicable(what, model, phrase):
    _assert_not_applicable(what, model, phrase)


def test_widening_checker_rejects_tampering():
    m = _widening(True)
    t = tensor_identifiability(m)
    mj = json.loads(json.dumps(model_to_json(m)))
    cert = json.loads(json.dumps(t.certificate))
    bad = []
    c = copy.deepcopy(cert); c["full_rank"]["W3_rows"] = [0, 1, 2]
    bad.append(("short W_3 rows", c))
    c = copy.deepcopy(cert); c["full_rank"]["W3_rows"] = [0, 0, 1, 2]
    bad.append(("repeated W_3 row", c))
    c = copy.deepcopy(cert); c["top"]["rank_one_terms"][0]["v"][0] = "7"
    bad.append(("top terms", c))
    c = copy.deepcopy(cert); c["top"]["kruskal"]["k_lower"] = [9, 9, 9]
    bad.append(("top kruskal", c))
    c = copy.deepcopy(cert); c["top"]["method"] = "jacobian-factors"
    bad.append(("top method", c))
    bad.append(("orbit", dict(cert, orbit_dimension=3)))
    bad.append(("no top", {k: v for k, v in cert.items() if k != "top"}))
    c = copy.deepcopy(cert); c["w2_centred_biases"][1] = "5"
    bad.append(("centred biases", c))
    _assert_refused(bad, mj)
    # the certificate of one model does not prove another (W_3 made non-injective)
    other = _widening(True, W3=[[1, 0, 2, 1], [0, 1, 1, 1], [2, -1, 0, 1], [1, 1, -1, 2], [1, 2, 1, 3]])
    assert check_certificate(cert, json.loads(json.dumps(model_to_json(other)))).accepted is False


@pytest.mark.parametrize("acts, bias, size, dim", [
    ((tanh_series(3), tanh_series(3)), True, 18432, 0),        # 3! 2^3 * 4! 2^4
    ((tanh_series(3), tanh_series(3)), False, 18432, 0),
    ((sigmoid_series(3), tanh_series(3)), True, 18432, 0),
    ((monomial(2), tanh_series(3)), True, None, 3),             # a torus on the first layer
])
def test_widening_general_activations(acts, bias, size, dim):
    from symeq.fibre.jacobian import jacobian_identifiability

    m = _widening(bias, acts=acts)
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert (t.orbit_size, t.orbit_dimension) == (size, dim)
    assert t.certificate["activations"] == "general" and len(t.certificate["layers"]) == 1
    r = _check(t, m)
    assert r.accepted is True, r.reasons
    # independently, exactly and locally: the Jacobian rank mod p reaches #params - dim K
    j = jacobian_identifiability(m, certificate=False)
    assert j.status == "locally-identifiable" and j.orbit_dimension == dim


def test_widening_general_not_applicable_and_tampering():
    two = _widening(True, W2=[[1, -2, 0], [2, 1, -1], [-1, 1, 2], [1, 3, 1]], acts=(tanh_series(3), tanh_series(3)))
    t = tensor_identifiability(two)
    assert t.status == "not-applicable" and "row 0 of W_2 has 2" in t.reason
    sig = tensor_identifiability(_widening(False, acts=(sigmoid_series(3), tanh_series(3))))
    assert sig.status == "not-applicable" and "hidden layer 1" in sig.reason
    m = _widening(True, acts=(tanh_series(3), tanh_series(3)))
    cert = json.loads(json.dumps(tensor_identifiability(m).certificate))
    mj = json.loads(json.dumps(model_to_json(m)))
    bad = [("orbit size", dict(cert, orbit_size="36")), ("lambdas", copy.deepcopy(cert)),
           ("supports", dict(cert, w2_row_supports=[3, 3, 3, 2]))]
    bad[1][1]["layers"][0]["lambdas"] = ["1"]
    _assert_refused(bad, mj)


def test_cli_fibre_widening_certificate_and_check(tmp_path, capsys):
    m = _widening(True, acts=(tanh_series(3), tanh_series(3)))
    _cli_certificate_and_check(m, tmp_path, capsys, "widening")


W2_SQ = [[1, 2, -1], [2, -1, 3], [1, 1, 1]]


def _widening3(bias=False, acts=(monomial(2), monomial(3), monomial(2))):
    import random as _random

    if acts[0].degree == 3:  # tanh: H5 needs 3^(|V| - 2) != 3, so n = 4
        rng = _random.Random(5)

        def R(a, b):
            return [[rng.choice([-2, -1, 1, 2, 3]) for _ in range(b)] for _ in range(a)]
        Ws = [R(4, 4), R(4, 4), R(5, 4), R(6, 5)]
        b = [[rng.randint(-2, 2) for _ in range(k)] for k in (4, 4, 5, 6)] if bias else None
        return _net(4, Ws, list(acts), b)
    return _net(3, [W_UP, W2_SQ, W2_UP, W3_UP], list(acts), None)


@pytest.mark.parametrize("acts, bias, size, dim", [
    ((monomial(2), monomial(3), monomial(2)), False, None, 3 + 3 + 4),
    ((tanh_series(3),) * 3, True, 566231040, 0),               # (4! 2^4)^2 * 5! 2^5
])
def test_three_hidden_layers_widening_last(acts, bias, size, dim):
    from symeq.fibre.jacobian import jacobian_identifiability

    m = _widening3(bias, acts)
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert (t.orbit_size, t.orbit_dimension) == (size, dim)
    assert "tail" in t.certificate and "top" in t.certificate["tail"]
    r = _check(t, m)
    assert r.accepted is True, r.reasons
    j = jacobian_identifiability(m, certificate=False)
    assert j.status == "locally-identifiable" and j.orbit_dimension == dim
    cert = json.loads(json.dumps(t.certificate))
    mj = json.loads(json.dumps(model_to_json(m)))
    bad = [("orbit", dict(cert, orbit_dimension=dim + 1)), ("w3 spans", dict(cert, w3_row_spans=[1] * 4)),
           ("tail", copy.deepcopy(cert))]
    bad[2][1]["tail"]["full_rank"]["W3_rows"] = bad[2][1]["tail"]["full_rank"]["W3_rows"][:-1]
    _assert_refused(bad, mj)


def test_three_hidden_layers_widening_not_applicable():
    # tanh with n = 3: 3^(3 - 2) = 3 = m_2, a norm form is not excluded (H5)
    m = _net(3, [W_UP, W2_SQ, W2_UP, W3_UP], [tanh_series(3)] * 3, [[1, -1, 2], [1, 2, -1], [0, 1, -1, 2],
                                                                      [1, 0, 0, -1, 1]])
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "H5" in t.condition
    # a narrowing middle layer stays outside
    m = _net(3, [W_UP, W2_UP, [[1, -2, 1, 1], [2, 1, -1, 1], [-1, 1, 2, 3]], W_UP], [monomial(2)] * 3)
    assert tensor_identifiability(m).status == "not-applicable"
