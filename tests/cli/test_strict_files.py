"""Strict files (issue 18): every key of every valid file is mutated -- renamed to a near miss,
deleted, or given an unknown sibling -- and each mutation must give exit 2 (bad input) or the
verdict of the unmutated file, never a different verdict.

The file kinds: dense models (one verified, one refuted), an attention model, a conv2d model, a
model with a group (all of them carry one), a layerwise certificate, a not-equivariant
certificate, identifiability certificates (tensor: both verdicts; deep: Jacobian factors), and the
.npz model layout.  Models are judged by
``symeq verify`` (``symeq.cli.main``), certificates by the standalone checker
(``symeq_check.check_certificate``), all in-process.
"""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from symeq.activations import polynomial
from symeq_check import CheckError, check_certificate
from symeq.cli import main
from symeq.errors import InputError
from symeq.io import model_from_json, model_to_json
from symeq.models import DenseLayer, Model
from symeq.theorem import verify

SWAP = [["0", "1"], ["1", "0"]]
TANH3 = {"type": "tanh_series", "order": 3}
UNKNOWN = "unknown_key"


def _swap_model(bias) -> dict:
    """f(x) = 3 s(x1 + 2 x2 + b1) + 3 s(2 x1 + x2 + b2): swap-invariant iff b1 = b2."""
    return {"format": "symeq-model/1", "name": "swap", "input_dim": 2,
            "layers": [{"type": "dense", "weight": [["1", "2"], ["2", "1"]], "bias": bias, "activation": TANH3},
                       {"type": "dense", "weight": [["3", "3"]], "bias": None, "activation": None}],
            "group": {"label": "swap", "generators": [{"name": "s", "input": SWAP, "output": [["1"]]}]}}


def _attention_model() -> dict:
    from symeq.attention import random_equivariant_attention

    return json.loads(json.dumps(model_to_json(random_equivariant_attention(rng=0))))


