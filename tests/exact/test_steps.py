"""Pipelines as steps (issue 26, item 7; docs/architecture.md, "Pipelines"): the step runner, and each
step of ``verify``, ``certify``, the identifiability decision, the fibre search and the hunter called
alone: it decides, or it does not apply and says why."""


import pytest
from flint import fmpq, fmpq_mat

from symeq.activations import relu
from symeq.budget import Deadline
from symeq.examples import builtin_example
from symeq.groups import builtin_group
from symeq.models import DenseLayer, random_equivariant_model
from symeq.steps import Skip, run_steps, step_name
from symeq import theorem
from symeq.theorem import VERIFY_STEPS, verify


def test_run_steps_records_every_skip_and_the_decider():
    trace = []
    out = run_steps([lambda s: Skip("no"), lambda s: None, lambda s: s * 2, lambda s: 1 / 0], 5, trace)
    assert out == 10
    assert [r for _, r in trace] == ["no", "", None]  # the step after the decider never runs
    assert run_steps([lambda s: Skip("a")], 0, []) is None
    assert not Skip("x") and step_name(theorem._step_premise) == "premise"


def _run(model, group=None, fibre_search=True):
    group = group if group is not None else model.group
    return theorem._Run(model, group, Deadline(60), "auto", 0, 64, fibre_search, 100000)


def _perturbed(model):
    m = model.copy()
    W = fmpq_mat(m.layers[0].weight)
    W[0, 0] = W[0, 0] + fmpq(1, 7)
    m.layers[0] = DenseLayer(W, m.layers[0].bias, m.layers[0].activation)
    return m


def test_verify_trace_names_the_deciding_step():
    v = verify(builtin_example())
    names = [n for n, _ in v.steps]
    assert names[-1] == "actions_at_theta" and v.steps[-1][1] is None
    assert names == [step_name(s) for s in VERIFY_STEPS[:len(names)]]
    assert dict(v.steps)["layers_first"] == "the premise is polynomial: decided by the end-to-end methods"


def test_layers_first_step_alone():
    poly = builtin_example()
    assert isinstance(theorem._step_layers_first(_run(poly)), Skip)
    G = builtin_group("mirror:2x2")
    m = random_equivariant_model(G, ["regular"], relu(), rng=3)
    v = theorem._step_layers_first(_run(m))
    assert v.verdict == "layerwise-equivariant" and v.derivation.found


def test_relu_conv_and_real_steps_say_why_they_do_not_apply():
    poly = builtin_example()
    assert theorem._step_relu_conv_submodel(_run(poly)).reason == "not a ReLU network with convolutions"
    assert theorem._step_real_refute(_run(poly)).reason == "no real activation"


def test_premise_step_decides_only_when_it_fails():
    m = builtin_example()
    run = _run(m)
    out = theorem._step_premise(run)
    assert isinstance(out, Skip) and run.eq.holds
    bad = _perturbed(m)
    v = theorem._step_premise(_run(bad))
    assert v.verdict == "not-equivariant"


def test_actions_step_and_the_final_step():
    m = builtin_example()
    run = _run(m)
    theorem._step_premise(run)
    assert theorem._step_actions_at_theta(run).verdict == "layerwise-equivariant"
    # the last step always decides: undetermined, whatever came before
    run.d = run.d  # the derivation found above
    v = theorem._step_undetermined(run)
    assert v.verdict == "undetermined" and v.exit_code == 3


def test_relu_fibre_step_off_and_not_applicable():
    m = builtin_example()
    run = _run(m, fibre_search=False)
    assert theorem._step_relu_fibre(run).reason == "the fibre-wide search is off"
    run = _run(m)
    assert theorem._step_relu_fibre(run).reason == "not one hidden dense ReLU layer"


# -- the identifiability decision (symeq.fibre.decide.IDENTIFIABILITY_STEPS) --------------------------

def _decision(model, method="auto"):
    from symeq.fibre.decide import _Decision

    return _Decision(model, method, 30.0, "auto", False, "R")


def test_identifiability_steps_alone():
    from symeq.fibre import decide

    m = builtin_example()
    st = _decision(m)
    assert decide._step_affine(st).reason == "no hidden affine layer"
    assert decide._step_tensor(_decision(m, "jacobian-rank")).reason == "only jacobian-rank asked for"
    # the Jacobian step keeps its answer for the Gröbner step, which always ends the decision
    st = _decision(m)
    out = decide._step_jacobian_rank(st)
    assert isinstance(out, Skip) and st.local is not None and st.local.status in out.reason
    # asked alone, the Jacobian step decides
    alone = decide._step_jacobian_rank(_decision(m, "jacobian-rank"))
    assert alone.status == "locally-identifiable" and alone.method == "jacobian-rank"
    assert [s.__name__ for s in decide.IDENTIFIABILITY_STEPS][-1] == "_step_groebner"


