"""Average pooling (``avgpool2d``, ``global_avgpool``: folded exactly into the next conv2d or dense layer) is read
by the prover and by the checker alike: every mutation of such model files is accepted by both or refused by
both, the files symeq refuses (a pooling at the end, two in a row, a max pooling or a conv2d after a global one,
a padded convolution after windows that do not tile the image) the checker refuses too, and a certificate of a
model with average pooling, written by ``symeq verify``, is accepted by ``symeq check`` on that model file
(its digest is of the folded layers on both sides), while a changed pooling is a mismatch."""
from __future__ import annotations

import copy
import json

import pytest

from json_mutations import field_mutations
from symeq.cli import main
from test_schema_agreement import _checker, _checker_any, _prover
from test_strict_files import _mutations

R = {"type": "relu"}
T3 = {"type": "tanh_series", "order": 3}


def _lift():
    """A C4-equivariant lifting: one 3x3 kernel turned four times, 1 x 4 x 4 images to 4 x 4 x 4."""
    k = [["1", "2", "0"], ["-1", "1/2", "1"], ["0", "1", "3"]]
    turns = [k]
    for _ in range(3):
        turns.append([list(r) for r in zip(*turns[-1][::-1])])
    return {"type": "conv2d", "input_shape": [1, 4, 4], "kernel": [[t] for t in turns], "bias": ["1/8"] * 4,
            "padding": 1, "activation": T3}


def _file(*layers, group=True):
    data = {"format": "symeq-model/1", "name": "avg", "input_dim": 16, "layers": [_lift(), *layers]}
    if group:
        from symeq.groups.builtins import builtin_group

        data["group"] = builtin_group("rot90:4", output=1).to_json()
    return data


def _dense(n, act=None):
    return {"type": "dense", "weight": [["1"] * n], "bias": None, "activation": act}


FILES = {
    "global": lambda: _file({"type": "global_avgpool"}, {"type": "flatten"}, _dense(4)),
    "avg dense": lambda: _file({"type": "avgpool2d", "kernel_size": 2}, {"type": "flatten"}, _dense(16)),
    "avg conv padded": lambda: _file({"type": "avgpool2d", "kernel_size": 2},
                                     {"type": "conv2d", "kernel": [[[["0", "1", "0"], ["1", "2", "1"], ["0", "1", "0"]]] * 4],
                                      "padding": 1, "bias": None, "activation": T3},
                                     {"type": "flatten"}, _dense(4)),
    "avg stride 1": lambda: _file({"type": "avgpool2d", "kernel_size": 2, "stride": 1}, {"type": "flatten"}, _dense(36)),
}


@pytest.mark.parametrize("kind", list(FILES))
def test_verify_writes_a_certificate_check_accepts(kind, tmp_path, capsys):
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(FILES[kind]()))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    capsys.readouterr()
    assert main(["check", str(cert), str(path)]) == 0
    assert "accepted" in capsys.readouterr().out


def test_the_certificate_is_bound_to_the_pooling(tmp_path, capsys):
    """The digest is of the folded layers: a file with another pooling stride is another model (exit 2)."""
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(FILES["avg stride 1"]()))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    path.write_text(json.dumps(FILES["avg dense"]()))  # stride 2 (the kernel size), its readout of 16 ones
    capsys.readouterr()
    assert main(["check", str(cert), str(path)]) == 2
    assert "digest" in capsys.readouterr().out


def test_a_broken_network_behind_a_pooling_is_refuted_and_the_witness_checks(tmp_path, capsys):
    data = _file({"type": "avgpool2d", "kernel_size": 2},
                 {"type": "conv2d", "kernel": [[[["1", "-1"], ["2", "1/3"]]] * 4], "bias": None, "activation": None})
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 1
    assert main(["check", str(cert), str(path)]) == 0


