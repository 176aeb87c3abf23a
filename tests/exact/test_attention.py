"""Lightning multi-head attention: exact derivation of head permutations and per-head GL
matrices, certificates with block-monomial actions, bad input (issue: attention networks)."""

import copy
import json
import random

import pytest
from flint import fmpq, fmpq_mat

import symeq
from symeq.activations import tanh_series
from symeq.attention import (
    AttentionLayer, Head, block_monomial_parts, factor_kron, head_clones, head_permutation,
    patch_mirror, random_equivariant_attention, scramble_attention,
)
from symeq_check import check_certificate
from symeq.cli import main
from symeq.io import model_from_json, model_to_json
from symeq.models import Model


def _really_fails(model, witness):
    A, B = model.group.generators[witness.generator_index]
    x = fmpq_mat(len(witness.x), 1, witness.x)
    return model((A * x).entries()) != (B * fmpq_mat(model.output_dim, 1, model(witness.x))).entries()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heads_swap_under_the_patch_mirror(seed):
    """4 tokens (1x2 patches of a 2x4 image), 4 heads: heads 0 and 1 swap, 2 and 3 are fixed;
    scrambled by a random head permutation and random GL matrices."""
    m = random_equivariant_attention(patch_mirror(2, 4, 1, 2), tokens=4, head_perms=[[1, 0, 2, 3]], rng=seed)
    rng = random.Random(seed + 100)
    s = scramble_attention(m, rng)
    v = symeq.verify(s)
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 0
    (M,) = v.actions[0]
    perm = head_permutation(M, tokens=4, heads=4, dv=2)
    assert sorted(perm) == [0, 1, 2, 3]
    assert sum(perm[h] == h for h in range(4)) == 2 and all(perm[perm[h]] == h for h in range(4))
    P, R = factor_kron(M, 4, 8)
    assert P == factor_kron(s.group.generators[0][0], 4, 2)[0]  # tokens move like the patches
    assert all(B.det() != 0 for _, B in block_monomial_parts(R, 4, 2))
    cert = json.loads(json.dumps(v.certificate()))
    report = check_certificate(cert, model_to_json(s))
    assert report.accepted, report.reasons
    # perturbing one entry breaks equivariance, with a witness that really fails
    bad = model_to_json(s)
    bad["layers"][0]["heads"][0]["value"][0][0] = str(fmpq(bad["layers"][0]["heads"][0]["value"][0][0]) + fmpq(1, 3)) \
        if "/" in bad["layers"][0]["heads"][0]["value"][0][0] else str(int(bad["layers"][0]["heads"][0]["value"][0][0]) + 1)
    bm = model_from_json(bad)
    vb = symeq.verify(bm)
    assert vb.verdict == "not-equivariant" and _really_fails(bm, vb.equivariance.witness)
    assert check_certificate(vb.certificate(), bad).accepted


def test_attention_then_tanh_layer():
    m = random_equivariant_attention(rng=5, dense=[tanh_series(3)])
    s = scramble_attention(m, rng=6)
    v = symeq.verify(s)
    assert v.verdict == "layerwise-equivariant"
    assert len(v.actions) == 2  # value spaces, then the token-wise tanh layer
    assert check_certificate(v.certificate(), model_to_json(s)).accepted
    assert model_from_json(model_to_json(s))([fmpq(k, 5) for k in range(8)]) == s([fmpq(k, 5) for k in range(8)])


def test_checker_rejects_looser_than_block_monomial():
    s = scramble_attention(random_equivariant_attention(rng=2), rng=3)
    v = symeq.verify(s)
    cert = v.certificate(dense=True)  # the dense symeq-certificate/1, to tamper with single entries
    M = cert["latent_actions"][0][0]
    # put a second nonzero block into head 0's block row (token 0)
    from symeq.attention import kron
    from symeq.numbers import format_matrix

    P, R = factor_kron(v.actions[0][0], 4, 8)
    k = block_monomial_parts(R, 4, 2)[0][0]
    R2 = fmpq_mat(R)
    R2[0, 2 * ((k + 1) % 4)] = 1  # a second nonzero block in head 0's block row
    bad = copy.deepcopy(cert)
    bad["latent_actions"][0][0] = format_matrix(kron(P, R2))
    r = check_certificate(bad, model_to_json(s))
    assert r.accepted is False and any("block" in x for x in r.reasons), r.reasons
    # one token acting differently is rejected too
    bad = copy.deepcopy(cert)
    nz = [j for j in range(32) if M[0][j] != "0"]
    bad["latent_actions"][0][0][0][nz[0]] = str(fmpq(M[0][nz[0]]) + 1)
    assert check_certificate(bad, model_to_json(s)).accepted is False
    # a changed block entry that keeps the form P (x) R breaks the layer check
    R3 = fmpq_mat(R)
    R3[0, 2 * k] = R3[0, 2 * k] + 1
    bad = copy.deepcopy(cert)
    bad["latent_actions"][0][0] = format_matrix(kron(P, R3))
    r = check_certificate(bad, model_to_json(s))
    assert r.accepted is False and any("heads(P x) != Q heads(x)" in x or "block" in x for x in r.reasons), r.reasons


