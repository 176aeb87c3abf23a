"""Graph models at width (issue 27, item 7; docs/graphs.md "Actions along a graph"): the walk holds the kinds'
sparse actions on image spaces (conv's ConvAction, a channel action times a pixel permutation), never a dense
matrix, so exact C4 ResNets on regular fields verify at image size and ``symeq check`` accepts their
certificates (channel-pixel actions).  The 28x28, 32-channel, 4-block network of the issue is the slow test;
its timings are measured in the report, not asserted here (no timed tests)."""

from __future__ import annotations

import copy
import json

import pytest
from flint import fmpq

from symeq.activations import relu
from symeq.cli import main
from symeq.graph import GraphModel, Node
from symeq.graph import derive
from symeq.graph.io import graph_to_json
from symeq.graph.ops.base import activation_action
from symeq.graph.ops.concat import OP as CONCAT
from symeq.graph.verify import verify_graph
from symeq.layers.conv import ConvAction, ConvLayer
from symeq.layers.conv.nets import regular_network


def c4_resnet(n: int, fields: int, blocks: int, seed: int = 0, group: bool = True) -> GraphModel:
    """An exact C4 ResNet on 1 x n x n images (escnn-style regular fields, symeq.layers.conv.nets): a lifting
    conv (ReLU), ``blocks`` residual blocks (group conv + ReLU, group conv affine, add, ReLU), the invariant
    readout (mean over pixels and each field's orientations).  Its kernels are averaged over C4 (rational)."""
    layers, g = regular_network("C4", n, fields, 2 * blocks + 1, relu(), rng=seed)
    nodes = [Node("stem", "conv2d", ("input",), layer=layers[0], segment="stem")]
    prev = "stem"
    for b in range(1, blocks + 1):
        first, second = layers[2 * b - 1], layers[2 * b]
        affine = ConvLayer(second.shape, second.kernel, list(second.channel_bias), None)
        nodes += [Node(f"block{b}.1", "conv2d", (prev,), layer=first, segment=f"block{b}", index=1),
                  Node(f"block{b}", "conv2d", (f"block{b}.1",), layer=affine, segment=f"block{b}", index=2),
                  Node(f"add{b}", "add", (prev, f"block{b}"), activation=relu())]
        prev = f"add{b}"
    nodes.append(Node("head", "conv2d", (prev,), layer=layers[-1], segment="head"))
    return GraphModel(n * n, nodes, "head", g if group else None, f"C4 ResNet {n}x{n}, {4 * fields} channels", (1, n, n))