@pytest.mark.parametrize("layers", [
    [{"type": "avgpool2d", "kernel_size": 2}],                                                   # at the end
    [{"type": "avgpool2d", "kernel_size": 2}, {"type": "global_avgpool"}, _dense(4)],            # two in a row
    [{"type": "avgpool2d", "kernel_size": 2}, {"type": "maxpool2d", "kernel_size": 2}, {"type": "flatten"}, _dense(1)],
    [{"type": "global_avgpool"}, {"type": "conv2d", "kernel": [[[["1"]]] * 4], "bias": None, "activation": None}],
    [{"type": "avgpool2d", "kernel_size": 5}, _dense(1)],                                        # does not fit
    [{"type": "avgpool2d", "kernel_size": 3, "stride": 1},                                        # windows do not tile
     {"type": "conv2d", "kernel": [[[["1"]]] * 4], "padding": 1, "bias": None, "activation": None}],
    [{"type": "avgpool2d", "kernel_size": 2, "stride": 0}, _dense(16)],
])
def test_the_files_symeq_refuses_the_checker_refuses(layers):
    data = _file(*copy.deepcopy(layers), group=False)
    assert not _prover(data)[0] and not _checker(data)[0], (_prover(data), _checker(data))


@pytest.mark.parametrize("kind", ["global", "avg conv padded"])
def test_prover_and_checker_agree_on_every_mutation(kind):
    data = FILES[kind]()
    data.pop("group")
    assert _prover(data)[0] and _checker(data)[0]
    disagree = []
    for what, mutated in [(w, m) for w, m, _ in _mutations(data)] + list(field_mutations(data)):
        p, c = _prover(mutated), _checker_any(mutated)
        if p[0] != c[0]:
            disagree.append(f"{what}: prover {'accepts' if p[0] else 'refuses: ' + p[1]}; "
                            f"checker {'accepts' if c[0] else 'refuses: ' + c[1]}")
    assert not disagree, "\n".join(disagree[:20])


def test_a_trailing_flatten_does_not_hide_the_last_layer_rule():
    """[conv2d with an activation, flatten]: its last layer is the conv2d, which must be affine; symeq refused this
    file and the checker read it (a flatten counted as the last layer) until 2026-12-04."""
    hidden_last = _file({"type": "flatten"}, group=False)
    assert not _prover(hidden_last)[0] and not _checker(hidden_last)[0]
    affine_last = _file({"type": "flatten"}, group=False)
    affine_last["layers"][0]["activation"] = None
    assert _prover(affine_last)[0] and _checker(affine_last)[0]


def test_a_graph_segment_with_average_pooling_is_read_and_its_certificate_accepted(tmp_path, capsys):
    """A global average pooling reading an image node (its input_shape inherited) in a graph segment: both read
    the file, and the graph certificate symeq verify writes (digest of the folded segment) is accepted."""
    flip = [[1 if c == (r ^ 1) else 0 for c in range(4)] for r in range(4)]
    data = {"format": "symeq-model/1", "input_dim": 4,
            "graph": [{"name": "stem", "input": "input", "layers": [{"type": "conv2d", "input_shape": [1, 2, 2],
                                                                    "kernel": [[[["2"]]]], "bias": ["1"],
                                                                    "activation": R}]},
                      {"name": "block", "input": "stem",
                       "layers": [{"type": "conv2d", "kernel": [[[["-1"]]]], "bias": None, "activation": None}]},
                      {"name": "sum", "add": ["stem", "block"], "activation": {"type": "polynomial",
                                                                               "coeffs": ["0", "0", "1"]}},
                      {"name": "head", "input": "sum", "layers": [{"type": "global_avgpool"}, {"type": "flatten"},
                                                                  _dense(1)]}],
            "group": {"generators": [{"input": flip, "output": [[1]]}]}}
    assert _prover(data)[0] and _checker_any(data)[0]
    path, cert = tmp_path / "g.json", tmp_path / "g.cert.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    capsys.readouterr()
    assert main(["check", str(cert), str(path)]) == 0
