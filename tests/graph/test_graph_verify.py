"""symeq verify on graph models (docs/graphs.md): layerwise actions along residual, concatenated and conv
graphs, refutations with witnesses, chains in graph form, and the methods that refuse graphs by name."""

from __future__ import annotations

import json

import pytest
from flint import fmpq, fmpq_mat

from graph_networks import Q4, SWAP, chain_file, concat_net, conv_residual, residual, scramble_matrix
from symeq.cli import main
from symeq.io import model_from_json
from symeq.theorem import action_to_json, verify

RELU = {"type": "relu"}
TANH = {"type": "tanh"}
POLY = {"type": "polynomial", "coeffs": ["0", "1", "1"]}
CUBE = {"type": "monomial", "degree": 3}
CASES = {"relu": (RELU, "positive"), "tanh": (TANH, "signs"), "polynomial": (POLY, "none"), "cube": (CUBE, "signs")}


def _write(tmp_path, data, name="net.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


def _checker_accepts(cert_path, model_path, capsys) -> int:
    import symeq_check.graph  # noqa: F401  # the checker's side of graphs (docs/graphs.md)
    code = main(["check", cert_path, model_path])
    capsys.readouterr()
    return code


@pytest.mark.parametrize("case", sorted(CASES))
def test_residual_block_is_layerwise_equivariant_with_scrambled_stem(tmp_path, capsys, case):
    act, scales = CASES[case]
    path = _write(tmp_path, residual(act, scales=scales))
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--certificate", cert]) == 0
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["verdict"] == "layerwise-equivariant"
    assert c["spaces"] == ["stem", "block.1", "block", "sum"]
    S = scramble_matrix(scales)
    expected = action_to_json(None, S * Q4 * S.inv())  # the scrambled stem's action: not a plain swap
    assert c["latent_actions"][0] == [expected]
    assert c["latent_actions"][2] == [expected]  # forced on the affine block output by the addition
    assert all(row["holds"] for row in c["checks"]["nodes"]) and c["checks"]["homomorphism"] is True
    assert _checker_accepts(cert, path, capsys) == 0
    assert main(["verify", path]) == 0
    report = capsys.readouterr().out
    assert "rho_stem(swap) = " in report and "Verdict: layerwise-equivariant" in report


@pytest.mark.parametrize("case", ["relu", "tanh", "polynomial"])
def test_broken_residual_block_is_refuted_with_a_witness(tmp_path, capsys, case):
    act, scales = CASES[case]
    data = residual(act, scales=scales, broken=True)
    path = _write(tmp_path, data)
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--certificate", cert]) == 1
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["verdict"] == "not-equivariant" and c["equivariance"]["holds"] is False
    w = c["equivariance"]["witness"]
    assert w is not None
    if case != "tanh":  # an exact witness: re-evaluate f(g x) != g f(x) here
        g = model_from_json(data)
        x = [fmpq(*map(int, v.split("/"))) if "/" in v else fmpq(int(v)) for v in w["x"]]
        assert g(x[::-1]) != g(x)[::-1]
    else:
        assert w["kind"] == "arb"
    assert _checker_accepts(cert, path, capsys) == 0


def test_concatenation_of_branches(tmp_path, capsys):
    path = _write(tmp_path, concat_net(RELU))
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--certificate", cert]) == 0
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["spaces"] == ["left", "right", "both"]
    both = c["latent_actions"][2][0]
    left, right = c["latent_actions"][0][0], c["latent_actions"][1][0]
    assert both["source"] == left["source"] + [4 + s for s in right["source"]]  # the block sum
    assert _checker_accepts(cert, path, capsys) == 0


def test_residual_conv_net_on_mirrored_images(tmp_path, capsys):
    path = _write(tmp_path, conv_residual())
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--certificate", cert]) == 0
    c = json.loads((tmp_path / "c.json").read_text())
    stem = c["latent_actions"][0][0]
    # channel swap times the pixel mirror, in the sparse form: pixel (c, i, j) comes from (1 - c, i, 3 - j)
    assert stem["kind"] == "channel-pixel"
    assert stem["channels"]["source"] == [1, 0] and stem["pixels"][0] == 3 and stem["pixels"][5] == 6
    assert _checker_accepts(cert, path, capsys) == 0


def test_chain_in_graph_form_gives_the_chain_verdict_and_actions():
    chain, graph = chain_file(RELU)
    vc, vg = verify(model_from_json(chain)), verify(model_from_json(graph))
    assert vc.verdict == vg.verdict == "layerwise-equivariant"
    assert [s.name for s in model_from_json(graph).hidden_spaces()] == ["net.1"]
    assert vc.actions[0] == vg.derivation.actions["net.1"]


@pytest.mark.parametrize("act", [RELU, POLY], ids=["relu", "polynomial"])
def test_an_addition_of_affine_inputs_only_is_decided_end_to_end_or_undetermined(act):
    # a = W1 x and b = W2 x are affine (no action derivable), W1 + W2 commutes with the swap: f is equivariant
    seg = lambda name, W: {"name": name, "input": "input", "layers": [
        {"type": "dense", "weight": W, "bias": None, "activation": None}]}
    data = {"format": "symeq-model/1", "input_dim": 2,
            "graph": [seg("a", [["1", "1"], ["0", "1"]]), seg("b", [["0", "0"], ["1", "0"]]),
                      {"name": "sum", "add": ["a", "b"], "activation": act},
                      {"name": "head", "input": "sum", "layers": [
                          {"type": "dense", "weight": [["1", "0"], ["0", "1"]], "bias": None, "activation": None}]}],
            "group": {"generators": [{"input": [[0, 1], [1, 0]], "output": [[0, 1], [1, 0]]}]}}
    v = verify(model_from_json(data))
    assert v.verdict == "undetermined" and v.exit_code == 3  # never a guess
    assert "no input of the addition has a known action" in v.derivation.failure
    if act is POLY:  # the principal lattice proves f equivariant; still no layerwise actions at theta
        assert v.equivariance.holds is True and v.equivariance.method == "grid"
    c = v.certificate()
    assert c["latent_actions"] is None and c["parameters"]["output"] == "head"


def test_identifiability_of_a_relu_graph_is_undetermined_by_name(tmp_path, capsys):
    """The Jacobian rank covers graphs of polynomial activations (tests/graph/test_graph_rank.py); a ReLU
    graph is refused by name, and the chain methods say they cover chains only."""
    path = _write(tmp_path, residual(RELU))
    assert main(["verify", path, "--identifiability"]) == 3
    out = capsys.readouterr().out
    assert "polynomial activations only" in out and "cover chains only" in out
    assert main(["fibre", path]) == 3
    out = capsys.readouterr().out
    assert "polynomial activations only" in out and "chains only, not graph models" in out


def test_budget_out_is_undetermined(tmp_path, capsys):
    from symeq.budget import Deadline
    from symeq.errors import BudgetExceeded
    from symeq.graph.derive import derive_graph_actions

    g = model_from_json(residual(RELU))
    with pytest.raises(BudgetExceeded):
        derive_graph_actions(g, deadline=Deadline(0))


def test_clones_are_backtracked_through_the_graph():
    # the stem's neurons 1 and 2 are clones; only swapping them lets the block's first layer match
    d = lambda W, act: {"type": "dense", "weight": W, "bias": None, "activation": act}
    data = {"format": "symeq-model/1", "input_dim": 2,
            "graph": [{"name": "stem", "input": "input", "layers": [d([[1, 1], [1, 1], [1, 2], [2, 1]], RELU)]},
                      {"name": "block", "input": "stem", "layers": [
                          d([[1, 2, 1, 0], [2, 1, 0, 1]], RELU), d([[1, 0], [0, 1], [2, 3], [3, 2]], None)]},
                      {"name": "sum", "add": ["stem", "block"], "activation": RELU},
                      {"name": "head", "input": "sum", "layers": [d([[1, 0, 1, 0], [0, 1, 0, 1]], None)]}],
            "group": {"generators": [{"input": [[0, 1], [1, 0]], "output": [[0, 1], [1, 0]]}]}}
    v = verify(model_from_json(data))
    assert v.verdict == "layerwise-equivariant"
    assert v.derivation.actions["stem"][0].entries() == [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0]


def test_a_graph_too_wide_for_dense_actions_is_refused_before_the_walk(monkeypatch):
    import symeq.graph.derive as derive
    from symeq.errors import LimitExceeded

    monkeypatch.setattr(derive, "MAX_SPACE_DIM", 3)
    with pytest.raises(LimitExceeded, match="space size 4 exceeds the limit 3"):
        derive.derive_graph_actions(model_from_json(residual(RELU)))


def test_a_graph_built_in_python_is_certified_with_its_file_names():
    from symeq.graph import GraphModel, Node

    g = model_from_json(residual(RELU))
    renamed = [Node(f"n{i}", n.op, tuple("input" if j == "input" else f"n{[m.name for m in g.nodes].index(j)}"
                                         for j in n.inputs), n.layer, n.activation, n.segment, n.index)
               for i, n in enumerate(g.nodes)]
    v = verify(GraphModel(2, renamed, group=g.group))
    assert v.verdict == "layerwise-equivariant"
    assert v.certificate()["spaces"] == ["stem", "block.1", "block", "n3"]  # segments by their file names