def test_identical_heads_are_detected_and_handled():
    m = random_equivariant_attention(rng=4)
    att = m.layers[0]
    h0 = att.heads[2]
    heads = [att.heads[0], att.heads[1], h0, Head(h0.query, h0.key, h0.value, h0.out)]
    m2 = Model(m.input_dim, [AttentionLayer(4, heads)], m.group)
    assert head_clones(m2.layers[0]) == [[2, 3]]
    v = symeq.verify(m2)
    assert v.verdict == "layerwise-equivariant"  # the tie is resolved by backtracking
    assert v.derivation.candidates["mirror"] >= 2


def _bad(mutate):
    data = model_to_json(random_equivariant_attention(rng=0))
    mutate(data)
    return data


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["layers"][0]["heads"][1]["key"].pop(), "key"),
    (lambda d: d["layers"][0].__setitem__("tokens", 3), "multiple of 3 tokens"),
    (lambda d: d["layers"][0]["heads"][0]["out"].append(["1", "1"]), "out"),
    (lambda d: d.__setitem__("group", patch_mirror(2, 2, 1, 2).to_json()), "group acts on inputs of size 4"),
])
def test_bad_attention_input_exit_2(mutate, needle, tmp_path, capsys):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(_bad(mutate)))
    assert main(["verify", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and needle in err, err


@pytest.mark.parametrize("T,d,H,dk,dv", [(3, 2, 2, 1, 1), (3, 2, 1, 2, 2), (3, 2, 2, 2, 2), (4, 3, 2, 2, 2),
                                         (3, 3, 2, 3, 3)])
def test_fibre_dimension_matches_the_symmetries(T, d, H, dk, dv):
    """Exact Jacobian rank against the Henry-Marchetti-Kohn count: #params - rank (the fibre's
    tangent dimension at theta) equals the dimension of the symmetry group, so the fibre is the
    orbit locally (T = 3, d = 2, H = 2 among them)."""
    from symeq.attention import expected_dimension, jacobian_rank, symmetry_dimension

    rng = random.Random(T * 100 + d * 10 + H)

    def rnd(r, c):  # a generic point: wide integer range
        return fmpq_mat(r, c, [rng.randint(-50, 50) for _ in range(r * c)])

    layer = AttentionLayer(T, [Head(rnd(d, dk), rnd(d, dk), rnd(d, dv), rnd(dv, d)) for _ in range(H)])
    rank, n = jacobian_rank(layer, rng=rng)
    assert rank == expected_dimension(layer)
    assert n - rank == symmetry_dimension(layer)


def test_cloned_heads_lower_the_rank():
    from symeq.attention import expected_dimension, jacobian_rank

    rng = random.Random(7)

    def rnd(r, c):  # a generic point: wide integer range
        return fmpq_mat(r, c, [rng.randint(-50, 50) for _ in range(r * c)])

    h = Head(rnd(2, 1), rnd(2, 1), rnd(2, 1), rnd(1, 2))
    layer = AttentionLayer(3, [h, Head(h.query, h.key, h.value, h.out)])
    rank, _ = jacobian_rank(layer, rng=1)
    assert rank < expected_dimension(layer)
    assert head_clones(layer) == [[0, 1]]


def test_attention_is_equivariant_under_token_permutations():
    """No positional encoding: any attention layer commutes with permutations of the tokens;
    the derived action permutes tokens and fixes every head (identity blocks)."""
    from symeq.groups import builtin_group

    m = scramble_attention(random_equivariant_attention(rng=8), rng=9)
    G = builtin_group("tokens:4x2")
    assert G.order() == 24
    v = symeq.verify(m.with_group(G))
    assert v.verdict == "layerwise-equivariant"
    for M in v.actions[0]:
        assert head_permutation(M, 4, 4, 2) == [0, 1, 2, 3]


def test_clone_of_a_head_is_merged_and_lifted():
    """A swapped pair of heads where one head is split into two clones (outputs 1/3 and 2/3):
    equivariant, no head permutation at theta (multiplicities 2 vs 1); the clones are merged,
    the reduced model has actions, and theta' with the original number of heads (one copy each
    and an inactive head) is layerwise equivariant with the same function."""
    from symeq.attention import reduce_heads

    m = random_equivariant_attention(patch_mirror(2, 4, 1, 2), tokens=4, head_perms=[[1, 0]], rng=21)
    h0, h1 = m.layers[0].heads
    heads = [Head(h0.query, h0.key, h0.value, h0.out / 3), Head(h0.query, h0.key, h0.value, 2 * h0.out / 3), h1]
    split = Model(m.input_dim, [AttentionLayer(4, heads)], m.group, "split head")
    X = [fmpq(k - 3, 2) for k in range(8)]
    assert split(X) == m(X)
    assert head_clones(split.layers[0]) == [[0, 1]]
    assert symeq.derive_latent_actions(split).found is False
    assert reduce_heads(split).changed
    v = symeq.verify(split)
    assert v.verdict == "layerwise-equivariant" and v.reparametrized
    assert len(v.model.layers[0].heads) == 3 and v.model(X) == split(X)
    report = check_certificate(v.certificate(), model_to_json(split))
    assert report.accepted, report.reasons
