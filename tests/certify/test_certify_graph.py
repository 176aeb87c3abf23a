"""``symeq certify`` on graph networks (symeq/certify_graph.py, docs/certify.md "Graph networks").

Float graph models are built here from numpy (a residual block, a concatenation of two branches),
layerwise equivariant by construction under the mirror of 2 x 2 images and then moved by float noise:
certify projects every layer node with its in and out actions, proves theta-bar exactly, and
``symeq check`` accepts the certificate.  A broken branch is what certify reports as moved; the
refusals come before the work.  The ONNX export of theta-bar needs the onnx extra (skipped without).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from symeq.certification import certify
from symeq.cli import main
from symeq.errors import InputError, LimitExceeded, Undetermined
from symeq.graph import GraphModel, Node
from symeq.groups import mirror
from symeq.io import model_to_json, write_json
from symeq.numeric.models import NumericDenseLayer, numeric_activation

P4 = np.eye(4)[[1, 0, 3, 2]]          # mirror:2x2 on the input (pixels (0 1 / 2 3) flipped left-right)
Q6 = np.eye(6)[[1, 0, 3, 2, 5, 4]]    # the hidden action of the block: neurons swapped in pairs
NOISE = 1e-5


def _sym(rng, P_out, P_in):
    """A random W with P_out W = W P_in (the Reynolds average of a Gaussian matrix over {e, g})."""
    W = rng.standard_normal((P_out.shape[0], P_in.shape[0]))
    return (W + P_out.T @ W @ P_in) / 2


def _layer(rng, P_out, P_in, act, noise, bias=True):
    W = _sym(rng, P_out, P_in) + noise * rng.standard_normal((P_out.shape[0], P_in.shape[0]))
    b = rng.standard_normal(P_out.shape[0])
    b = (b + P_out.T @ b) / 2 + noise * rng.standard_normal(P_out.shape[0]) if bias else np.zeros(P_out.shape[0])
    return NumericDenseLayer(W, b, None if act is None else numeric_activation(act))


def residual_net(noise: float = NOISE, broken: float = 0.0, seed: int = 0) -> GraphModel:
    """stem (relu) -> block: dense 4->6 (tanh), dense 6->4 (affine) -> add (relu) -> head 4->4, the
    mirror on the stream, Q6 inside the block, the mirror on the output; ``broken`` moves one weight of
    the block's last layer by that much (the block is then not equivariant)."""
    rng = np.random.default_rng(seed)
    stem = _layer(rng, P4, P4, "relu", noise)
    b1 = _layer(rng, Q6, P4, "tanh", noise)
    b2 = _layer(rng, P4, Q6, None, noise)
    b2.weight[0, 1] += broken
    head = _layer(rng, P4, P4, None, noise)
    nodes = [Node("stem", "dense", ("input",), layer=stem, segment="stem"),
             Node("block.1", "dense", ("stem",), layer=b1, segment="block", index=1),
             Node("block", "dense", ("block.1",), layer=b2, segment="block", index=2),
             Node("sum", "add", ("stem", "block"), activation=numeric_activation("relu")),
             Node("head", "dense", ("sum",), layer=head, segment="head")]
    return GraphModel(4, nodes, "head", None, "residual test net")


def concat_net(noise: float = NOISE, seed: int = 1) -> GraphModel:
    """Two tanh branches of the input concatenated (the block sum of their actions; a ReLU after it: the checker
    reads a join without activation as affine), then a head 10 -> 4."""
    rng = np.random.default_rng(seed)
    left = _layer(rng, P4, P4, "tanh", noise)
    right = _layer(rng, Q6, P4, "tanh", noise)
    P10 = np.block([[P4, np.zeros((4, 6))], [np.zeros((6, 4)), Q6]])
    head = _layer(rng, P4, P10, None, noise)
    nodes = [Node("left", "dense", ("input",), layer=left, segment="left"),
             Node("right", "dense", ("input",), layer=right, segment="right"),
             Node("both", "concat", ("left", "right"), activation=numeric_activation("relu")),
             Node("head", "dense", ("both",), layer=head, segment="head")]
    return GraphModel(4, nodes, "head", None, "concat test net")


def _check(tmp_path, c) -> int:
    cert, model = tmp_path / "C.json", tmp_path / "bar.json"
    write_json(c.certificate(), cert)
    write_json(model_to_json(c.model), model)
    return main(["check", str(cert), str(model)])


