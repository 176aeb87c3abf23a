"""The certificate checker on graph models (docs/graphs.md, docs/certificates.md "Graph models"): the strict
reading of the graph form, the checker's own ``graph_sha256``, hand-written certificates of a residual net, a
concatenation and a conv2d residual block (accepted), and their tampered copies (refused): a changed weight,
a wrong action, a wrong order of the spaces, a forged activation-group claim, a witness that breaks nothing.
The certificates here are written by hand, independently of symeq's prover (tests/checker/test_schema_agreement.py
and tests/checker/test_digest_forms.py hold the prover and the checker to one reading and one digest)."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from symeq_check import CheckError, check_certificate
from symeq_check.command import main
from symeq_check.graph import _forward, graph_digest, read_graph_model

R = {"type": "relu"}
SWAP = {"kind": "monomial", "source": [1, 0], "factor": ["1", "1"]}
SWAP2 = [[0, 1], [1, 0]]


def dense(w, b=None, act=R):
    return {"type": "dense", "weight": w, "bias": b, "activation": act}


def residual():
    """relu(s + W2 relu(W1 s + b)) with s = relu(x), a head; every matrix commutes with the swap."""
    return {"format": "symeq-model/1", "name": "residual", "input_dim": 2,
            "graph": [{"name": "stem", "input": "input", "layers": [dense([["1", "0"], ["0", "1"]])]},
                      {"name": "block", "input": "stem", "layers": [dense([["2", "1"], ["1", "2"]], ["1", "1"]),
                                                                    dense([["1", "3"], ["3", "1"]], None, None)]},
                      {"name": "sum", "add": ["stem", "block"], "activation": R},
                      {"name": "head", "input": "sum", "layers": [dense([["5", "2"], ["2", "5"]], None, None)]}],
            "output": "head", "group": {"generators": [{"input": SWAP2, "output": SWAP2}]}}


def certificate(model, spaces, actions, verdict="layerwise-equivariant", **extra):
    gm = read_graph_model(model)
    cert = {"format": "symeq-certificate/2", "verdict": verdict, "input_dim": model["input_dim"],
            "group": model["group"], "model_name": model.get("name"),
            "parameters": {"graph_sha256": graph_digest(gm), "graph": copy.deepcopy(model["graph"]),
                           "output": gm.output, "reparametrized": False}}
    if verdict == "layerwise-equivariant":
        cert.update(spaces=spaces, latent_groups=["relu"] * len(spaces), latent_actions=actions,
                    latent_offsets=[[None] * len(actions[0]) for _ in actions])
    cert.update(extra)
    return cert


def residual_certificate(model=None):
    model = residual() if model is None else model
    return certificate(model, ["stem", "block.1", "block", "sum"], [[SWAP]] * 4)


def test_a_hand_made_residual_certificate_is_accepted():
    report = check_certificate(residual_certificate(), residual())
    assert report.accepted is True and report.exit_code == 0, report.lines()
    assert any("space sum" in c and "add" in c for c in report.checks)
    assert any("homomorphism: group of order 2" in c for c in report.checks)


def test_a_changed_weight_in_the_model_is_another_model_exit_2():
    model = residual()
    cert = residual_certificate(model)
    model["graph"][1]["layers"][0]["weight"][0][0] = "3"
    report = check_certificate(cert, model)
    assert report.exit_code == 2 and any("graph_sha256" in r for r in report.reasons)


def test_a_changed_weight_in_the_certificates_copy_contradicts_its_digest():
    cert = residual_certificate()
    cert["parameters"]["graph"][1]["layers"][0]["weight"][0][0] = "3"
    report = check_certificate(cert, residual())
    assert report.exit_code == 1 and any("copy of the graph" in r for r in report.reasons)


def test_a_wrong_action_is_rejected():
    cert = residual_certificate()
    cert["latent_actions"][1] = [{"kind": "monomial", "source": [0, 1], "factor": ["1", "1"]}]  # block.1: identity
    report = check_certificate(cert, residual())
    assert report.exit_code == 1 and any("space block.1" in r for r in report.reasons), report.lines()


def test_an_addition_whose_inputs_act_differently_is_rejected():
    cert = residual_certificate()
    cert["latent_actions"][2] = [{"kind": "dense", "matrix": [["0", "2"], ["2", "0"]]}]  # block: 2 swap
    report = check_certificate(cert, residual())
    assert report.exit_code == 1 and any("space block," in r for r in report.reasons), report.lines()
    assert any("space sum" in r and "differ" in r for r in report.reasons), report.lines()


def test_a_wrong_order_of_the_spaces_is_rejected():
    cert = residual_certificate()
    cert["spaces"] = ["block.1", "stem", "block", "sum"]
    report = check_certificate(cert, residual())
    assert report.exit_code == 1 and any("spaces must name" in r for r in report.reasons)


def test_a_forged_activation_group_claim_is_rejected():
    """A negative monomial on relu spaces is no element of relu's latent group (positive monomials), even if
    the affine identities around it held."""
    model = residual()
    model["graph"][3]["layers"][0]["weight"] = [["0", "0"], ["0", "0"]]
    neg = {"kind": "monomial", "source": [1, 0], "factor": ["-1", "-1"]}
    cert = certificate(model, ["stem", "block.1", "block", "sum"], [[SWAP], [SWAP], [SWAP], [neg]])
    report = check_certificate(cert, model)
    assert report.exit_code == 1 and any("space sum" in r and "latent group" in r for r in report.reasons)


def test_the_actions_must_match_the_number_of_hidden_spaces():
    cert = residual_certificate()
    cert["latent_actions"] = cert["latent_actions"][:3]
    assert check_certificate(cert, residual()).exit_code == 1


def concat_model():
    """Two relu branches of the swapped input, concatenated; the head sums the blocks (equivariant)."""
    return {"format": "symeq-model/1", "input_dim": 2,
            "graph": [{"name": "a", "input": "input", "layers": [dense([["1", "0"], ["0", "1"]])]},
                      {"name": "b", "input": "input", "layers": [dense([["0", "1"], ["1", "0"]], ["1", "1"])]},
                      {"name": "cat", "concat": ["a", "b"], "activation": R},
                      {"name": "head", "input": "cat",
                       "layers": [dense([["1", "0", "2", "0"], ["0", "1", "0", "2"]], None, None)]}],
            "group": {"generators": [{"input": SWAP2, "output": SWAP2}]}}


def test_a_concatenation_certificate_is_accepted_and_its_block_order_matters():
    model = concat_model()
    block = {"kind": "monomial", "source": [1, 0, 3, 2], "factor": ["1"] * 4}
    cert = certificate(model, ["a", "b", "cat"], [[SWAP], [SWAP], [block]])
    assert check_certificate(cert, model).exit_code == 0
    cert["latent_actions"][2] = [{"kind": "monomial", "source": [3, 2, 1, 0], "factor": ["1"] * 4}]
    report = check_certificate(cert, model)
    assert report.exit_code == 1 and any("space cat" in r for r in report.reasons)


def conv_model():
    """A conv2d residual block on a 1 x 2 x 2 image, equivariant under the horizontal flip of the pixels."""
    flip = [[1 if c == (r ^ 1) else 0 for c in range(4)] for r in range(4)]
    conv = {"type": "conv2d", "input_shape": [1, 2, 2], "kernel": [[[["2"]]]], "bias": ["1"], "activation": R}
    return {"format": "symeq-model/1", "input_dim": 4,
            "graph": [{"name": "stem", "input": "input", "layers": [conv]},
                      {"name": "block", "input": "stem",   # a conv2d reading an image node: no input_shape
                       "layers": [{"type": "conv2d", "kernel": [[[["-1"]]]], "bias": None, "activation": None}]},
                      {"name": "sum", "add": ["stem", "block"], "activation": {"type": "polynomial",
                                                                               "coeffs": ["0", "0", "1"]}},
                      {"name": "head", "input": "sum", "layers": [{"type": "flatten"},
                                                                  dense([["1", "1", "0", "0"], ["1", "1", "0", "0"],
                                                                         ["0", "0", "1", "1"], ["0", "0", "1", "1"]],
                                                                        None, None)]}],
            "group": {"generators": [{"input": flip, "output": flip}]}}


def test_a_conv_residual_certificate_with_channel_pixel_actions_is_accepted():
    model = conv_model()
    cp = {"kind": "channel-pixel", "height": 2, "width": 2, "channels": {"source": [0], "factor": ["1"]},
          "pixels": [1, 0, 3, 2]}
    cert = certificate(model, ["stem", "block", "sum"], [[cp]] * 3)
    report = check_certificate(cert, model)
    assert report.exit_code == 0, report.lines()
    cert["latent_actions"][0] = [dict(cp, pixels=[2, 3, 0, 1])]  # the vertical flip: wrong
    assert check_certificate(cert, model).exit_code == 1


def test_an_exact_witness_of_a_graph_is_re_evaluated_through_the_graph():
    model = residual()
    model["graph"][1]["layers"][0]["weight"] = [["2", "0"], ["1", "2"]]  # no longer swap-equivariant
    x = ["1", "0"]
    witness = {"generator": 0, "x": x}
    cert = certificate(model, None, None, verdict="not-equivariant",
                       equivariance={"holds": False, "method": "exact", "witness": witness})
    report = check_certificate(cert, model)
    assert report.exit_code == 0, report.lines()
    gm = read_graph_model(model)
    assert _forward(gm, (0, 1)) != tuple(reversed(_forward(gm, (1, 0))))
    cert["equivariance"]["witness"] = {"generator": 0, "x": ["0", "0"]}  # f(0) is swap-symmetric
    assert check_certificate(cert, model).exit_code == 1


def test_a_ball_witness_of_a_graph_with_tanh_uses_the_checkers_intervals():
    model = residual()
    model["graph"][2]["activation"] = {"type": "tanh"}
    model["graph"][3]["layers"][0]["weight"] = [["1", "0"], ["0", "2"]]  # the head breaks the swap
    witness = {"kind": "arb", "generator": 0, "x": ["1", "0"], "precision": 64, "output": 0,
               "enclosures": [["-100", "-1/1000"], ["-100", "100"]]}
    cert = certificate(model, None, None, verdict="not-equivariant",
                       equivariance={"holds": False, "method": "exact", "witness": witness})
    report = check_certificate(cert, model)
    assert report.exit_code == 0, report.lines()
    witness["enclosures"][0] = ["1", "2"]  # disjoint from the checker's own enclosure
    assert check_certificate(cert, model).exit_code == 1


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(layers=[dense([["1", "0"]], None, None)]), "not both"),
    (lambda m: m.pop("graph"), "neither"),
    (lambda m: m["graph"][0].update(biass=1), 'unknown key "biass"'),
    (lambda m: m["graph"][2].update(concat=["stem", "block"]), "exactly one of"),
    (lambda m: m["graph"][1].update(input="sum"), "not \"input\" or a node listed before"),
    (lambda m: m["graph"][0].update(name="input"), "reserved"),
    (lambda m: m["graph"][1].update(name="stem"), "used twice"),
    (lambda m: m["graph"][0].update(name="1st"), "must match"),
    (lambda m: m["graph"][2].update(add=["stem"]), "at least 2"),
    (lambda m: m.update(output="block"), "dead"),
    (lambda m: m.update(output="nowhere"), "not a node"),
    (lambda m: m["graph"][3].update(input="block"), "affine"),
    (lambda m: m["graph"][1]["layers"][1].update(weight=[["1", "0"]]), "add"),
    (lambda m: m["graph"][1]["layers"][0].update(activation=None), "hidden layer needs"),
    (lambda m: m["graph"][2].update(activation={"type": "polynomial", "coeffs": ["1", "2"]}), "degree 1"),
    (lambda m: m["graph"][0]["layers"].insert(0, {"type": "attention", "tokens": 1, "heads": []}),
     "layers[0]: attention (token mixing) is not allowed"),
    (lambda m: m["graph"][0].update(layers=[{"type": "flatten"}]), "a segment needs a layer"),
])
def test_the_graph_form_is_read_strictly(change, message):
    model = residual()
    change(model)
    with pytest.raises(CheckError, match=None) as exc:
        read_graph_model(model)
    assert message in str(exc.value), str(exc.value)


def test_images_are_checked_at_additions_and_concatenations():
    model = conv_model()
    model["graph"][2] = {"name": "sum", "add": ["stem", "input"], "activation": R}  # an image and a vector
    with pytest.raises(CheckError, match="image shape"):
        read_graph_model(model)
    model = conv_model()
    model["graph"][1]["layers"][0]["input_shape"] = [1, 4, 1]
    with pytest.raises(CheckError, match="expects images of shape"):
        read_graph_model(model)


def test_the_graph_digest_is_of_the_canonical_form():
    a = read_graph_model(residual())
    model = residual()
    model["graph"][1]["layers"][0]["weight"][0] = ["4/2", "1.0"]  # the same numbers written otherwise
    model["graph"][1]["layers"][1]["bias"] = ["0", "0"]           # zero bias reads as null
    del model["output"]                                           # the default output is the last node
    assert graph_digest(read_graph_model(model)) == graph_digest(a)
    model["graph"][2]["activation"] = {"type": "monomial", "degree": 2}
    assert graph_digest(read_graph_model(model)) != graph_digest(a)
    model["graph"][2]["activation"] = {"type": "polynomial", "coeffs": ["0", "0", "1", "0"]}  # the same t^2
    b = graph_digest(read_graph_model(model))
    model["graph"][2]["activation"] = {"type": "monomial", "degree": 2}
    assert graph_digest(read_graph_model(model)) == b
    assert len(graph_digest(a)) == 64 and int(graph_digest(a), 16) >= 0


def test_a_chain_certificate_and_a_graph_model_are_not_about_one_model(tmp_path):
    cert = residual_certificate()
    chain = {"format": "symeq-model/1", "input_dim": 2, "layers": [dense(SWAP2, None, None)]}
    with pytest.raises(CheckError, match="graph model"):
        check_certificate(cert, chain)
    cert["parameters"] = {"layers_sha256": "0" * 64, "reparametrized": False}
    with pytest.raises(CheckError):
        check_certificate(cert, residual())


def test_the_command_and_the_zipapp_check_a_graph_certificate(tmp_path, capsys):
    model, cert = tmp_path / "res.model.json", tmp_path / "res.cert.json"
    model.write_text(json.dumps(residual()))
    cert.write_text(json.dumps(residual_certificate()))
    assert main([str(cert), str(model)]) == 0
    assert "result: accepted" in capsys.readouterr().out
    pyz = tmp_path / "symeq_check.pyz"
    assert main(["--zipapp", str(pyz)]) == 0
    bad = json.loads(cert.read_text())
    bad["latent_actions"][3] = [{"kind": "monomial", "source": [0, 1], "factor": ["1", "1"]}]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    for c, code in ((cert, 0), (tmp_path / "bad.json", 1)):
        out = subprocess.run([sys.executable, "-I", "-S", str(pyz), str(c), str(model)], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == code, out.stdout + out.stderr


def _verify_then_check(tmp_path, model, capsys):
    from symeq.cli import main as symeq

    path, cert = tmp_path / "net.json", tmp_path / "net.cert.json"
    path.write_text(json.dumps(model))
    code = symeq(["verify", str(path), "--certificate", str(cert)])
    capsys.readouterr()
    return code, path, cert


def test_symeq_verify_writes_a_graph_certificate_that_symeq_check_accepts_and_a_tampered_one_not(tmp_path, capsys):
    """End to end (docs/graphs.md): symeq's prover writes it, this checker re-verifies it on its own."""
    from symeq.cli import main as symeq

    code, path, cert = _verify_then_check(tmp_path, residual(), capsys)
    assert code == 0
    written = json.loads(cert.read_text())
    assert written["spaces"] == ["stem", "block.1", "block", "sum"]
    assert symeq(["check", str(cert), str(path)]) == 0
    tampered = copy.deepcopy(written)
    tampered["latent_actions"][1] = [{"kind": "monomial", "source": [0, 1], "factor": ["1", "1"]}]
    (tmp_path / "t1.json").write_text(json.dumps(tampered))
    assert symeq(["check", str(tmp_path / "t1.json"), str(path)]) == 1
    tampered = copy.deepcopy(written)
    tampered["spaces"] = list(reversed(written["spaces"]))
    (tmp_path / "t2.json").write_text(json.dumps(tampered))
    assert symeq(["check", str(tmp_path / "t2.json"), str(path)]) == 1
    changed = residual()
    changed["graph"][3]["layers"][0]["weight"][0][0] = "6"
    (tmp_path / "other.json").write_text(json.dumps(changed))
    assert symeq(["check", str(cert), str(tmp_path / "other.json")]) == 2
    assert "graph_sha256" in capsys.readouterr().out