def _conv_model() -> dict:
    """A 1 -> 1 channel 2x2 convolution with padding 1 on 2x2 images, mirror-symmetric kernel,
    then flatten and a mirror-invariant readout: equivariant under the horizontal mirror.  (ReLU:
    verify proves it layers first.)"""
    mirror = [[str(int(j == (i // 2) * 2 + 1 - i % 2)) for j in range(4)] for i in range(4)]
    return {"format": "symeq-model/1", "name": "conv", "input_dim": 4,
            "layers": [{"type": "conv2d", "input_shape": [1, 2, 2], "kernel": [[[["1", "1"], ["2", "2"]]]],
                        "stride": 1, "padding": 1, "bias": ["1/2"], "activation": {"type": "relu"}},
                       {"type": "flatten"},
                       {"type": "dense", "weight": [["1", "1", "1", "2", "2", "2", "3", "3", "3"]], "bias": None,
                        "activation": None}],
            "group": {"label": "mirror", "generators": [{"name": "m", "input": mirror, "output": [["1"]]}]}}


def _owned(p, key, o) -> bool:
    """Whether key ``key`` of object ``o`` at path ``p`` is read against a schema (every object of
    a model file and a certificate): not a report the checker does not read."""
    return not ((p == () and key in ("identifiability", "versions", "notes"))
                or (p == ("checks",) and key in ("layers", "candidates_per_generator")))


def _mutations(obj):
    """(description, mutated copy, owned) for every key at every depth: a near-miss rename, a
    deletion, and one unknown sibling per object.  ``owned``: the object's schema is one of this
    issue's (see ``_owned``), so a rename or an unknown key must be refused."""
    def paths(o, p=(), owned=True):
        if isinstance(o, dict):
            yield p, o, owned
            for k, v in o.items():
                yield from paths(v, p + (k,), owned and _owned(p, k, o))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                yield from paths(v, p + (i,), owned)

    def at(root, p):
        for k in p:
            root = root[k]
        return root

    for p, o, owned in list(paths(obj)):
        for key in list(o):
            near = key + key[-1]  # "bias" -> "biass": a near miss, never a known key
            renamed = copy.deepcopy(obj)
            target = at(renamed, p)
            target[near] = target.pop(key)
            yield f"rename {'.'.join(map(str, p + (key,)))} -> {near}", renamed, owned and _owned(p, key, o)
            deleted = copy.deepcopy(obj)
            del at(deleted, p)[key]
            yield f"delete {'.'.join(map(str, p + (key,)))}", deleted, False
        added = copy.deepcopy(obj)
        at(added, p)[UNKNOWN] = 1
        yield f"add {'.'.join(map(str, p + (UNKNOWN,)))}", added, owned


def _verify_code(data, tmp_path, capsys) -> int:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data))
    code = main(["verify", str(path)])
    capsys.readouterr()
    return code


MODELS = {"dense": lambda: _swap_model(["1", "1"]), "dense refuted": lambda: _swap_model(["1", "2"]),
          "attention": _attention_model, "conv2d": _conv_model}
BASELINE = {"dense": 0, "dense refuted": 1, "attention": 0, "conv2d": 0}


@pytest.mark.parametrize("kind", list(MODELS))
def test_every_key_mutation_of_a_model_file(kind, tmp_path, capsys):
    data = MODELS[kind]()
    assert _verify_code(data, tmp_path, capsys) == BASELINE[kind]
    refused = 0
    for what, mutated, ours in _mutations(data):
        code = _verify_code(mutated, tmp_path, capsys)
        assert code in (2, BASELINE[kind]), (kind, what, code)
        if ours and not what.startswith("delete"):
            assert code == 2, (kind, what, "an unknown key must be refused")
        refused += code == 2
    assert refused >= 10


def _certificates():
    dense = _swap_model(["1", "1"])
    refuted = _swap_model(["1", "2"])
    conv = _conv_model()
    out = {"layerwise": (verify(model_from_json(dense)).certificate(), dense),
           "conv2d layerwise": (verify(model_from_json(conv)).certificate(), conv),
           "layerwise dense /1": (verify(model_from_json(dense)).certificate(dense=True), dense),
           "not-equivariant": (verify(model_from_json(refuted)).certificate(), refuted)}
    from symeq.fibre.tensor import tensor_identifiability

    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], polynomial([0, 1, 0, 0, 1])),
                  DenseLayer([[2, -1], [1, 1]], [0, 0], None)])
    out["not-identifiable"] = (tensor_identifiability(m).certificate, model_to_json(m))
    m = Model(3, [DenseLayer([[1, 2, -1], [3, -1, 2], [1, 1, 4]], [1, -2, 3], polynomial([0, 1, 0, 1])),
                  DenseLayer([[2, -1, 1], [1, 1, -3], [0, 2, 5]], [0, 0, 0], None)])
    out["identifiable"] = (tensor_identifiability(m).certificate, model_to_json(m))
    from symeq.activations import monomial

    def circulant(row):  # C_3-equivariant, rank 3, every row with 3 nonzero entries
        return [[row[(j - i) % 3] for j in range(3)] for i in range(3)]

    m = Model(3, [DenseLayer(circulant([1, 2, -1]), [0] * 3, monomial(2)),
                  DenseLayer(circulant([2, -1, 3]), [0] * 3, monomial(3)),
                  DenseLayer(circulant([1, 1, -3]), [0] * 3, None)])
    out["deep identifiable"] = (tensor_identifiability(m).certificate, model_to_json(m))
    return {k: json.loads(json.dumps(v)) for k, v in out.items()}


def _check_code(cert, model) -> int:
    try:
        return check_certificate(cert, model).exit_code
    except CheckError:
        return 2


@pytest.mark.parametrize("kind", ["layerwise", "conv2d layerwise", "layerwise dense /1", "not-equivariant", "not-identifiable",
                                  "identifiable", "deep identifiable"])
def test_every_key_mutation_of_a_certificate(kind):
    cert, model = _certificates()[kind]
    assert cert is not None, kind
    base = _check_code(cert, model)
    assert base == 0, (kind, check_certificate(cert, model).reasons)
    refused = 0
    for what, mutated, ours in _mutations(cert):
        code = _check_code(mutated, model)
        assert code in (2, base), (kind, what, code)
        if ours and not what.startswith("delete"):
            assert code == 2, (kind, what, "an unknown key must be refused")
        refused += code == 2
    assert refused >= 10
    # the model under the certificate is read as strictly (symeq check CERT MODEL)
    for what, mutated, ours in _mutations(model):
        code = _check_code(cert, mutated)
        assert code in (2, base), (kind, "model", what, code)
        if ours and not what.startswith("delete"):
            assert code == 2, (kind, "model", what)