@pytest.mark.parametrize("build", [residual_net, concat_net], ids=["residual", "concat"])
def test_a_noisy_graph_network_is_certified_and_checked(tmp_path, build):
    net = build()
    c = certify(net, mirror(2, 2), timeout=120, noise_points=200)
    assert c.status == "certified", c.reason
    assert c.verification.verdict == "layerwise-equivariant"
    assert c.model.exact and not c.model.is_chain
    assert len(c.layer_distances) == len(net.layers)
    assert 0 < c.max_distance < 3 * NOISE * 10  # the noise is 1e-5 on weights of size ~1
    assert c.function_distance["noise"]["max"] < 1e-3
    X = np.random.default_rng(5).standard_normal((50, 4))
    assert np.max(np.abs(c.float_model(X @ P4.T) - c.float_model(X) @ P4.T)) < 1e-12  # theta-bar, in floats
    assert _check(tmp_path, c) == 0


def test_the_broken_block_is_the_layer_that_moves():
    c = certify(residual_net(broken=0.5), mirror(2, 2), timeout=120, noise_points=200)
    assert c.status == "certified", c.reason  # theta-bar is equivariant; theta is far from it
    names = [n.name for n in c.model.nodes if not n.is_join]
    far = names[int(np.argmax(c.layer_distances))]
    assert far == "block"
    assert c.layer_distances[names.index("block")] > 100 * max(d for n, d in zip(names, c.layer_distances)
                                                                if n != "block")
    assert any("layer 3 = node block" in n for n in c.notes)
    k = {d["space"]: d["k_metric"] for d in c.diagnostics}  # the paper's metric per hidden space, beside rho's
    assert set(k) == {"stem", "block.1", "block", "sum"}
    assert k["block"] > 100 * max(k["stem"], k["block.1"])  # theta's block is where rho fails


def test_a_graph_that_is_a_chain_takes_the_chains_road():
    rng = np.random.default_rng(2)
    nodes = [Node("a", "dense", ("input",), layer=_layer(rng, Q6, P4, "tanh", NOISE)),
             Node("b", "dense", ("a",), layer=_layer(rng, P4, Q6, None, NOISE))]
    c = certify(GraphModel(4, nodes, "b"), mirror(2, 2), timeout=120, noise_points=100)
    assert c.status == "certified"
    assert not callable(getattr(c.model, "hidden_spaces", None))  # a chain Model


def test_refusals_come_before_the_work():
    net = residual_net()
    with pytest.raises(InputError, match="parameter distance only"):
        certify(net, mirror(2, 2), metric="data", data=(np.zeros((4, 4)), None))
    with pytest.raises(InputError, match="--finetune"):
        certify(net, mirror(2, 2), finetune=True)
    with pytest.raises(InputError, match="digits"):
        certify(net, mirror(2, 2), digits=40)
    from symeq.sizes import limits

    with limits(width=5):
        with pytest.raises(LimitExceeded, match="block.1"):
            certify(net, mirror(2, 2))


def test_an_exact_graph_is_refused_by_name():
    c = certify(residual_net(), mirror(2, 2), timeout=120, noise_points=50)
    with pytest.raises(InputError, match="symeq verify"):
        certify(c.model, mirror(2, 2))


def test_theta_bar_exported_to_onnx_runs_equivariant(tmp_path):
    pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")
    from onnx.reference import ReferenceEvaluator

    from symeq.numeric.onnx_write_graph import export_graph_onnx

    c = certify(residual_net(), mirror(2, 2), timeout=120, noise_points=50)
    for model in (c.model, c.float_model):  # exact theta-bar (rounded to float64) and its float copy
        path = tmp_path / "bar.onnx"
        export_graph_onnx(model, path)
        ev = ReferenceEvaluator(str(path))
        X = np.random.default_rng(3).standard_normal((40, 4))
        Y, Yg = ev.run(None, {"x": X})[0], ev.run(None, {"x": X @ P4.T})[0]
        assert np.max(np.abs(Yg - Y @ P4.T)) < 1e-9
        assert np.max(np.abs(Y - c.float_model(X))) < 1e-12
        ops = {n.op_type for n in __import__("onnx").load(str(path)).graph.node}
        assert "Add" in ops


def _onnx_of(tmp_path, net, name):
    """A float graph network as an ONNX file of symeq's own writer (read back by symeq's ONNX graph reader)."""
    pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")
    from symeq.numeric.onnx_write_graph import export_graph_onnx

    path = tmp_path / name
    export_graph_onnx(net, path)
    return path


