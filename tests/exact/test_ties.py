"""Tied and cloned neurons: polynomial derivation on the exact and the numeric path.

The networks are built in tests/tied_networks.py the way a user builds them: a D4 group
convolution written out as dense layers with coarsely rounded weights (many neurons tie), clone
pairs that split a neuron's outgoing weights, and rows that tie only as multisets.
"""

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import symeq

from symeq.activations import monomial, polynomial, relu, sigmoid_series
from symeq.cli import main
from symeq.io import save_model
from symeq.layerwise import canonical_rows, derive_latent_actions
from symeq.numbers import mat_rows
from symeq.numeric import compare_with_exact, derive_latent_actions_numeric, from_exact
from symeq.numeric.models import save_npz

sys.path.insert(0, str(Path(__file__).parents[1]))
from tied_networks import clone_pairs_network, d4_tied_network, multiset_tie_network  # noqa: E402


def tie_groups(model) -> int:
    """Number of groups of >= 2 neurons of a hidden layer with equal rows up to K_i."""
    n = 0
    for layer in model.layers[:-1]:
        keys, _ = canonical_rows(mat_rows(layer.weight), layer.bias, layer.activation, affine=True)
        n += sum(1 for c in Counter(keys).values() if c > 1)
    return n


def _verify_and_numeric(model, tmp_path, capsys):
    """symeq verify and symeq numeric-check on files written the way a user writes them."""
    path = tmp_path / "model.json"
    save_model(model, path)
    assert main(["verify", str(path), "--timeout", "600"]) == 0
    out = capsys.readouterr().out
    assert "layerwise-equivariant" in out
    exact = derive_latent_actions(model)
    assert exact.found and max(exact.nodes.values()) <= model.depth + 1  # no search: one node per layer
    nm = from_exact(model)
    npz = tmp_path / "model.npz"
    save_npz(nm, npz)
    assert main(["numeric-check", str(npz)]) == 0
    assert "within tolerance" in capsys.readouterr().out
    num = derive_latent_actions_numeric(nm)
    assert num.status == "within tolerance" and num.max_residual < 1e-12
    assert all(r["equal"] for r in compare_with_exact(num, exact))
    return exact, num


def test_d4_group_convolution_with_many_tie_groups(tmp_path, capsys):
    """Width 120 (15 regular channels of D4): many tie groups, decided without any search."""
    model = d4_tied_network(channels=15, seed=2)
    assert model.widths == [25, 120, 120, 25]
    assert tie_groups(model) >= 15
    exact, num = _verify_and_numeric(model, tmp_path, capsys)
    assert "resolved by their outgoing weights" in exact.method
    assert any("tie group(s) resolved" in n and "1 candidate(s) evaluated" in n for n in num.notes)


@pytest.mark.slow
def test_d4_width_400_with_about_85_tie_groups(tmp_path, capsys):
    """The acceptance network: 25-400-400-25, D4, coarsely rounded, scrambled."""
    model = d4_tied_network()
    assert model.widths == [25, 400, 400, 25]
    assert tie_groups(model) >= 80
    _verify_and_numeric(model, tmp_path, capsys)


@pytest.mark.parametrize("pairs", [4, 8])
def test_clone_pairs_take_one_node_per_layer(pairs):
    model = clone_pairs_network(pairs)
    assert tie_groups(model) == 4 * pairs
    d = derive_latent_actions(model)
    assert d.found and d.exhaustive
    assert d.nodes == {"mirror": model.depth}  # the backward pass visits each layer once
    num = derive_latent_actions_numeric(from_exact(model))
    assert num.status == "within tolerance"
    assert any("3 search nodes, 0 real choice(s), 1 candidate(s) evaluated" in n for n in num.notes)
    assert all(r["equal"] for r in compare_with_exact(num, d))


@pytest.mark.parametrize("act", [sigmoid_series(3), relu(), monomial(3), polynomial([0, 1, 1]),
                                 polynomial([0, 1, 1, 0, 1])], ids=lambda a: a.symmetry)
def test_clones_under_every_latent_group(act):
    """Signs, positive and arbitrary scalings, affine flips (sigmoid), affine gauges, permutations."""
    model = clone_pairs_network(3, activation=act)
    d = derive_latent_actions(model)
    assert d.found and d.nodes == {"mirror": model.depth}
    num = derive_latent_actions_numeric(from_exact(model))
    assert num.status == "within tolerance"
    assert all(r["equal"] for r in compare_with_exact(num, d))


def test_perturbed_clone_is_a_negative_control(tmp_path, capsys):
    """One clone's outgoing weight changed: no action exists, decided at once with the reason."""
    model = clone_pairs_network(4, perturb=True)
    d = derive_latent_actions(model)
    assert not d.found and d.exhaustive
    assert "outgoing weights" in d.failure and "budget" not in d.failure
    num = derive_latent_actions_numeric(from_exact(model))
    assert num.status == "not within tolerance" and num.undetermined is None
    assert num.max_residual > 1e-3
    path = tmp_path / "perturbed.json"
    save_model(model, path)
    assert main(["numeric-check", str(path)]) == 1
    assert "NOT within tolerance" in capsys.readouterr().out
    assert main(["verify", str(path)]) == 1  # the perturbation breaks equivariance itself
    assert "not-equivariant" in capsys.readouterr().out


