"""The digest of theta (``layers_sha256``, issue 26): a canonical form of the declared layers written down in
docs/certificates.md ("digest form 2") and implemented twice, by the prover (``symeq/digest.py``) and by
the checker (``symeq_check/digest.py``), which agree on every model; the form is pinned by a hash computed
here from the documentation alone (no private name of either side enters it); a model file written another
way (decimals, defaults left out, a flatten, a dense layer after a convolution) has the digest of symeq's
rewriting of it; and certificates of older symeq (digest form 1) are still accepted, saying so."""
from __future__ import annotations

import copy
import hashlib
import json

import pytest

import symeq.digest as prover
import symeq_check.digest as checker
from symeq.activations import monomial, real, relu, sigmoid_series, tanh_series
from symeq.groups import builtin_group
from symeq.io import layers_to_json, model_from_json, model_to_json
from symeq.models import random_equivariant_model
from symeq.theorem import verify
from symeq_check import check_certificate


def _zoo():
    """(name, layers JSON, input_dim): dense with every activation family, attention, convolutions."""
    from symeq.attention import random_equivariant_attention
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    out = []
    for i, act in enumerate([tanh_series(3), sigmoid_series(5), relu(), monomial(2), real("tanh"), real("gelu"),
                             real("gelu", approximate="tanh"), real("leaky_relu"), real("elu"), real("sigmoid")]):
        m = random_equivariant_model(builtin_group("mirror:1x2"), ["regular*2"], act, rng=i)
        out.append((act.label if hasattr(act, "label") else str(i), m))
    out.append(("attention", random_equivariant_attention(rng=0)))
    layers, group = regular_network("C4", 5, 1, 2, tanh_series(3), rng=1)
    out.append(("conv C4", Model(25, layers, group)))
    return [(name, json.loads(json.dumps(layers_to_json(m))), m.input_dim) for name, m in out]


ZOO = _zoo()


@pytest.mark.parametrize("name, layers, n", ZOO, ids=[z[0] for z in ZOO])
def test_prover_and_checker_digests_agree(name, layers, n):
    assert prover.layers_digest(layers, n) == checker.layers_digest(layers, n)
    assert prover.canonical_layers(layers) == checker.canonical_layers(layers)


def test_the_form_is_the_documented_one():
    """The hash of the JSON text docs/certificates.md describes, built here by hand."""
    layers = [{"type": "dense", "weight": [["0.5", 2]], "bias": [0], "activation": {"type": "tanh_series", "order": 3}},
              {"type": "dense", "weight": [["6/4"]], "bias": ["-1"], "activation": None}]
    canonical = {"digest_form": 2, "input_dim": 2, "layers": [
        {"type": "dense", "weight": [["1/2", "2"]], "bias": None,
         "activation": {"type": "polynomial", "coeffs": ["0", "1", "0", "-1/3"]}},
        {"type": "dense", "weight": [["3/2"]], "bias": ["-1"], "activation": None}]}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    want = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert prover.layers_digest(layers, 2) == want == checker.layers_digest(layers, 2)
    assert prover.layers_digest(layers, 3) != want  # input_dim is part of it


CONV = {"type": "conv2d", "input_shape": [1, 2, 2], "kernel": [[[["1", "1"], ["2", "2"]]]], "bias": ["1/2"],
        "activation": {"type": "relu"}}