def test_groebner_step_refuses_relu_by_name_and_keeps_the_local_answer():
    from symeq.fibre import decide

    G = builtin_group("mirror:2x2")
    m = random_equivariant_model(G, ["regular"], relu(), rng=3)
    st = _decision(m)
    r = decide._step_groebner(st)
    assert st.tried[-1] == {"method": "groebner", "status": "not-applicable",
                            "reason": "the fibre ideal needs dense layers with polynomial activations"}
    assert r.status == "unknown"  # no Jacobian step ran before: nothing to keep


def test_decision_report_lists_every_step():
    from symeq.fibre.decide import decide_identifiability

    r = decide_identifiability(builtin_example(), timeout=30)
    assert [t["method"] for t in r.tried] == ["classical", "tensor", "jacobian-factors", "jacobian-rank", "groebner"]


# -- certify's candidate steps (symeq.certification.CANDIDATE_STEPS) -----------------------------------

def _certify_run(net, G):
    from symeq.budget import Deadline as D
    from symeq.certification import _CertifyRun, _groups
    from symeq.numeric.project import group_elements

    ngroup, egroup = _groups(net, G)
    net = net.with_group(ngroup)
    return _CertifyRun(net, net, ngroup, egroup, words=group_elements(ngroup)[0], kernels=False,
                       conv_shapes=[None] * net.depth, checked=None, metric="parameters", restarts=0, seed=0,
                       tol=1e-6, deadline=D(60), notes=[], ft_opts=None)


def test_certify_candidate_steps_alone():
    from symeq import certification as c
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation

    G = mirror(2, 2)
    net = random_equivariant_numeric(G, [4], numeric_activation({"type": "tanh_series", "order": 3}), rng=0)
    st = _certify_run(net.perturbed(1e-4, rng=1), G)
    assert c._step_float_twin(st) is None and len(st.candidates) == 1 and st.twin is not None
    assert c._step_trivial_action(st).reason == "a group of order 2: the matching search covers it"
    assert c._step_per_generator(st).reason == "a group of order 2: the matching search covers it"
    assert c._step_involution_search(st) is None and st.candidates[0]["proven"]  # the same actions, proven
    best, method = c._choose(st)
    assert best["proven"] and st.search["optimal"]


def test_certify_records_its_candidate_steps():
    from symeq.certification import certify
    from symeq.groups import builtin_group as bg
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation

    G = bg("shift:3")
    net = random_equivariant_numeric(G, [3], numeric_activation({"type": "tanh_series", "order": 3}), rng=0)
    cert = certify(net.perturbed(1e-4, rng=1), G)
    steps = dict(cert.steps)
    assert steps["involution_search"].startswith("a group of order 2 with one generator needed; this one has order 3")
    assert steps["trivial_action"] is None


# -- the fibre-wide search (symeq.fibre.search.SEARCH_STEPS) -------------------------------------------

def _rotation_example():
    from symeq.activations import monomial
    from symeq.groups import FiniteGroup
    from symeq.models import Model
    from symeq.numbers import matrix

    G = FiniteGroup([(matrix([[0, -1], [1, -1]]), matrix([[1]]))], ["r"])
    return Model(2, [DenseLayer([[1, "-1/2"], [0, 1]], None, monomial(2)), DenseLayer([[1, "3/4"]], None, None)], G)


def _search(model, check_theta=True):
    import random as rnd

    from symeq.fibre.groebner import best_exact_engine
    from symeq.fibre.search import FibreSearch, _Search

    return _Search(model, model.group, Deadline(60), FibreSearch("undetermined", engine="sympy"), use_bias=False,
                   main_engine="sympy", exact_engine=best_exact_engine(), rng=rnd.Random(0), check_theta=check_theta,
                   max_candidates=64, candidate_filter=None, t0=0.0)


def test_search_steps_alone():
    from symeq.fibre import search

    m = _rotation_example()
    assert search._step_not_equivariant(_search(m)).reason == "f is G-equivariant"
    assert search._step_theta_itself(_search(m, check_theta=False)).reason == "check_theta is off"
    assert search._step_theta_itself(_search(m)).reason.startswith("no latent action at theta")
    r = search._step_candidate_actions(_search(m))
    assert r.verdict == "no-layerwise-parameter" and [c.outcome for c in r.candidates] == ["empty"]
    v = verify(builtin_example())
    found = search._step_theta_itself(_search(v.model.with_group(v.group)))
    assert found.verdict == "layerwise-parameter"