@pytest.mark.parametrize("sign_symmetric", [False, True])
def test_rows_tied_as_multisets_are_searched(sign_symmetric):
    """a, b tie only as multisets and their columns agree: one real choice, both choices valid.

    With ``sign_symmetric`` the rows of a and b are their own negatives up to the order of the
    clones below, so the sign of the action on them is read off their outgoing columns.
    """
    model = multiset_tie_network(sign_symmetric=sign_symmetric)
    d = derive_latent_actions(model)
    assert d.found and d.exhaustive
    assert d.candidates == {"mirror": 2}  # swapping (c0, c1) and (a, b) together fixes theta
    assert d.nodes["mirror"] > model.depth
    num = derive_latent_actions_numeric(from_exact(model))
    assert num.status == "within tolerance"


def test_interchangeable_clones_keep_a_homomorphism():
    """A repeated channel of the D4 convolution: 8 pairs of neurons equal in rows and columns.

    k(g) is not unique; pairing interchangeable neurons in increasing order on both paths gives
    actions that respect the relations of D4 and agree between the paths.
    """
    model = d4_tied_network(channels=6, seed=0, clone_channel=True)
    d = derive_latent_actions(model)
    assert d.found and d.homomorphism and d.group_order == 8
    assert d.candidates == {"rot90": 2, "mirror": 2}  # not unique: the clones may be swapped
    num = derive_latent_actions_numeric(from_exact(model))
    assert num.status == "within tolerance" and num.homomorphism_error == 0.0
    assert all(r["equal"] for r in compare_with_exact(num, d))


def test_tiny_node_budget_is_undetermined_never_a_refutation(tmp_path, capsys):
    d = derive_latent_actions(multiset_tie_network(), max_nodes=3)
    assert not d.found and not d.exhaustive
    assert "node budget" in d.failure and "not a proof" in d.failure
    model = clone_pairs_network(4)
    d = derive_latent_actions(model, max_nodes=1)
    assert not d.found and not d.exhaustive and "node budget" in d.failure
    num = derive_latent_actions_numeric(from_exact(model), max_tie_variants=1)
    assert num.status == "undetermined" and "budget of 1 nodes" in num.undetermined
    assert not num.within_tolerance
    assert num.to_json()["status"] == "undetermined"
    path = tmp_path / "clones.json"
    save_model(model, path)
    assert main(["numeric-check", str(path), "--max-tie-nodes", "1"]) == 3
    out = capsys.readouterr().out
    assert "undetermined" in out and "NOT within" not in out
    assert main(["numeric-check", str(path)]) == 0
    # verify's --max-tie-nodes reaches the derivation: out of nodes at theta, the actions are
    # found at a re-parametrized theta' (clones merged and lifted), never a refutation
    assert not symeq.verify(model).reparametrized
    assert symeq.verify(model, max_tie_nodes=1).reparametrized
    assert main(["verify", str(path), "--max-tie-nodes", "1"]) == 0
    assert "re-parametrized" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:   # argparse refuses it: usage error, exit 2
        main(["verify", str(path), "--max-tie-nodes", "0"])
    assert bad.value.code == 2


def test_numeric_report_counts_candidates_not_indices():
    """The report says how many candidates were evaluated (the old message printed an index)."""
    num = derive_latent_actions_numeric(from_exact(clone_pairs_network(2)))
    how = [r.method for r in num.residuals if "tie groups" in r.method]
    assert how and all("1 candidate(s) evaluated" in h for h in how)
    assert np.isfinite(num.max_residual)


def test_three_full_clones_give_the_identity_pairing():
    """R -> 3 identical tanh neurons -> R under x -> -x, the generator listed twice: any pairing
    passes every layer, but only a consistent one is a homomorphism (a 3-cycle is not)."""
    from symeq.io import model_from_json

    layers = [{"type": "dense", "weight": [[1], [1], [1]], "bias": [0, 0, 0],
               "activation": {"type": "tanh_series", "order": 3}},
              {"type": "dense", "weight": [[1, 1, 1]], "bias": [0], "activation": None}]
    gens = [{"input": [[-1]], "output": [[-1]]}] * 2
    m = model_from_json({"format": "symeq-model/1", "input_dim": 1, "layers": layers, "group": {"generators": gens}})
    d = derive_latent_actions(m)
    assert d.found and d.homomorphism and d.candidates == {"g0": 2, "g1": 2}
    assert all(a == -a.__class__(3, 3, [1, 0, 0, 0, 1, 0, 0, 0, 1]) for a in d.actions[0])
    num = derive_latent_actions_numeric(from_exact(m))
    assert num.status == "within tolerance" and num.homomorphism_error == 0.0
    assert all(list(a.cols) == [0, 1, 2] for a in num.actions[0])