VARIANTS = {  # (as a user may write it, as the same model written differently)
    "decimals and integers": ([{"type": "dense", "weight": [["0.5", "2"]], "bias": ["0"], "activation": {"type": "tanh"}},
                               {"type": "dense", "weight": [[1]], "bias": None, "activation": None}],
                              [{"type": "dense", "weight": [["1/2", 2]], "bias": None, "activation": {"type": "tanh"}},
                               {"type": "dense", "weight": [["1"]], "bias": [0], "activation": None}]),
    "real defaults": ([{"type": "dense", "weight": [["1", "2"]], "bias": ["1"], "activation": {"type": "gelu"}},
                       {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}],
                      [{"type": "dense", "weight": [["1", "2"]], "bias": ["1"],
                        "activation": {"type": "gelu", "approximate": "none"}},
                       {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}]),
    "leaky slope": ([{"type": "dense", "weight": [["1", "2"]], "bias": ["1"], "activation": {"type": "leaky_relu"}},
                     {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}],
                    [{"type": "dense", "weight": [["1", "2"]], "bias": ["1"],
                      "activation": {"type": "leaky_relu", "slope": "0.01"}},
                     {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}]),
    "series as polynomial": ([{"type": "dense", "weight": [["1", "2"]], "bias": ["1"],
                               "activation": {"type": "tanh_series", "order": 3}},
                              {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}],
                             [{"type": "dense", "weight": [["1", "2"]], "bias": ["1"],
                               "activation": {"type": "polynomial", "coeffs": ["0", "1", "0", "-1/3", "0"]}},
                              {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}]),
    "conv defaults, flatten, dense after conv": (
        [dict(CONV, padding=1), {"type": "flatten"},
         {"type": "dense", "weight": [[str(k) for k in range(9)]], "bias": None, "activation": None}],
        [dict(CONV, stride=1, padding=1, padding_mode="zeros"),
         {"type": "conv2d", "kernel": [[[["0", "1", "2"], ["3", "4", "5"], ["6", "7", "8"]]]], "bias": None,
          "activation": None}]),
}


@pytest.mark.parametrize("what", list(VARIANTS))
def test_a_model_written_two_ways_has_one_digest(what):
    a, b = VARIANTS[what]
    n = 4 if "conv" in what else 2
    assert checker.layers_digest(a, n) == checker.layers_digest(b, n) == prover.layers_digest(a, n) \
        == prover.layers_digest(b, n)
    # the prover digests its own rewriting of the file (layers_to_json): the same digest
    data = {"format": "symeq-model/1", "input_dim": n, "layers": a}
    assert prover.layers_digest(layers_to_json(model_from_json(data)), n) == checker.layers_digest(a, n)


def test_a_changed_number_changes_the_digest():
    a = VARIANTS["decimals and integers"][0]
    b = copy.deepcopy(a)
    b[0]["weight"][0][0] = "0.51"
    assert prover.layers_digest(a, 2) != prover.layers_digest(b, 2)
    assert checker.layers_digest(a, 2) != checker.layers_digest(b, 2)


#: digests written by symeq 0.1.0 (digest form 1: the repr of the checker's reading), for these layers
SWAP = [{"type": "dense", "weight": [["1", "2"], ["2", "1"]], "bias": ["1", "1"],
         "activation": {"type": "tanh_series", "order": 3}},
        {"type": "dense", "weight": [["3", "3"]], "bias": None, "activation": None}]
FORM_1 = {"swap": (SWAP, 2, "e0bbc1479c0433210a923f95577b9317a78d7be3c3e036e48c0b06efb64ecfcd"),
          "conv": ([dict(CONV, stride=1, padding=1), {"type": "flatten"},
                    {"type": "dense", "weight": [["1", "1", "1", "2", "2", "2", "3", "3", "3"]], "bias": None,
                     "activation": None}], 4, "6cadfbb193866c9fba325ac0ea260743a2bd2254230b6ad2b5b37ec11f5d9fb9"),
          "gelu": ([{"type": "dense", "weight": [["1", "-1"], ["1", "2"]], "bias": ["0", "1"],
                     "activation": {"type": "gelu"}},
                    {"type": "dense", "weight": [["1", "1"]], "bias": None, "activation": None}], 2,
                   "6f4edcc7a8217e18d94d727d5d665617386e8212817a61b840bbf51e640ef832")}


@pytest.mark.parametrize("name", list(FORM_1))
def test_the_legacy_form_is_reproduced(name):
    from symeq_check.model import _layers

    layers, n, old = FORM_1[name]
    assert checker.legacy_digest(_layers(layers, n, "parameters")) == old
    assert checker.layers_digest(layers, n) != old  # form 2 is another text