def test_search_not_equivariant_step_decides():
    from symeq.fibre import search

    m = _perturbed(builtin_example())
    r = search._step_not_equivariant(_search(m))
    assert r.verdict == "not-equivariant"


# -- the hunter's driver, in pieces (symeq.relu.hunt) ----------------------------------------------------

def test_hunt_resume_refuses_other_settings_and_keeps_the_lag(tmp_path):
    from symeq.errors import InputError
    from symeq.relu.hunt import FORMAT, _resumed_lag

    path = tmp_path / "h.jsonl"
    want = {"type": "header", "format": FORMAT, "arch": [2, 3, 2], "group": "rot3", "seed": 0}
    assert _resumed_lag(path, None, dict(want), None, True) == 512  # a new file: the default lag
    header = dict(want, lag=7, minimise=True)
    assert _resumed_lag(path, header, dict(want), None, True) == 7
    with pytest.raises(InputError, match="started with --lag 7"):
        _resumed_lag(path, header, dict(want), 8, True)
    with pytest.raises(InputError, match="holds a hunt with arch"):
        _resumed_lag(path, header, dict(want, seed=1), None, True)


def test_hunt_stream_frontier_is_the_first_missing_index():
    from symeq.relu.hunt import _Stream

    recs = [{"index": i, "status": "verified"} for i in (0, 1, 2, 4)]
    s = _Stream(recs, (2, 3, 2), "rot3", 0, 4, True, None, 5)
    assert s.frontier == 3 and not s.complete()
    assert [i for i, _ in s._items(0, 6)] == [3, 5]


def test_architecture_doc_lists_every_pipeline_step_in_order():
    from pathlib import Path

    from symeq.certification import CANDIDATE_STEPS
    from symeq.fibre.decide import IDENTIFIABILITY_STEPS
    from symeq.fibre.search import SEARCH_STEPS

    text = Path(__file__).resolve().parents[2].joinpath("docs", "architecture.md").read_text()
    section = text[text.index("## Pipelines"):text.index("## Where to add things")]
    for steps in (VERIFY_STEPS, theorem.REAL_STEPS, IDENTIFIABILITY_STEPS, CANDIDATE_STEPS, SEARCH_STEPS):
        names = [step_name(s).replace("jacobian_rank", "jacobian-rank") for s in steps]
        where = [section.find(f"`{n}`") for n in names]
        assert -1 not in where, [n for n, w in zip(names, where) if w < 0]
        assert where == sorted(where), names


def test_real_steps_alone():
    from symeq.activations import activation_from_spec

    G = builtin_group("mirror:2x2")
    m = random_equivariant_model(G, ["regular"], activation_from_spec({"type": "tanh"}), rng=1)
    run = _run(m)
    assert theorem._step_leaky_fibre(_run(m, fibre_search=False)).reason == "the fibre-wide search is off"
    assert theorem._step_leaky_fibre(run).reason == "not one hidden leaky ReLU layer, or its premise fails"
    bad = _perturbed(m)
    v = theorem._step_ball_witness(_run(bad))
    assert v.verdict == "not-equivariant"
    run = _run(bad)
    out = theorem._step_real_undetermined(run)
    assert out.verdict == "undetermined" and out.exit_code == 3
    # through verify: the real pipeline's trace follows the outer one
    w = verify(bad)
    assert w.verdict == "not-equivariant"
    assert ("real_refute.ball_witness", None) in w.steps and w.steps[0][0] == "layers_first"


# ---------------------------------------------------------------- the traces in the output (--json, --explain-steps)

def test_trace_json_and_lines_name_every_step_and_the_decider():
    from symeq.steps import trace_json, trace_lines, tried_trace

    trace = [("a", "did not apply"), ("b", ""), ("c", None)]
    assert trace_json(trace) == [{"step": "a", "outcome": "did not apply"}, {"step": "b", "outcome": "skipped"},
                                 {"step": "c", "outcome": "decided"}]
    assert trace_json([("c", None)], decided="added") == [{"step": "c", "outcome": "added"}]
    lines = trace_lines(trace, title="t:")
    assert lines == ["t:", "  1. a: did not apply", "  2. b: skipped", "  3. c: decided"]
    assert tried_trace([{"method": "m", "status": "unknown"}, {"method": "n", "status": "x", "reason": "r"}]) == [
        ("m", "unknown"), ("n", "x -- r")]