def test_symeq_verifys_graph_witness_is_re_evaluated_by_the_checker(tmp_path, capsys):
    model = residual()
    model["graph"][1]["layers"][0]["weight"] = [["2", "0"], ["1", "2"]]
    code, path, cert = _verify_then_check(tmp_path, model, capsys)
    assert code == 1
    written = json.loads(cert.read_text())
    assert written["verdict"] == "not-equivariant"
    assert check_certificate(written, model).exit_code == 0
    x = written["equivariance"]["witness"]["x"]
    written["equivariance"]["witness"]["x"] = ["0"] * len(x)  # f(0) is swap-symmetric: no witness
    assert check_certificate(written, model).exit_code == 1


def test_symeq_verifys_conv_graph_certificate_is_accepted(tmp_path, capsys):
    code, path, cert = _verify_then_check(tmp_path, conv_model(), capsys)
    assert code == 0
    assert check_certificate(json.loads(cert.read_text()), conv_model()).exit_code == 0


def test_symeq_verifys_certificates_with_real_activations_and_pooling_are_accepted():
    """A tanh addition (signed permutations), its arb-ball refutation, and a maxpool2d in a segment."""
    from symeq.io import model_from_json
    from symeq.theorem import verify

    model = residual()
    model["graph"][2]["activation"] = {"type": "tanh"}
    cert = verify(model_from_json(model)).certificate()
    assert cert["verdict"] == "layerwise-equivariant" and check_certificate(cert, model).exit_code == 0
    model["graph"][3]["layers"][0]["weight"] = [["1", "0"], ["0", "2"]]
    cert = verify(model_from_json(model)).certificate()
    assert cert["equivariance"]["witness"]["kind"] == "arb"
    assert check_certificate(cert, model).exit_code == 0
    pooled = conv_model()
    pooled["graph"][3]["layers"] = [{"type": "maxpool2d", "kernel_size": 2, "stride": 2}, {"type": "flatten"},
                                    dense([["3"]], None, None)]
    pooled["group"]["generators"][0]["output"] = [["1"]]
    cert = verify(model_from_json(pooled)).certificate()
    assert cert["verdict"] == "layerwise-equivariant"
    assert check_certificate(cert, pooled).exit_code == 0
    bad = copy.deepcopy(cert)
    bad["latent_actions"][3] = [{"kind": "monomial", "source": [0], "factor": ["2"]}]  # after the pool: 2, not 1
    report = check_certificate(bad, pooled)
    assert report.exit_code == 1 and any("space head.1" in r and "factor" in r for r in report.reasons)
    cert["latent_actions"][0] = [{"kind": "monomial", "source": [2, 3, 0, 1], "factor": ["1"] * 4}]
    assert check_certificate(cert, pooled).exit_code == 1