def test_renamed_bias_is_refused_not_read_as_zero(tmp_path, capsys):
    """The acceptance case of issue 18: a refuted model must not become layerwise-equivariant by
    renaming "bias" to "biases"; it exits 2, names the key and suggests "bias"."""
    data = _swap_model(["1", "2"])
    path = tmp_path / "refuted.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 1
    capsys.readouterr()
    data["layers"][0]["biases"] = data["layers"][0].pop("bias")
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert 'unknown key "biases"' in err and 'did you mean "bias"' in err and "layers[0]" in err, err
    assert "Traceback" not in err
    # and without the key at all: "bias" is required (null means no bias)
    del data["layers"][0]["biases"]
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 2
    assert 'missing key "bias"' in capsys.readouterr().err


def test_bias_null_means_no_bias_and_writers_always_write_it():
    m = model_from_json(_swap_model(None))
    assert all(b == 0 for layer in m.layers for b in layer.bias)
    assert all("bias" in layer for layer in model_to_json(m)["layers"])
    with pytest.raises(InputError, match='missing key "bias"'):
        data = _conv_model()
        del data["layers"][0]["bias"]
        model_from_json(data)


def test_checker_refuses_unknown_keys_with_path_and_hint():
    cert, model = _certificates()["layerwise"]
    bad = copy.deepcopy(model)
    bad["layers"][1]["biases"] = bad["layers"][1].pop("bias")
    with pytest.raises(CheckError, match=r'model\.layers\[1\]: unknown key "biases" \(did you mean "bias"\?\)'):
        check_certificate(cert, bad)
    bad = copy.deepcopy(cert)
    bad["latent_offset"] = bad.pop("latent_offsets")
    with pytest.raises(CheckError, match='did you mean "latent_offsets"'):
        check_certificate(bad, model)


def test_npz_model_names_are_strict(tmp_path):
    """Every array of the .npz layout: renamed, deleted or joined by an unknown one, it is refused."""
    from symeq.numeric.models import load_npz

    rng = np.random.default_rng(0)
    arrays = {"weight_0": rng.normal(size=(2, 2)), "bias_0": np.zeros(2), "weight_1": rng.normal(size=(1, 2)),
              "bias_1": np.zeros(1), "activations": np.array(["tanh", "none"]),
              "group_input_0": np.array([[0.0, 1.0], [1.0, 0.0]]), "group_output_0": np.eye(1)}
    good = tmp_path / "good.npz"
    np.savez(good, **arrays)
    assert load_npz(good).widths == [2, 2, 1]
    for name in arrays:
        for mutated in ({**{k: v for k, v in arrays.items() if k != name}, name + "s": arrays[name]},
                        {k: v for k, v in arrays.items() if k != name}):
            p = tmp_path / "bad.npz"
            np.savez(p, **mutated)
            with pytest.raises(InputError):
                load_npz(p)
    p = tmp_path / "extra.npz"
    np.savez(p, **arrays, biases_0=np.zeros(2))
    with pytest.raises(InputError, match='unknown array "biases_0" \\(did you mean "bias_0"\\?\\)'):
        load_npz(p)


def test_npz_data_set_names_are_strict(tmp_path):
    from symeq.numeric.train import load_npz_dataset

    p = tmp_path / "data.npz"
    np.savez(p, x=np.zeros((3, 4)), lables=np.zeros(3))
    with pytest.raises(InputError, match='unknown array "lables"'):
        load_npz_dataset(p)


def test_hunt_file_header_is_strict(tmp_path):
    """A hunt file is read back (resume, --report): its header's keys are checked, so a misspelt
    "seed" cannot make a resume continue a different candidate stream."""
    from symeq.relu.hunt import hunt, report

    out = tmp_path / "h.jsonl"
    hunt("2,4,2", "rot3", out, budget=2)
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    header["sed"] = header.pop("seed")
    out.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    with pytest.raises(InputError, match='unknown key "sed" \\(did you mean "seed"\\?\\)'):
        hunt("2,4,2", "rot3", out, budget=2)
    with pytest.raises(InputError, match='header: unknown key "sed"'):
        report(out)
