"""Softmax attention on the exact path (issue 29, docs/attention.md): the model file keys, the
matching of heads without a score scalar, the exact layer checks, arb witnesses, the float twin."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flint import arb, fmpq

import symeq
from symeq.attention import head_permutation, softmax_mirror_attention
from symeq.cli import main
from symeq.errors import InputError, NotExactError
from symeq.io import model_from_json, model_to_json
from symeq.layers.attention import AttentionLayer, Head, block_monomial_parts, factor_kron
from symeq.models import Model
from symeq.numbers import matrix


def _blocks(v, heads=3, dv=2):
    """[(target head, block)] of the value-space action of the first generator."""
    _, R = factor_kron(v.actions[0][0], 4, heads * dv)
    return [(k, B.entries()) for k, B in block_monomial_parts(R, heads, dv)]


def test_acceptance_model_verifies_with_the_head_actions():
    v = symeq.verify(softmax_mirror_attention())
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 0
    assert head_permutation(v.actions[0][0], tokens=4, heads=3, dv=2) == [1, 0, 2]
    one, sign = [1, 0, 0, 1], [1, 0, 0, -1]
    assert _blocks(v) == [(1, one), (0, one), (2, sign)]   # heads 1, 2 swap; head 3: the sign action
    assert "softmax(P S P^T) = P softmax(S) P^T" in v.derivation.layer_checks[0].detail


def test_perturbed_output_matrix_is_refuted_by_a_ball_witness():
    v = symeq.verify(softmax_mirror_attention(perturb=True))
    assert v.verdict == "not-equivariant" and v.exit_code == 1
    w = v.equivariance.witness
    assert v.equivariance.method == "arb-witness"
    lo, hi = w.enclosures[w.output]
    assert lo > 0 or hi < 0
    # the witness re-evaluated here with balls at another precision still excludes 0
    m = softmax_mirror_attention(perturb=True)
    A, B = m.group.generators[0]
    gx = [sum((A[i, j] * w.x[j] for j in range(8)), fmpq(0)) for i in range(8)]
    fx, fgx = m.layers[0].ball_forward(w.x), m.layers[0].ball_forward(gx)
    diff = fgx[w.output] - sum((arb(B[w.output, j]) * fx[j] for j in range(8)), arb(0))
    assert not diff.contains(0)


def test_no_free_score_scalar():
    """Head 2's score is twice head 1's mirrored score: lightning moves the 2 into V, softmax cannot."""
    C = matrix([[0, 1], [1, 0]])
    A1, V1, O1 = matrix([[1, -1], [0, 2]]), matrix([[2, 1], [-1, 1]]), matrix([[1, 0], [2, -1]])
    A2, V2, O2 = 2 * (C.transpose() * A1 * C), C.transpose() * V1 / 2, O1 * C
    I2 = matrix([[1, 0], [0, 1]])
    heads = [Head(A1, I2, V1, O1), Head(A2, I2, V2, O2)]
    from symeq.groups.tokens import patch_mirror

    light = Model(8, [AttentionLayer(4, heads)], patch_mirror())
    assert symeq.verify(light).verdict == "layerwise-equivariant"
    soft = Model(8, [AttentionLayer(4, [h.copy() for h in heads], None, "softmax")], patch_mirror())
    v = symeq.verify(soft)
    assert v.verdict == "not-equivariant"      # softmax(2 s) != softmax(s): a ball witness proves it
    assert v.equivariance.method == "arb-witness"


def test_rational_scale_and_scale_independence_of_the_checks():
    for scale in (fmpq(1, 3), 2, None):
        assert symeq.verify(softmax_mirror_attention(scale=scale)).verdict == "layerwise-equivariant"
        assert symeq.verify(softmax_mirror_attention(True, scale=scale)).verdict == "not-equivariant"


def test_score_and_output_biases():
    base = softmax_mirror_attention()
    att = base.layers[0]
    C = [[0, 1], [1, 0]]
    # b_2 = C^T b_1 for the swapped pair, C^T b_3 = b_3 for the fixed head; c fixed by C_out
    sb = [[1, -2], [-2, 1], [3, 3]]
    heads = [Head(h.query, h.key, h.value, h.out, b) for h, b in zip(att.heads, sb)]
    good = Model(8, [AttentionLayer(4, heads, None, "softmax", None, [5, 5])], base.group)
    assert symeq.verify(good).verdict == "layerwise-equivariant"
    for bad_sb, bad_c in ((sb, [5, 4]), ([[1, -2], [1, -2], [3, 3]], [5, 5])):
        heads = [Head(h.query, h.key, h.value, h.out, b) for h, b in zip(att.heads, bad_sb)]
        bad = Model(8, [AttentionLayer(4, heads, None, "softmax", None, bad_c)], base.group)
        assert symeq.verify(bad).verdict == "not-equivariant", (bad_sb, bad_c)
    assert C  # the channel action of patch_mirror() is the swap


def test_model_file_round_trip_and_refusals(tmp_path):
    m = softmax_mirror_attention(scale=fmpq(1, 2))
    data = model_to_json(m)
    assert data["layers"][0]["scoring"] == "softmax" and data["layers"][0]["scale"] == "1/2"
    back = model_from_json(json.loads(json.dumps(data)))
    assert back.layers[0].scoring == "softmax" and back.layers[0].scale == fmpq(1, 2)
    assert model_to_json(back) == data
    # lightning files are unchanged: no scoring key written
    from symeq.attention import random_equivariant_attention

    assert "scoring" not in model_to_json(random_equivariant_attention(rng=0))["layers"][0]
    for key, value, words in (("scoring", "cosine", "scoring"), ("scale", 0.5, "exact rational"),
                              ("scale", "-1", "positive"), ("bias", ["1", "2", "3"], "2")):
        bad = json.loads(json.dumps(data))
        bad["layers"][0][key] = value
        with pytest.raises(InputError, match=words):
            model_from_json(bad)
        f = tmp_path / f"bad_{key}.json"
        f.write_text(json.dumps(bad))
        assert main(["verify", str(f)]) == 2
    light = model_to_json(random_equivariant_attention(rng=0))
    light["layers"][0]["scale"] = "1/2"
    with pytest.raises(InputError, match="softmax attention only"):
        model_from_json(light)


def test_cli_exit_codes(tmp_path, capsys):
    for perturb, code in ((False, 0), (True, 1)):
        f = tmp_path / f"m{int(perturb)}.json"
        f.write_text(json.dumps(model_to_json(softmax_mirror_attention(perturb))))
        assert main(["verify", str(f)]) == code
    assert main(["verify", str(tmp_path / "m0.json"), "--identifiability"]) == 3
    out = capsys.readouterr().out
    assert "softmax attention is not polynomial" in out


def test_exact_forward_refuses_and_float_twin_agrees_with_balls():
    m = softmax_mirror_attention()
    from flint import fmpq_mat

    with pytest.raises(NotExactError):
        m.forward(fmpq_mat(8, 1))
    assert not m.is_polynomial
    from symeq.numeric.models import from_exact, model_from_json as numeric_from_json

    x = [fmpq(1, 2), fmpq(-1, 3), 1, 2, 0, fmpq(3, 4), -1, 1]
    balls = m.layers[0].ball_forward(x)
    xf = np.array([[float(fmpq(v).p) / float(fmpq(v).q) for v in x]])
    for twin in (from_exact(m), numeric_from_json(model_to_json(m))):
        assert twin.layers[0].scoring == "softmax"
        got = twin(xf)[0]
        for g, b in zip(got, balls):
            assert abs(g - float(b.mid())) <= 1e-12 + float(b.rad())


def test_heads_are_matched_exactly_not_up_to_a_scalar():
    from symeq.layers.attention import score_key

    A = matrix([[1, 2], [3, 4]])
    assert score_key(A, "lightning")[0] == score_key(2 * A, "lightning")[0]
    assert score_key(A, "softmax")[0] != score_key(2 * A, "softmax")[0]
    assert score_key(A, "softmax", [1, 0])[0] != score_key(A, "softmax")[0]


# -- the certificates and symeq check (symeq_check) ----------------------------------------------

def _certificate(model):
    v = symeq.verify(model)
    return json.loads(json.dumps(v.certificate())), json.loads(json.dumps(model_to_json(model)))


def test_symeq_check_accepts_the_acceptance_certificates(tmp_path):
    from symeq_check import check_certificate

    for perturb in (False, True):
        cert, model = _certificate(softmax_mirror_attention(perturb))
        rep = check_certificate(cert, model)
        assert rep.accepted is True, rep.reasons
        text = " ".join(rep.checks)
        assert ("ball witness" in text) if perturb else ("softmax heads" in text)
        # and through the command line, with files
        c, m = tmp_path / f"c{int(perturb)}.json", tmp_path / f"m{int(perturb)}.json"
        c.write_text(json.dumps(cert))
        m.write_text(json.dumps(model))
        assert main(["check", str(c), str(m)]) == 0


def test_symeq_check_rejects_tampering():
    from symeq_check import CheckError, check_certificate

    cert, model = _certificate(softmax_mirror_attention())
    # head 3's inner sign action flipped: C^T V_3 = V_3 B^T fails
    bad = json.loads(json.dumps(cert))
    blocks = bad["latent_actions"][0][0]["blocks"]
    blocks[2] = [[str(-fmpq(x)) for x in row] for row in blocks[2]]
    rep = check_certificate(bad, model)
    assert rep.accepted is False and any("head 3" in r for r in rep.reasons), rep.reasons
    # the model read as lightning: the heads are checked as polynomials (scores equal, so they still pass),
    # but the file no longer matches the certificate's theta (the digest / copy differs)
    light = json.loads(json.dumps(model))
    del light["layers"][0]["scoring"]
    assert check_certificate(cert, light).accepted is not True
    # a softmax model file with a lightning-only key combination is malformed
    odd = json.loads(json.dumps(model))
    odd["layers"][0]["scoring"] = "lightning"
    odd["layers"][0]["scale"] = "1/2"
    with pytest.raises(CheckError):
        check_certificate(cert, odd)
    # the refutation: a witness whose claimed enclosure is moved off the true value is rejected
    wcert, wmodel = _certificate(softmax_mirror_attention(True))
    w = wcert["equivariance"]["witness"]
    j = w["output"]
    lo, hi = (fmpq(v) for v in w["enclosures"][j])
    shift = 10 * (abs(lo) + abs(hi) + 1)
    w["enclosures"][j] = [str(lo + shift), str(hi + shift)]
    rep = check_certificate(wcert, wmodel)
    assert rep.accepted is False and any("disjoint" in r for r in rep.reasons), rep.reasons
    # the same witness against the unperturbed (equivariant) model proves nothing there
    wcert2, _ = _certificate(softmax_mirror_attention(True))
    rep = check_certificate(wcert2, json.loads(json.dumps(model_to_json(softmax_mirror_attention()))))
    assert rep.accepted is not True


def test_checker_softmax_intervals_agree_with_arb():
    """The checker's stdlib enclosure of softmax attention contains arb's midpoint at several points."""
    from fractions import Fraction

    from symeq_check.intervals import _interval_evaluate
    from symeq_check.model import _layers

    for scale in (None, fmpq(1, 3)):
        m = softmax_mirror_attention(scale=scale)
        layers = _layers(json.loads(json.dumps(model_to_json(m)))["layers"], 8, "m")
        for x in ([fmpq(1, 2), fmpq(-1, 3), 1, 2, 0, fmpq(3, 4), -1, 1], [3, -2, 1, 0, fmpq(5, 2), 1, -1, 2]):
            own = _interval_evaluate(layers, [Fraction(int(fmpq(v).p), int(fmpq(v).q)) for v in x], 96)
            balls = m.layers[0].ball_forward(x)
            for (lo, hi), b in zip(own, balls):
                assert lo <= hi
                assert float(lo) - 1e-9 <= float(b.mid()) <= float(hi) + 1e-9
                assert float(hi - lo) < 1e-12


def test_float_twin_matches_heads_with_their_score_biases():
    from symeq.numeric.layerwise import derive_latent_actions_numeric
    from symeq.numeric.models import from_exact

    att = softmax_mirror_attention().layers[0]
    residuals = []
    for sb in ([[1, -2], [-2, 1], [3, 3]], [[1, -2], [1, -2], [3, 3]]):   # equivariant, then b_2 != C^T b_1
        heads = [Head(h.query, h.key, h.value, h.out, b) for h, b in zip(att.heads, sb)]
        m = Model(8, [AttentionLayer(4, heads, None, "softmax", None, [5, 5])], softmax_mirror_attention().group)
        residuals.append(derive_latent_actions_numeric(from_exact(m)).max_residual)
    assert residuals[0] < 1e-12 and residuals[1] > 0.1


def test_softmax_clones_are_merged_lifted_and_checked():
    """Two heads with equal scores whose outputs are only equivariant together: verify merges them (a
    submodel), lifts back to theta' and symeq check proves theta' the same function by a canonical form."""
    from symeq_check import check_certificate

    base = softmax_mirror_attention()
    att = base.layers[0]
    h3 = att.heads[2]
    Oa = matrix([[1, 5], [0, 1]])
    heads = [att.heads[0], att.heads[1], Head(h3.query, h3.key, h3.value, Oa), Head(h3.query, h3.key, h3.value, h3.out - Oa)]
    m = Model(8, [AttentionLayer(4, heads, None, "softmax")], base.group, "softmax clones")
    v = symeq.verify(m)
    assert v.verdict == "layerwise-equivariant" and v.reparametrized
    assert "its heads are in the certificate" in v.report()
    cert, model = json.loads(json.dumps(v.certificate())), json.loads(json.dumps(model_to_json(m)))
    assert check_certificate(cert, model).accepted is True
    cert["parameters"]["layers"][0]["heads"][3]["out"][0][0] = "7"      # theta' is then another function
    rep = check_certificate(cert, model)
    assert rep.accepted is False and any("canonical forms differ" in r for r in rep.reasons)


def test_random_equivariant_attention_refuses_head_permutations_that_force_clones():
    from symeq.attention import random_equivariant_attention
    from symeq.groups.tokens import attention_group

    swap, one = matrix([[0, 1], [1, 0]]), matrix([[1, 0], [0, 1]])
    G = attention_group(4, [([1, 0, 3, 2], swap, swap), ([2, 3, 0, 1], one, one)], ["h", "v"])
    with pytest.raises(InputError, match="forces clones"):   # v swaps heads 3, 4 but fixes the channels
        random_equivariant_attention(G, head_perms=[[1, 0, 2, 3], [0, 1, 3, 2]], scoring="softmax", rng=3)
