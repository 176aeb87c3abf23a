"""The Jacobian rank along a graph model (symeq/fibre/graph_rank.py, issue 27 item 3): the modular Jacobian
against an exact forward-mode derivative written here (dual numbers over Fractions, from the model file
itself), the rank against the chain method on a one-segment graph, and the statuses: locally identifiable
at full rank, ``unknown`` with the reason otherwise (a dead unit; continuous scalings), ReLU and pooling
refused by name; ``symeq fibre`` and ``verify --identifiability`` on graph files."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import pytest

from graph_networks import chain_file, concat_net, conv_residual, residual
from symeq.cli import main
from symeq.fibre.graph_rank import graph_jacobian_identifiability, graph_reverse_jacobian, _programs
from symeq.fibre.jacobian import PRIME, _points, _points_mod, jacobian_identifiability
from symeq.io import model_from_json

T3 = {"type": "tanh_series", "order": 3}
CUBE = {"type": "monomial", "degree": 3}


# -- an exact forward-mode derivative of a dense graph file, written here --------------------------------

def _poly(act):
    """sigma as coefficients (tanh_series(3) = t - t^3/3, monomial t^d), or None."""
    if act is None:
        return None
    if act["type"] == "tanh_series":
        return [Fraction(0), Fraction(1), Fraction(0), Fraction(-1, 3)]
    if act["type"] == "monomial":
        return [Fraction(0)] * act["degree"] + [Fraction(1)]
    raise AssertionError(act)


def _apply(c, z):
    """(sigma(v), sigma'(v) dv) of a dual number z = (v, dv)."""
    v, dv = z
    val = sum(ck * v ** k for k, ck in enumerate(c))
    der = sum(k * ck * v ** (k - 1) for k, ck in enumerate(c) if k)
    return val, der * dv


def _params(doc):
    """The parameter vector's entries as (node, layer index, 'W'/'b', i, j), in symeq's order."""
    out = []
    for node in doc["graph"]:
        for li, layer in enumerate(node.get("layers", [])):
            W = layer["weight"]
            out += [(node["name"], li, "W", i, j) for i in range(len(W)) for j in range(len(W[0]))]
            if layer["bias"] is not None:
                out += [(node["name"], li, "b", i, 0) for i in range(len(W))]
    return out


def _forward_dual(doc, x, wrt):
    """f(x) and df/d theta_wrt, exactly (dense layers, add, concat)."""
    vals = {"input": [(Fraction(v), Fraction(0)) for v in x]}
    for node in doc["graph"]:
        if "layers" in node:
            h = vals[node["input"]]
            for li, layer in enumerate(node["layers"]):
                W = [[Fraction(v) for v in r] for r in layer["weight"]]
                b = [Fraction(v) for v in layer["bias"]] if layer["bias"] is not None else [Fraction(0)] * len(W)
                z = []
                for i, row in enumerate(W):
                    v = b[i] + sum(w * hv for w, (hv, _) in zip(row, h))
                    dv = sum(w * hd for w, (_, hd) in zip(row, h))
                    key = (node["name"], li)
                    if wrt[:2] == key and wrt[2] == "W" and wrt[3] == i:
                        dv += h[wrt[4]][0]
                    if wrt[:2] == key and wrt[2] == "b" and wrt[3] == i:
                        dv += 1
                    z.append((v, dv))
                c = _poly(layer["activation"])
                h = z if c is None else [_apply(c, zz) for zz in z]
            vals[node["name"]] = h
        else:
            key = "add" if "add" in node else "concat"
            ins = [vals[i] for i in node[key]]
            z = [(sum(t[k][0] for t in ins), sum(t[k][1] for t in ins)) for k in range(len(ins[0]))] \
                if key == "add" else [t for part in ins for t in part]
            c = _poly(node["activation"])
            vals[node["name"]] = z if c is None else [_apply(c, zz) for zz in z]
    out = doc.get("output", doc["graph"][-1]["name"])
    return vals[out]


def _mod(q: Fraction) -> int:
    return q.numerator % PRIME * pow(q.denominator % PRIME, -1, PRIME) % PRIME


def _check_against_dual_numbers(doc, points: int = 3):
    gm = model_from_json(copy.deepcopy(doc))
    progs = _programs(gm)
    params = _params(doc)
    assert sum(p.n_params for p in progs.values()) == len(params)
    pts = _points(gm.input_dim, points, 5)
    J = graph_reverse_jacobian(gm, progs, _points_mod(pts))
    K = gm.output_dim
    for n, x in enumerate(pts):
        for j, wrt in enumerate(params):
            col = _forward_dual(doc, x, wrt)
            for k in range(K):
                assert int(J[n * K + k, j]) == _mod(col[k][1]), (n, k, wrt)


@pytest.mark.parametrize("act", [T3, CUBE], ids=["tanh_series", "cube"])
def test_jacobian_of_a_residual_block_is_the_exact_derivative(act):
    """x -> stem -> block (two layers) ; sum = act(stem + block) ; head: the skip reads stem twice."""
    doc = residual(act, scales="signs" if act is T3 else "none")
    doc["graph"][0]["layers"][0]["bias"] = ["1", "-2", "0", "3"]  # a bias vector on the stem, one on the head
    doc["graph"][3]["layers"][0]["bias"] = ["1", "1"]
    _check_against_dual_numbers(doc)


def test_jacobian_of_a_concatenation_is_the_exact_derivative():
    _check_against_dual_numbers(concat_net(T3))


def _random_chain(seed: int, widths=(2, 4, 4, 2)):
    import random

    rng = random.Random(seed)
    layers = [{"type": "dense", "weight": [[str(rng.randint(-3, 3)) for _ in range(a)] for _ in range(b)],
               "bias": [str(rng.randint(-3, 3)) for _ in range(b)], "activation": T3 if k < len(widths) - 2 else None}
              for k, (a, b) in enumerate(zip(widths, widths[1:]))]
    return ({"format": "symeq-model/1", "input_dim": widths[0], "layers": layers},
            {"format": "symeq-model/1", "input_dim": widths[0], "graph": [{"name": "net", "input": "input",
                                                                           "layers": copy.deepcopy(layers)}]})


@pytest.mark.parametrize("which", ["deficient", "full"])
def test_a_chain_in_graph_form_has_the_chain_methods_rank(which):
    chain, graph = chain_file(T3) if which == "deficient" else _random_chain(7)
    ch = jacobian_identifiability(model_from_json(chain), certificate=False)
    gr = graph_jacobian_identifiability(model_from_json(graph))
    assert gr.n_params == ch.n_params and gr.rank == ch.rank
    if which == "full":
        assert gr.status == ch.status == "locally-identifiable"
    else:  # 2-4-2 with zero biases declared: rank 16 of 20 on both roads, and neither claims anything
        assert gr.rank < gr.n_params and gr.status == ch.status == "unknown"


def test_residual_block_locally_identifiable_and_a_dead_unit_is_not_decided():
    gm = model_from_json(residual(T3, scales="signs"))
    d = graph_jacobian_identifiability(gm)
    assert d.status == "locally-identifiable" and d.rank == d.n_params
    doc = residual(T3, scales="signs")
    W = doc["graph"][1]["layers"][1]["weight"]
    for row in W:  # the block's first hidden unit feeds nothing: its incoming weights are free
        row[0] = "0"
    d = graph_jacobian_identifiability(model_from_json(doc))
    assert d.status == "unknown" and d.rank < d.n_params
    assert "no known symmetry explains" in d.reason and not d.continuous


def test_continuous_scalings_are_named_and_not_decided():
    d = graph_jacobian_identifiability(model_from_json(residual(CUBE, scales="none")))
    assert d.status == "unknown" and d.rank < d.n_params
    assert d.continuous == ["stem", "block.1", "sum"] and "continuous scalings" in d.reason


def test_relu_and_pooling_are_refused_by_name():
    d = graph_jacobian_identifiability(model_from_json(conv_residual()))
    assert d.status == "not-applicable" and "polynomial activations only" in d.reason and "relu" in d.reason


def test_fibre_and_verify_on_a_graph_file(tmp_path, capsys):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(residual(T3, scales="signs")))
    assert main(["fibre", str(path), "--json"]) == 3  # locally identifiable: the global question stays open
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "locally-identifiable" and out["method"] == "jacobian-rank" and out["graph"] is True
    assert [t["method"] for t in out["tried"]] == ["affine", "classical", "tensor", "jacobian-factors",
                                                   "jacobian-rank", "groebner"]
    assert main(["fibre", str(path), "--method", "tensor"]) == 3
    assert "chains only" in capsys.readouterr().out
    assert main(["verify", str(path), "--identifiability"]) == 0
    assert "Identifiability: locally-identifiable" in capsys.readouterr().out
    relu = tmp_path / "relu.json"
    relu.write_text(json.dumps(conv_residual()))
    assert main(["verify", str(relu), "--identifiability"]) == 3  # layerwise, the premise undetermined
    assert "polynomial activations only" in capsys.readouterr().out