def test_certify_and_export_from_the_command_line(tmp_path, capsys):
    path = _onnx_of(tmp_path, residual_net(), "net.onnx")
    cert, out, bar = tmp_path / "C.json", tmp_path / "bar.json", tmp_path / "bar.onnx"
    assert main(["certify", str(path), "--group", "mirror:2x2", "--points", "100", "--certificate", str(cert),
                 "--out", str(out)]) == 0
    assert "certified: theta-bar is layerwise equivariant" in capsys.readouterr().out
    assert main(["check", str(cert), str(out)]) == 0
    assert main(["export", str(out), "--onnx", str(bar)]) == 0
    from onnx.reference import ReferenceEvaluator

    X = np.random.default_rng(4).standard_normal((30, 4))
    ev = ReferenceEvaluator(str(bar))
    assert np.max(np.abs(ev.run(None, {"x": X @ P4.T})[0] - ev.run(None, {"x": X})[0] @ P4.T)) < 1e-9


def test_exact_floats_refutes_a_broken_tanh_block_with_a_checkable_witness(tmp_path):
    """The block's hidden layer is tanh: the refutation is an arb-ball witness through the graph."""
    clean = _onnx_of(tmp_path, residual_net(noise=0.0), "clean.onnx")
    broken = _onnx_of(tmp_path, residual_net(noise=0.0, broken=0.25), "broken.onnx")
    assert main(["verify", str(clean), "--exact-floats", "--group", "mirror:2x2"]) == 0
    cert = tmp_path / "R.json"
    assert main(["verify", str(broken), "--exact-floats", "--group", "mirror:2x2", "--certificate", str(cert)]) == 1
    assert main(["check", str(cert), str(tmp_path / "R.model.json")]) == 0


def test_data_gives_the_function_distance_and_task_loss_on_it():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((40, 4)), rng.integers(0, 4, 40)
    c = certify(residual_net(), mirror(2, 2), data=(x, y), task="classifier", timeout=120, noise_points=50)
    assert c.status == "certified"
    assert c.function_distance["data"]["points"] == 40
    theta, bar = (c.task_loss["splits"][0]["loss"][k] for k in ("theta", "theta_bar"))
    assert abs(theta - bar) < 1e-3 * max(1.0, abs(theta))


def test_an_addition_of_affine_branches_only_is_undetermined_not_a_guess():
    """Two affine branches of the input added: no layerwise actions at theta-bar on the exact path (docs/graphs.md),
    so certify says undetermined (exit 3) with the reason, and writes nothing certified."""
    rng = np.random.default_rng(0)
    a, b, h = (_layer(rng, P4, P4, None, NOISE) for _ in range(3))
    nodes = [Node("a", "dense", ("input",), layer=a, segment="a"), Node("b", "dense", ("input",), layer=b, segment="b"),
             Node("s", "add", ("a", "b"), activation=numeric_activation("tanh")),
             Node("h", "dense", ("s",), layer=h, segment="h")]
    try:
        c = certify(GraphModel(4, nodes, "h"), mirror(2, 2), timeout=60, noise_points=50)
    except Undetermined as e:  # the float derivation found no actions to project with
        assert "action" in str(e)
        return
    assert c.status == "undetermined" and c.exit_code == 3
    assert "affine" in c.reason


# -- candidates, options, float graph files (issue 27 items 1 and 3) --------------------------------------

def test_the_candidates_are_chosen_by_the_metric_and_labelled_not_proven():
    c = certify(residual_net(), mirror(2, 2), timeout=120, noise_points=50)
    assert c.status == "certified"
    cands = c.to_json()["actions"]["candidates"]
    assert [x["method"].split(" (")[0] for x in cands] == ["the float derivation's actions along the graph",
                                                           "the trivial action on every hidden space"]
    assert cands[0]["distance"] == c.distance < cands[1]["distance"]  # theta-bar: the nearest in the metric
    assert c.proven_nearest is False and not c.search["optimal"]
    report = c.report()
    assert "best found, not proven nearest" in report and "proven nearest in" not in report.replace("not proven", "")
    assert any("units that explain a gap" in n for n in c.notes)  # not examined on graphs, and said so
    assert all(d["paper_metric"] < 1e-3 and d["k_metric"] < 1e-3 for d in c.diagnostics)  # theta is near theta-bar
    assert "paper" in report and "hidden layer block.1 (mirror)" in report


def _invariant_net(seed: int = 3) -> GraphModel:
    """The residual net with the identity on every hidden space (the stem invariant, the head equivariant)."""
    rng = np.random.default_rng(seed)
    I4, I6 = np.eye(4), np.eye(6)
    nodes = [Node("stem", "dense", ("input",), layer=_layer(rng, I4, P4, "relu", NOISE), segment="stem"),
             Node("block.1", "dense", ("stem",), layer=_layer(rng, I6, I4, "tanh", NOISE), segment="block", index=1),
             Node("block", "dense", ("block.1",), layer=_layer(rng, I4, I6, None, NOISE), segment="block", index=2),
             Node("sum", "add", ("stem", "block"), activation=numeric_activation("relu")),
             Node("head", "dense", ("sum",), layer=_layer(rng, P4, I4, None, NOISE), segment="head")]
    return GraphModel(4, nodes, "head", None, "invariant stem")