def _swap_model():
    return {"format": "symeq-model/1", "input_dim": 2, "layers": copy.deepcopy(SWAP),
            "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["1"]]}]}}


def test_an_older_certificate_still_checks_and_says_so():
    model = _swap_model()
    cert = verify(model_from_json(model)).certificate()
    assert cert["parameters"]["layers_sha256"] == prover.layers_digest(model["layers"], 2)
    old = copy.deepcopy(cert)
    old["parameters"]["layers_sha256"] = FORM_1["swap"][2]
    del old["parameters"]["layers"]  # a large model's certificate: the digest alone binds it
    report = check_certificate(old, model)
    assert report.accepted is True, report.reasons
    assert any("digest form 1" in c for c in report.checks)
    other = copy.deepcopy(old)
    other["parameters"]["layers_sha256"] = "0" * 64
    report = check_certificate(other, model)
    assert report.mismatch and report.exit_code == 2


def test_the_certificate_digest_is_the_provers_of_the_model_file():
    model = model_to_json(random_equivariant_model(builtin_group("mirror:1x2"), ["regular*2"], real("tanh"), rng=3))
    cert = verify(model_from_json(model)).certificate()
    assert cert["parameters"]["layers_sha256"] == checker.layers_digest(model["layers"], model["input_dim"])


# ----------------------------------------------------------------------------- graph models (docs/graphs.md)

def _graph_files():
    from test_schema_agreement import GRAPH_FILES

    return {k: f() for k, f in GRAPH_FILES.items()}


@pytest.mark.parametrize("kind", ["residual", "concat", "conv", "pool"])
def test_prover_and_checker_graph_digests_agree(kind):
    """symeq.digest.graph_digest of symeq's written graph and the checker's own graph_sha256 of the file."""
    from symeq.graph.io import graph_to_json
    from symeq_check.graph import graph_digest, read_graph_model

    data = _graph_files()[kind]
    written = graph_to_json(model_from_json(data))
    ours = prover.graph_digest(written["graph"], written["input_dim"], written.get("output", written["graph"][-1]["name"]))
    assert graph_digest(read_graph_model(data)) == ours == graph_digest(read_graph_model(written))


def test_the_graph_form_is_the_documented_one():
    """The residual file is in canonical form already (reduced numbers, null biases): its digest is the hash of
    the documented object, built here from docs/graphs.md alone."""
    from symeq_check.graph import graph_digest, read_graph_model

    data = _graph_files()["residual"]
    nodes = copy.deepcopy(data["graph"])
    text = json.dumps({"digest_form": 2, "input_dim": 2, "output": "head", "graph": nodes},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert graph_digest(read_graph_model(data)) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert prover.graph_digest(data["graph"], 2, "head") == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_graph_written_two_ways_has_one_digest_and_a_changed_number_another():
    from symeq_check.graph import graph_digest, read_graph_model

    files = _graph_files()
    base = graph_digest(read_graph_model(files["conv"]))
    shaped = copy.deepcopy(files["conv"])
    shaped["graph"][1]["layers"][0]["input_shape"] = [1, 2, 2]  # the inherited shape, written out
    shaped["graph"][0]["layers"][0]["kernel"] = [[[["4/2"]]]]
    shaped["graph"][1]["layers"][0]["bias"] = ["0"]
    assert graph_digest(read_graph_model(shaped)) == base
    shaped["graph"][0]["layers"][0]["bias"] = ["1/2"]
    assert graph_digest(read_graph_model(shaped)) != base


def test_a_graph_certificates_digest_is_the_checkers():
    from symeq_check.graph import graph_digest, read_graph_model

    data = _graph_files()["residual"]
    cert = verify(model_from_json(data)).certificate()
    assert cert["parameters"]["graph_sha256"] == graph_digest(read_graph_model(data))
    assert check_certificate(cert, data).exit_code == 0


def test_a_raw_graph_file_has_the_digest_of_its_written_form():
    """graph_digest canonicalises any graph file symeq reads (docs/graphs.md): a conv2d reading an image node
    that leaves out ``input_shape`` (it inherits the node's shape) digests as symeq's written form, with the
    checker's digest equal; a changed kernel entry changes it."""
    import sys
    from pathlib import Path

    from symeq.graph.io import graph_to_json
    from symeq_check.graph import graph_digest, read_graph_model

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
    from graph_networks import conv_residual

    data = conv_residual()
    block = data["graph"][1]["layers"][0]
    assert block["type"] == "conv2d" and "input_shape" not in block
    written = graph_to_json(model_from_json(data))
    raw = prover.graph_digest(data["graph"], data["input_dim"], "head")
    assert raw == prover.graph_digest(written["graph"], written["input_dim"], written["output"])
    assert raw == graph_digest(read_graph_model(data)) == graph_digest(read_graph_model(written))
    changed = copy.deepcopy(data)
    changed["graph"][1]["layers"][0]["kernel"][0][0][0][0] += 1
    assert prover.graph_digest(changed["graph"], 16, "head") != raw