def _entries(doc):
    """The parameter entries of a dense/conv graph file as (list, index) pairs, in symeq's parameter order
    (a kernel [out][in][row][col], then the bias; a weight row-major, then the bias)."""
    out = []
    for node in doc["graph"]:
        for layer in node.get("layers", []):
            if layer["type"] == "conv2d":
                for o in layer["kernel"]:
                    for c in o:
                        for row in c:
                            out += [(row, k) for k in range(len(row))]
            else:
                for row in layer["weight"]:
                    out += [(row, k) for k in range(len(row))]
            if layer["bias"] is not None:
                out += [(layer["bias"], k) for k in range(len(layer["bias"]))]
    return out


def test_conv_residual_jacobian_against_central_differences():
    """The same reverse mode over float64 on a residual conv net (kernel taps shared over pixels, a skip read
    twice, a join's activation): every column against exact central differences of the exact forward."""
    import numpy as np

    from symeq.backends import Float64

    doc = json.loads(json.dumps(conv_residual()).replace('{"type": "relu"}', json.dumps(T3)))
    gm = model_from_json(copy.deepcopy(doc))
    progs = _programs(gm, Float64())
    pts = _points(gm.input_dim, 2, 3)
    J = graph_reverse_jacobian(gm, progs, np.array([[float(v) for v in p] for p in pts]).T, bk=Float64())
    entries = _entries(doc)
    assert J.shape == (2 * gm.output_dim, len(entries))
    h = Fraction(1, 10 ** 6)
    for j, (lst, k) in enumerate(entries):
        v = Fraction(lst[k])
        vals = []
        for t in (v + h, v - h):
            lst[k] = str(t)
            m = model_from_json(copy.deepcopy(doc))
            vals.append([m(p) for p in pts])
        lst[k] = str(v)
        fd = [float((Fraction(str(a)) - Fraction(str(b))) / (2 * h)) for pa, pb in zip(*vals) for a, b in zip(pa, pb)]
        assert np.allclose(J[:, j], fd, rtol=1e-6, atol=1e-6), (j, J[:, j], fd)
    assert graph_jacobian_identifiability(gm).status == "locally-identifiable"