def test_verify_json_and_explain_steps_show_the_trace(tmp_path, capsys):
    import json

    from symeq.cli import main
    from symeq.io import save_model

    path = tmp_path / "m.json"
    save_model(builtin_example(), path)
    assert main(["verify", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = [s["step"] for s in out["steps"]]
    assert names == [step_name(s) for s in VERIFY_STEPS[:len(names)]]  # the pipeline's steps, in order
    assert out["steps"][-1] == {"step": "actions_at_theta", "outcome": "decided"}
    assert all(s["outcome"] for s in out["steps"])
    assert main(["verify", str(path), "--explain-steps"]) == 0
    text = capsys.readouterr().out
    assert "verify steps tried" in text and "actions_at_theta: decided" in text
    assert f"1. layers_first: {out['steps'][0]['outcome']}" in text
    assert main(["verify", str(path)]) == 0
    assert "steps tried" not in capsys.readouterr().out  # only when asked


def test_fibre_json_has_the_steps_of_the_identifiability_decision(tmp_path, capsys):
    import json
    import random

    from symeq.activations import tanh_series
    from symeq.cli import main
    from symeq.io import save_model
    from symeq.models import Model

    rng = random.Random(7)
    nz = [x for x in range(-9, 10) if x]
    m = Model(6, [DenseLayer([[rng.choice(nz) for _ in range(6)] for _ in range(6)],
                             [rng.randint(-9, 9) for _ in range(6)], tanh_series(3)),
                  DenseLayer([[rng.choice(nz) for _ in range(6)] for _ in range(6)],
                             [rng.randint(-9, 9) for _ in range(6)], None)])
    path = tmp_path / "m.json"
    save_model(m, path)
    assert main(["fibre", str(path), "--method", "tensor", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [s["step"] for s in d["steps"]] == [t["method"] for t in d["tried"]] and d["steps"]
    assert d["steps"][-1]["outcome"].startswith(d["tried"][-1]["status"])
    assert main(["fibre", str(path), "--method", "tensor", "--explain-steps"]) == 0
    text = capsys.readouterr().out
    assert "methods tried:" in text and "tensor: identifiable" in text


def test_certify_json_and_explain_steps_show_the_candidate_steps(tmp_path, capsys):
    import json

    pytest.importorskip("scipy", reason="needs scipy: pip install 'symeq[numeric]'")
    from symeq.certification import CANDIDATE_STEPS
    from symeq.cli import main
    from symeq.cli.certify import CANDIDATE_ADDED
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation, save_npz

    net = random_equivariant_numeric(mirror(2, 2), [4], numeric_activation("tanh"), rng=0)
    path = tmp_path / "net.npz"
    save_npz(net, path)
    code = main(["certify", str(path), "--group", "mirror:2x2", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == d["exit_code"]
    names = [s["step"] for s in d["steps"]]
    assert names and set(names) <= {step_name(s) for s in CANDIDATE_STEPS}
    assert any(s["outcome"] == CANDIDATE_ADDED for s in d["steps"])  # some step found a candidate
    main(["certify", str(path), "--group", "mirror:2x2", "--explain-steps"])
    text = capsys.readouterr().out
    assert "candidate steps tried" in text and f"{names[0]}:" in text


def test_verify_output_adds_the_identifiability_steps_when_they_ran():
    from types import SimpleNamespace

    from symeq.cli.verify import _steps_text, _with_steps

    tried = [{"method": "tensor", "status": "not-applicable", "reason": "two hidden layers"},
             {"method": "jacobian-rank", "status": "locally-identifiable"}]
    v = SimpleNamespace(steps=[("premise", "the premise holds"), ("actions_at_theta", None)],
                        identifiability={"status": "locally-identifiable", "tried": tried})
    out = _with_steps({"identifiability": dict(v.identifiability)}, v)
    assert out["steps"][-1] == {"step": "actions_at_theta", "outcome": "decided"}
    assert out["identifiability"]["steps"] == [
        {"step": "tensor", "outcome": "not-applicable -- two hidden layers"},
        {"step": "jacobian-rank", "outcome": "locally-identifiable"}]
    text = "\n".join(_steps_text(v))
    assert "identifiability steps tried:" in text and "1. tensor: not-applicable -- two hidden layers" in text
    v.identifiability = {"status": "unknown", "detail": "not asked"}  # no --identifiability: no such block
    assert "identifiability steps" not in "\n".join(_steps_text(v))
    assert "steps" not in _with_steps({"identifiability": dict(v.identifiability)}, v)["identifiability"]