def test_the_trivial_action_found_by_the_derivation_is_one_candidate():
    c = certify(_invariant_net(), mirror(2, 2), timeout=120, noise_points=50)
    assert c.status == "certified", c.reason
    cands = c.to_json()["actions"]["candidates"]
    assert len(cands) == 1 and cands[0]["also_found_by"] == ["the trivial action on every hidden space "
                                                             "(a homomorphism)"]
    assert all(a["cols"] == sorted(a["cols"]) for a in c.actions)  # the identity on every hidden space
    assert c.max_distance < 3 * NOISE * 10


def test_conv_and_restarts_are_honoured_or_refused_by_name():
    net = residual_net()
    c = certify(net, mirror(2, 2), conv="dense", restarts=0, timeout=120, noise_points=50)  # no convolution here
    assert c.status == "certified"
    for r in (1, 8):
        with pytest.raises(InputError, match="--restarts .*no matching search"):
            certify(net, mirror(2, 2), restarts=r)
    with pytest.raises(InputError, match="conv must be"):
        certify(net, mirror(2, 2), conv="sparse")


def float_graph_json(net, group=None) -> dict:
    """The graph model file of a float dense graph net built here, with float numbers (docs/graphs.md)."""
    graph, seg = [], None
    file_name = lambda m: m if m == "input" or net.node(m).is_join else (net.node(m).segment or m)  # noqa: E731
    for n in net.nodes:
        if n.is_join:
            seg = None
            graph.append({"name": n.name, n.op: [file_name(i) for i in n.inputs],
                          "activation": None if n.activation is None else n.activation.spec})
            continue
        spec = {"type": "dense", "weight": n.layer.weight.tolist(), "bias": n.layer.bias.tolist(),
                "activation": None if n.layer.activation is None else n.layer.activation.spec}
        if seg is not None and seg["name"] == (n.segment or n.name):
            seg["layers"].append(spec)
        else:
            seg = {"name": n.segment or n.name, "input": file_name(n.inputs[0]), "layers": [spec]}
            graph.append(seg)
    out = {"format": "symeq-model/1", "name": net.name, "input_dim": net.input_dim, "graph": graph,
           "output": file_name(net.output)}
    return out if group is None else {**out, "group": group}


def test_a_float_graph_model_file_is_read_certified_and_checked(tmp_path, capsys):
    from symeq.numeric.onnx_io import load_float_network

    net = residual_net()
    path = tmp_path / "net.json"
    write_json(float_graph_json(net), path)
    back = load_float_network(path)
    assert not back.exact and [n.name for n in back.nodes] == [n.name for n in net.nodes]
    X = np.random.default_rng(7).standard_normal((20, 4))
    assert np.array_equal(back(X), net(X))  # floats read as their exact binary values, nothing rounded
    cert, out = tmp_path / "C.json", tmp_path / "bar.json"
    assert main(["certify", str(path), "--group", "mirror:2x2", "--points", "50", "--certificate", str(cert),
                 "--out", str(out)]) == 0
    assert "certified: theta-bar is layerwise equivariant" in capsys.readouterr().out
    assert main(["check", str(cert), str(out)]) == 0
    capsys.readouterr()
    assert main(["numeric-check", str(path), "--group", "mirror:2x2", "--json"]) in (0, 1)  # (noise: 1 is fine)
    assert json.loads(capsys.readouterr().out)["model"] == str(path)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["graph"][0].update(colour=1), "colour"),
    (lambda d: d.update(layers=[]), "either"),
    (lambda d: d["graph"][1]["layers"][0]["weight"][0].__setitem__(0, float("nan")), "finite"),
    (lambda d: d["graph"][2].update(add=["stem", "nowhere"]), "nowhere"),
])
def test_a_bad_float_graph_file_is_refused_by_name(tmp_path, capsys, change, message):
    data = float_graph_json(residual_net())
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))  # (a NaN is written as NaN, which Python's json reads back)
    assert main(["certify", str(path), "--group", "mirror:2x2", "--points", "10"]) == 2
    assert message in capsys.readouterr().err


def test_a_graph_model_has_no_npz_layout(tmp_path):
    from symeq.numeric.models import save_npz

    with pytest.raises(InputError, match="no .npz layout"):
        save_npz(residual_net(), tmp_path / "net.npz")