def c4_branches(n: int, fields: int, seed: int = 1) -> GraphModel:
    """A stem, two group-conv branches of it concatenated along channels (ReLU), the invariant readout."""
    layers, g = regular_network("C4", n, fields, 3, relu(), rng=seed)
    C = 4 * fields
    row = [fmpq(1 + c // 4, 16 * n * n) for c in range(2 * C) for _ in range(n * n)]
    head = ConvLayer.from_dense([row], [fmpq(1, 3)], None, (2 * C, n, n))
    nodes = [Node("stem", "conv2d", ("input",), layer=layers[0], segment="stem"),
             Node("left", "conv2d", ("stem",), layer=layers[1], segment="left"),
             Node("right", "conv2d", ("stem",), layer=layers[2], segment="right"),
             Node("both", "concat", ("left", "right"), activation=relu()),
             Node("head", "conv2d", ("both",), layer=head, segment="head")]
    return GraphModel(n * n, nodes, "head", g, "C4 branches", (1, n, n))


def _write(tmp_path, gm: GraphModel, name: str = "net.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(graph_to_json(gm)))
    return str(p)


def _check(cert: str, model: str, capsys) -> int:
    import symeq_check.graph  # noqa: F401
    code = main(["check", cert, model])
    capsys.readouterr()
    return code


def test_c4_resnet_8_verifies_with_sparse_actions_and_checks(tmp_path, capsys, monkeypatch):
    # the dense limit binds vector spaces only: the 512-coordinate image spaces stay sparse below it
    monkeypatch.setattr(derive, "MAX_SPACE_DIM", 100)
    path = _write(tmp_path, c4_resnet(8, 2, 2))
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--certificate", cert]) == 0
    capsys.readouterr()
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["spaces"] == ["stem", "block1.1", "block1", "add1", "block2.1", "block2", "add2"]
    for per_space in c["latent_actions"]:
        (a,) = per_space
        assert a["kind"] == "channel-pixel" and (a["height"], a["width"]) == (8, 8)
        # each regular field's orientations cycled, the quarter turn on the pixels
        assert sorted(a["channels"]["source"]) == list(range(8)) and a["channels"]["source"] != list(range(8))
        assert a["channels"]["factor"] == ["1"] * 8 and sorted(a["pixels"]) == list(range(64))
    assert c["checks"]["homomorphism"] is True and c["checks"]["group_order"] == 4
    assert _check(cert, path, capsys) == 0
    bad = copy.deepcopy(c)
    bad["latent_actions"][3][0]["channels"]["factor"][0] = "2"  # add1: a factor moved
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert _check(str(tmp_path / "bad.json"), path, capsys) != 0


def test_a_broken_block_is_not_called_layerwise_equivariant(tmp_path):
    gm = c4_resnet(8, 2, 1)
    data = graph_to_json(gm)
    data["graph"][1]["layers"][1]["kernel"][0][0][0][0] = "5/7"  # block1's affine conv, one tap moved
    from symeq.io import model_from_json

    v = verify_graph(model_from_json(data))
    assert v.verdict in ("not-equivariant", "undetermined") and v.exit_code in (1, 3)
    assert not v.derivation.found and "block1" in v.derivation.failure


def test_a_concatenation_of_images_block_sums_the_channel_actions(tmp_path, capsys):
    path = _write(tmp_path, c4_branches(6, 1))
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--certificate", cert]) == 0
    capsys.readouterr()
    c = json.loads((tmp_path / "c.json").read_text())
    left, right, both = (c["latent_actions"][c["spaces"].index(s)][0] for s in ("left", "right", "both"))
    assert both["kind"] == "channel-pixel" and both["pixels"] == left["pixels"] == right["pixels"]
    assert both["channels"]["source"] == left["channels"]["source"] + [4 + s for s in right["channels"]["source"]]
    assert _check(cert, path, capsys) == 0


def test_block_sums_and_join_activations_on_sparse_actions():
    rot = tuple(ConvAction.rot90_pixels(3))
    a = ConvAction((1, 0), (fmpq(1), fmpq(2)), rot, (3, 3))
    b = ConvAction((0,), (fmpq(1),), rot, (3, 3))
    M, _, _ = CONCAT.action([a, b], [18, 9], [(2, 3, 3), (1, 3, 3)])
    assert (M.source, M.factor, M.pixel) == ((1, 0, 2), (1, 2, 1), rot)
    other = ConvAction((0,), (fmpq(1),), tuple(range(9)), (3, 3))
    M, _, why = CONCAT.action([a, other], [18, 9], [(2, 3, 3), (1, 3, 3)])
    assert M is None and "pixel permutations" in why
    Q, _ = activation_action(relu(), a)
    assert Q == a and Q.nrows() == 18
    flipped = ConvAction((1, 0), (fmpq(1), fmpq(-1)), rot, (3, 3))
    Q, why = activation_action(relu(), flipped)
    assert Q is None and "channel 1" in why


def test_image_spaces_past_their_limit_are_refused_before_the_walk(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(derive, "MAX_IMAGE_SPACE_DIM", 100)
    path = _write(tmp_path, c4_resnet(6, 1, 1))
    assert main(["verify", path]) == 2
    assert "image space size" in capsys.readouterr().err


@pytest.mark.slow
def test_c4_resnet_28(tmp_path, capsys):
    """The issue's network: 28 x 28, 32 channels (8 regular fields), 4 residual blocks (25 088-coordinate
    spaces); verify (exact) and check (timings in the report, not asserted)."""
    path = _write(tmp_path, c4_resnet(28, 8, 4, group=False))
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--group", "rot90:28", "--group-output", "1", "--certificate", cert,
                 "--timeout", "120"]) == 0
    capsys.readouterr()
    c = json.loads((tmp_path / "c.json").read_text())
    assert len(c["spaces"]) == 13 and all(a[0]["kind"] == "channel-pixel" for a in c["latent_actions"])
    assert _check(cert, path, capsys) == 0


def test_an_addition_of_images_as_the_output_meets_gs_output_matrix():
    """The output node is an addition of image spaces: its channel-pixel action is compared with G's (dense)
    output matrix on their monomial form."""
    from symeq.groups import FiniteGroup

    full = c4_resnet(4, 1, 1)
    d = verify_graph(full).derivation
    H = d.actions["add1"][0].to_matrix()
    (A, _), = full.group.generators
    nodes = [n for n in full.nodes if n.name != "head"]
    gm = GraphModel(16, nodes, "add1", FiniteGroup([(A, H)], ["rot90"]), "to the image", (1, 4, 4))
    v = verify_graph(gm)
    assert v.verdict == "layerwise-equivariant", v.derivation.failure
    wrong = FiniteGroup([(A, H * H)], ["rot90"])  # a half turn on the output: no layerwise actions
    assert verify_graph(gm.with_group(wrong)).verdict != "layerwise-equivariant"