def test_a_conv_graph_beyond_the_dense_size_guard_is_checked_on_its_kernels(monkeypatch):
    """Channel-pixel actions are checked on the kernels (symeq_check.conv), never on dense matrices: with the
    dense size guard at 1 entry the conv residual block is still verified, and a mirrored action still refused;
    a non-channel-pixel (dense) action on a conv2d space is beyond the guard: exit 3, not a guess."""
    import symeq_check.graph as graph

    monkeypatch.setattr(graph, "MAX_DENSE", 1)
    model = conv_model()
    cp = {"kind": "channel-pixel", "height": 2, "width": 2, "channels": {"source": [0], "factor": ["1"]},
          "pixels": [1, 0, 3, 2]}
    model["graph"][3]["layers"] = [{"type": "conv2d", "kernel": [[[["3"]]]], "bias": None, "activation": None}]
    cert = certificate(model, ["stem", "block", "sum"], [[cp]] * 3)
    assert check_certificate(cert, model).exit_code == 0
    cert["latent_actions"][0] = [dict(cp, pixels=[2, 3, 0, 1])]
    assert check_certificate(cert, model).exit_code == 1
    cert["latent_actions"][0] = [dict(cp, channels={"source": [0], "factor": ["2"]})]  # relu(2 (2x) + 1) != 2 relu(2x + 1)
    report = check_certificate(cert, model)
    assert report.exit_code == 1 and any("space stem" in r for r in report.reasons), report.lines()
    cert["latent_actions"][0] = [cp]
    shear = [["0", "1", "0", "0"], ["1", "0", "0", "0"], ["0", "0", "0", "1"], ["1", "0", "1", "0"]]
    cert["latent_actions"][1] = [{"kind": "dense", "matrix": shear}]  # the affine space: no latent group
    report = check_certificate(cert, model)
    assert report.exit_code == 3 and any("larger than" in c for c in report.checks), report.lines()


