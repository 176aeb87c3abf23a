"""The speed-ups of certify's search and diagnostics give the results of the plain computations.

Engineer H2 (issue 26's speed acceptance, benchmarks/results/vs_ac97227/compare.md): the matching
terms are memoised across the starts and the lower bound (:class:`symeq.numeric.project.TermsCache`,
bitwise the same), and the paper's metric is fitted from one factorisation per layer instead of
``numpy.linalg.lstsq`` (equal up to float round-off, lstsq itself where F is ill conditioned).
"""

from __future__ import annotations

import numpy as np
import pytest

from symeq.groups import mirror
from symeq.numeric import numeric_activation, random_equivariant_numeric, scramble_numeric
from symeq.numeric import project as P


def _net(width=12, seed=0, noise=1e-3, act="tanh"):
    G = mirror(4, 4)
    m = random_equivariant_numeric(G, [width, width], numeric_activation(act), rng=seed)
    s, _ = scramble_numeric(m, rng=seed + 1)
    th = s.parameters()
    return G, s.with_parameters(th * (1.0 + noise * np.random.default_rng(seed + 2).standard_normal(th.shape)))


def _starts(model, group, k=6, seed=0):
    rng = np.random.default_rng(seed)
    out = [(None, "identity"), (None, "forward"), (None, "backward")]
    return out + [(P.random_involutions(model, group, rng), "identity") for _ in range(k)]


def _keys(actions):
    return [P.action_key(a) for per in actions.actions for a in per]


@pytest.mark.parametrize("act,noise", [("tanh", 1e-3), ("tanh", 0.3), ("relu", 1e-2)])
def test_shared_cache_gives_the_same_search(act, noise):
    G, net = _net(noise=noise, act=act)
    ng = net.group
    cache = P.TermsCache(net)
    for start, init in _starts(net, ng):
        plain = P.nearest_involution_actions(net, ng, start=start, init=init)
        cached = P.nearest_involution_actions(net, ng, start=start, init=init, cache=cache)
        assert _keys(cached) == _keys(plain)
        assert (cached.method, cached.proven_nearest, cached.notes) == (plain.method, plain.proven_nearest, plain.notes)
    assert cache.hits > 0  # the starts did share work
    lb_plain = P.involution_lower_bound(net, ng)
    lb_cached = P.involution_lower_bound(net, ng, cache=cache)
    assert lb_cached == lb_plain and lb_plain[0] is not None


def test_cache_of_another_model_is_not_used():
    _, a = _net(seed=0)
    _, b = _net(seed=5)
    cache = P.TermsCache(a)
    ra = P.nearest_involution_actions(a, a.group, init="forward", cache=cache)
    rb = P.nearest_involution_actions(b, b.group, init="forward", cache=cache)
    assert _keys(rb) == _keys(P.nearest_involution_actions(b, b.group, init="forward"))
    assert _keys(ra) == _keys(P.nearest_involution_actions(a, a.group, init="forward"))


def test_cache_evicts_beyond_its_bytes():
    _, net = _net(width=16)
    cache = P.TermsCache(net, max_bytes=3 * 17 * 17 * 8)
    for start, init in _starts(net, net.group, k=4):
        got = P.nearest_involution_actions(net, net.group, start=start, init=init, cache=cache)
        assert _keys(got) == _keys(P.nearest_involution_actions(net, net.group, start=start, init=init))
    assert cache.nbytes <= cache.max_bytes


def test_least_squares_is_lstsq():
    pytest.importorskip("scipy", reason="needs scipy: pip install 'symeq[numeric]'")
    rng = np.random.default_rng(3)
    F = np.tanh(2.0 * rng.standard_normal((90, 30)))
    B = np.tanh(rng.standard_normal((90, 30)))
    fit = P._LeastSquares(F)
    assert fit.cho is not None  # well conditioned: the factorisation is used
    ref = np.linalg.lstsq(F, B, rcond=None)[0]
    assert np.max(np.abs(fit.solve(B) - ref)) <= 1e-11 * np.max(np.abs(ref))
    F[:, 7] = F[:, 3]  # rank deficient: lstsq's minimum-norm answer itself
    fit = P._LeastSquares(F)
    assert fit.cho is None
    assert np.array_equal(fit.solve(B), np.linalg.lstsq(F, B, rcond=None)[0])
    wide = P._LeastSquares(F[:20])
    assert wide.cho is None and np.array_equal(wide.solve(B[:20]), np.linalg.lstsq(F[:20], B[:20], rcond=None)[0])


class _Lstsq:
    """The slow version: numpy's lstsq for every generator."""

    def __init__(self, F):
        self.F = F

    def solve(self, B):
        return np.linalg.lstsq(self.F, B, rcond=None)[0]


def _same_diagnostics(fast, slow):
    assert len(fast) == len(slow) > 0
    for f, s in zip(fast, slow):
        assert set(f) == set(s)
        for k in f:
            if k == "paper_metric":
                assert f[k] == pytest.approx(s[k], rel=1e-9, abs=1e-15)
            else:
                assert f[k] == s[k], k


def test_layer_diagnostics_as_with_lstsq(monkeypatch):
    G, net = _net(width=20, noise=1e-2)
    acts = P.nearest_involution_actions(net, net.group, init="forward").actions
    x = np.random.default_rng(4).standard_normal((120, net.input_dim))
    fast = P.layer_diagnostics(net, x, net.group, acts, seed=1)
    monkeypatch.setattr(P, "_LeastSquares", _Lstsq)
    _same_diagnostics(fast, P.layer_diagnostics(net, x, net.group, acts, seed=1))


def test_certify_reports_as_the_slow_version(monkeypatch):
    from symeq.certification import certify

    G, net = _net(width=12, noise=1e-3)
    fast = certify(net, G, timeout=300, noise_points=200)
    monkeypatch.setattr(P.TermsCache, "get", lambda self, key: None)  # every product and matching recomputed
    monkeypatch.setattr(P, "_LeastSquares", _Lstsq)
    slow = certify(net, G, timeout=300, noise_points=200)
    assert fast.status == slow.status and fast.digits == slow.digits
    assert fast.max_distance == slow.max_distance
    assert fast.search == slow.search
    assert fast.method == slow.method
    _same_diagnostics(fast.diagnostics, slow.diagnostics)