def test_a_ball_witness_through_conv_layers_uses_the_checkers_own_intervals():
    import math
    from fractions import Fraction

    model = conv_model()
    model["graph"][0]["layers"][0]["activation"] = {"type": "tanh"}
    model["graph"][1]["layers"][0]["kernel"] = [[[["-1/2"]]]]
    model["graph"][3]["layers"][1]["weight"][0] = ["1", "2", "0", "0"]  # the head breaks the mirror
    # floats only to write the claim (the checker re-proves it with its own intervals): the sum's pixels are
    # (tanh(2 x_p + 1) / 2)^2; output 0 of f(P x) is t_0 + 2 t_1, output 0 of Q f(x) is f(x)'s output 1, s_0 + s_1
    s = [(math.tanh(2 * v + 1) / 2) ** 2 for v in (1, 0, 0, 0)]
    t = [(math.tanh(2 * v + 1) / 2) ** 2 for v in (0, 1, 0, 0)]
    d = (t[0] + 2 * t[1]) - (s[0] + s[1])
    claim = [[str(Fraction(d - 0.01).limit_denominator(1000)), str(Fraction(d + 0.01).limit_denominator(1000))]]
    claim += [["-100", "100"]] * 3
    witness = {"kind": "arb", "generator": 0, "x": ["1", "0", "0", "0"], "precision": 64, "output": 0,
               "enclosures": claim}
    cert = certificate(model, None, None, verdict="not-equivariant",
                       equivariance={"holds": False, "method": "arb-witness", "witness": witness})
    assert abs(d) > 0.05
    report = check_certificate(cert, model)
    assert report.exit_code == 0, report.lines()
    witness["enclosures"][0] = [str(Fraction(-d - 0.02).limit_denominator(1000)), str(Fraction(-d).limit_denominator(1000))]
    assert check_certificate(cert, model).exit_code == 1


def test_a_group_relation_broken_on_some_space_is_caught_by_the_homomorphism():
    """The swap has order 2 on the input; a 3-cycle on the outputs does not: with a zero head every node's
    identity holds, and only the homomorphism over all spaces refuses the certificate."""
    model = residual()
    model["graph"][3]["layers"][0]["weight"] = [["0", "0"]] * 3
    model["group"] = {"generators": [{"input": SWAP2, "output": [[0, 1, 0], [0, 0, 1], [1, 0, 0]]}]}
    report = check_certificate(certificate(model, ["stem", "block.1", "block", "sum"], [[SWAP]] * 4), model)
    assert report.exit_code == 1 and any(r.startswith("homomorphism") for r in report.reasons), report.lines()
    assert not any(r.startswith("space") for r in report.reasons)
