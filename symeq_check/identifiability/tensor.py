"""``symeq-identifiability/1`` without a method: one hidden layer with a polynomial activation, by
Kruskal's theorem (docs/identifiability.md): rank-one terms, k-rank bounds, independence, per-neuron
equations and their latent scalings, the orbit size; or a witness of ``not-identifiable``.
"""
from __future__ import annotations

from fractions import Fraction
from itertools import combinations
from math import comb

from .._numbers import CheckError, _dict, _is_int, _poly, _short, _vector, parse_number
from ..algebra import _int_columns, _minor_nonzero
from ..model import _Layer, _model, uniform_bias
from ..report import CheckReport
from ..schema import _strict


# The schemas of symeq-identifiability/1 without a method (written by symeq.fibre.tensor): every key
# is required (each one is read), so a renamed or deleted key is refused rather than read as absent.
_IDENT_HEADER = ("format", "widths", "degree", "bias", "rank_one_terms", "verdict")
IDENT_KEYS = {"identifiable": _IDENT_HEADER + ("kruskal", "independence", "neurons", "orbit_size",
                                               "orbit_dimension"),
              "not-identifiable": _IDENT_HEADER + ("witness",)}
RANK_ONE_TERM_KEYS = ("neuron", "v", "w")
KRUSKAL_KEYS = ("R", "reshaping", "k_lower", "modes")
INDEPENDENCE_KEYS = ("degree", "proof")
NEURON_KEYS = ("neuron", "b", "degrees", "polynomials", "gcd", "solutions", "latent")
IDENT_WITNESS_KEYS = {"lambda": ("kind", "neuron", "degree", "polynomials", "text", "lambda", "bias"),
                      "minimal_polynomial": ("kind", "neuron", "degree", "polynomials", "text",
                                             "minimal_polynomial")}
#: a certificate whose claim is about real parameters says "over": "R" (symeq writes it where the real and
#: the complex claims differ); then every neuron lists "real_solutions" and a witness given by its minimal
#: polynomial lists "real_roots", recounted here by Sturm's theorem.  Without "over" the claim is about C
#: (which implies the real one for "identifiable").
REAL_NEURON_KEYS = NEURON_KEYS + ("real_solutions",)
REAL_WITNESS_KEYS = IDENT_WITNESS_KEYS["minimal_polynomial"] + ("real_roots",)
PROOF_KEYS = {"none": (), "full-column-rank": ("rows",), "khatri-rao": ("left", "right"), "all-minors": (),
              "no-proportional-columns": ("pairs",), "nonzero-columns": ("rows",)}


def _ipoly_trim(p):
    p = list(p)
    while p and p[-1] == 0:
        p.pop()
    return p


def _ipoly_divmod(a, b):
    a, b = _ipoly_trim(a), _ipoly_trim(b)
    q = [Fraction(0)] * max(len(a) - len(b) + 1, 0)
    while len(a) >= len(b) and a:
        f = a[-1] / b[-1]
        s = len(a) - len(b)
        q[s] = f
        for i, c in enumerate(b):
            a[s + i] -= f * c
        a = _ipoly_trim(a)
    return q, a


def _ipoly_gcd(a, b):
    a, b = _ipoly_trim(a), _ipoly_trim(b)
    while b:
        a, b = b, _ipoly_divmod(a, b)[1]
    return [c / a[-1] for c in a] if a else a


def _ipoly_strip_x(p):
    p = _ipoly_trim(p)
    while p and p[0] == 0:
        p = p[1:]
    return p


def _ipoly_roots_count(p) -> int:
    """Distinct complex roots of p != 0: deg p - deg gcd(p, p')."""
    p = _ipoly_trim(p)
    if len(p) <= 1:
        return 0
    dp = [k * c for k, c in enumerate(p)][1:]
    return (len(p) - 1) - (len(_ipoly_gcd(p, dp)) - 1)


def _sign_at_infinity(p, positive: bool) -> int:
    s = 1 if p[-1] > 0 else -1
    return s if positive or (len(p) - 1) % 2 == 0 else -s


def _real_roots_count(p) -> int:
    """Distinct real roots of p != 0 (coefficients from degree 0 up), exactly: the sign changes of the
    Sturm sequence of the squarefree part at -infinity minus those at +infinity (Sturm 1829)."""
    p = _ipoly_trim(p)
    if len(p) <= 1:
        return 0
    dp = [k * c for k, c in enumerate(p)][1:]
    g = _ipoly_gcd(p, dp)
    p0 = _ipoly_divmod(p, g)[0] if len(g) > 1 else p
    seq = [_ipoly_trim(p0), _ipoly_trim([k * c for k, c in enumerate(p0)][1:])]
    while len(seq[-1]) > 1:
        r = _ipoly_divmod(seq[-2], seq[-1])[1]
        if not r:
            break
        seq.append([-c for c in r])
    seq = [q for q in seq if q]

    def changes(positive):
        signs = [_sign_at_infinity(q, positive) for q in seq]
        return sum(1 for a, b in zip(signs, signs[1:]) if a != b)

    return changes(False) - changes(True)


def _neuron_equations(coeffs, b: Fraction, bias: bool, d: int, degrees) -> dict:
    """The per-neuron polynomials in lambda (lowest degree first) for the given degrees k.

    With biases: degree d-1 forces b' = s + lambda (b - s); then for k < d-1
    P_k = sum_m tau_m C(m, k) u^(m-k) (lambda^(m-k) - lambda^(d-k)), tau(t) = sigma(t + s),
    u = b - s.  Without biases: a_k (1 - lambda^(d-k)).
    """
    out = {}
    s = -coeffs[d - 1] / (d * coeffs[d])
    tau = [sum((coeffs[m] * comb(m, j) * s ** (m - j) for m in range(j, d + 1)), Fraction(0)) for j in range(d + 1)]
    for k in degrees:
        c = [Fraction(0)] * (d - k + 1)
        if bias:
            u = b - s
            for m in range(k, d + 1):
                t = tau[m] * comb(m, k) * u ** (m - k)
                c[m - k] += t
                c[d - k] -= t
        else:
            c[0] += coeffs[k]
            c[d - k] -= coeffs[k]
        out[k] = _ipoly_trim(c)
    return out


def _latent_scalings(coeffs, bias: bool, d: int):
    """K's scalings of a neuron, derived here: "all" (c (t - s)^d with a usable shift) or [1] / [1, -1]."""
    s = -coeffs[d - 1] / (d * coeffs[d])
    tau = [sum((coeffs[m] * comb(m, j) * s ** (m - j) for m in range(j, d + 1)), Fraction(0)) for j in range(d + 1)]
    usable = bias or s == 0  # a scaling moves the pre-activation's constant unless s = 0 or biases exist
    # c (t - s)^d + e: every alpha != 0, when biases absorb s (1 - alpha) and e (1 - alpha^d), or
    # without biases when s = e = 0 (docs/theory.md, the absorbed-constant rule)
    if all(t == 0 for t in tau[1:d]) and (bias or (s == 0 and tau[0] == 0)):
        return "all"
    out = [Fraction(1)]
    # alpha = -1: sigma(-(t - s) + s) = q sigma(t) + o, i.e. tau(-u) = q tau(u) + o; an offset o needs
    # the next layer's bias (sigmoid-like sign flips)
    for q in (1, -1):
        if usable and all(tau[m] * (-1) ** m == q * tau[m] for m in range(1, d + 1)):
            if tau[0] * (1 - q) == 0 or bias:
                out.append(Fraction(-1))
            break
    return out


class _KProof:
    """Recomputes lower bounds on Kruskal ranks of Khatri-Rao products of V and W from proofs."""

    def __init__(self, V, W, R: int):
        self.V, self.W, self.R = _int_columns(V), _int_columns(W), R
        self.dims = {"V": len(V[0]), "W": len(W[0])}
        self.seen: dict = {}

    def entry(self, factors: str, row, j: int) -> int:
        e = 1
        for f, i in zip(factors, row):
            e *= (self.V if f == "V" else self.W)[j][i]
        return e

    def _row(self, factors: str, row, where: str):
        if not isinstance(row, list) or len(row) != len(factors) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.dims[f] for f, i in zip(factors, row)):
            raise CheckError(f"{where}: bad row index {_short(row)} for factors {factors}")
        return tuple(row)

    def bound(self, proof, factors: str, where: str) -> int:
        """The recomputed bound, or -1 when the proof fails or its claimed ``k`` differs."""
        b = self._bound(proof, factors, where)
        k = proof.get("k")
        if not _is_int(k) or k != b:
            return -1
        return b

    def _bound(self, proof, factors: str, where: str) -> int:
        proof = _dict(proof, where)
        if isinstance(proof.get("kind"), str) and proof["kind"] in PROOF_KEYS:
            _strict(proof, where, ("factors", "kind", "k") + PROOF_KEYS[proof["kind"]])
        if proof.get("factors") != factors:
            raise CheckError(f"{where}: proof for {_short(proof.get('factors'))}, expected {factors}")
        kind, R = proof.get("kind"), self.R
        if kind == "none":
            return 0
        if kind == "full-column-rank":
            rows = proof.get("rows")
            if not isinstance(rows, list) or len(rows) != R:
                raise CheckError(f"{where}: full-column-rank needs {R} rows")
            rows = tuple(self._row(factors, r, where) for r in rows)
            key = (factors, rows)  # the same minor recurs in several modes and degrees: check it once
            if key not in self.seen:
                self.seen[key] = _minor_nonzero([[self.entry(factors, r, j) for j in range(R)] for r in rows])
            return R if self.seen[key] else -1
        if kind == "khatri-rao":
            left, right = _dict(proof.get("left"), where), _dict(proof.get("right"), where)
            lf, rf = left.get("factors"), right.get("factors")
            if not (isinstance(lf, str) and isinstance(rf, str) and lf and rf and lf + rf == factors):
                raise CheckError(f"{where}: khatri-rao split {_short(lf)} + {_short(rf)} is not {factors}")
            kl, kr = self.bound(left, lf, where + ".left"), self.bound(right, rf, where + ".right")
            if kl < 0 or kr < 0:
                return -1
            return min(kl + kr - 1, R) if kl >= 1 and kr >= 1 else 0
        if kind == "no-proportional-columns":
            pairs = proof.get("pairs")
            if not isinstance(pairs, list):
                raise CheckError(f"{where}: 'pairs' must be a list")
            seen = set()
            for p in pairs:
                if not isinstance(p, list) or len(p) != 4:
                    raise CheckError(f"{where}: a pair is [j, k, row1, row2]")
                j, k = p[0], p[1]
                if not (isinstance(j, int) and isinstance(k, int) and 0 <= j < k < R):
                    raise CheckError(f"{where}: bad column pair {_short(p[:2])}")
                r1, r2 = self._row(factors, p[2], where), self._row(factors, p[3], where)
                if self.entry(factors, r1, j) * self.entry(factors, r2, k) == \
                        self.entry(factors, r2, j) * self.entry(factors, r1, k):
                    return -1
                seen.add((j, k))
            return min(2, R) if len(seen) == R * (R - 1) // 2 else -1
        if kind == "all-minors":
            # k-rank m of an m-row matrix V or W: every m columns have a nonzero m x m determinant
            if factors not in ("V", "W") or not 2 <= self.dims[factors] < R:
                raise CheckError(f"{where}: all-minors needs V or W with fewer rows than columns")
            m, cols = self.dims[factors], (self.V if factors == "V" else self.W)
            if comb(R, m) > 100000:
                raise CheckError(f"{where}: too many minors ({comb(R, m)}) to check")
            for sub in combinations(range(R), m):
                key = (factors, sub)
                if key not in self.seen:
                    self.seen[key] = _minor_nonzero([[cols[j][i] for j in sub] for i in range(m)])
                if not self.seen[key]:
                    return -1
            return m
        if kind == "nonzero-columns":
            rows = proof.get("rows")
            if not isinstance(rows, list) or len(rows) != R:
                raise CheckError(f"{where}: nonzero-columns needs one row per column")
            ok = all(self.entry(factors, self._row(factors, r, where), j) != 0 for j, r in enumerate(rows))
            return 1 if ok else -1
        raise CheckError(f"{where}: unknown k-rank proof kind {_short(kind)}")


def _open_identifiability(cert, model) -> tuple[int, list, CheckReport]:
    """(input dimension, layers, an undecided report) of an identifiability certificate's model; a
    verdict other than ``identifiable`` or ``not-identifiable`` is a CheckError."""
    n_in, layers, _ = _model(model)
    verdict = _dict(cert, "certificate").get("verdict")
    if verdict not in ("identifiable", "not-identifiable"):
        raise CheckError(f"certificate: unknown identifiability verdict {_short(verdict)}")
    return n_in, layers, CheckReport(None, str(verdict))


def check_tensor(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a ``symeq-identifiability/1`` certificate without a ``method`` (Kruskal), exactly.

    ``identifiable``: the rank-one terms are the model's; each mode's k-rank bound is recomputed
    (nonzero maximal minors -- modulo 2^61 - 1, else by fraction-free elimination --, every maximal
    minor of a matrix with fewer rows than columns, the Khatri-Rao lemma
    k(A (.) B) >= min(k_A + k_B - 1, R), no two proportional columns, nonzero columns) and their sum
    is at least 2R + 2 (Kruskal); the lower-degree terms used are independent (a k-rank of R); every
    neuron's equations are recomputed from the activation and its bias, their gcd has exactly the
    latent scalings as distinct nonzero roots (derived here from the activation); the orbit size is
    R! times the product.  ``not-identifiable``: the witness solves every per-neuron equation, is
    not a latent scaling, and its neuron has no clone and is not dead.  (``max_group_size`` is the
    dispatch's common keyword: no group is enumerated here.)
    """
    n_in, layers, report = _open_identifiability(cert, model)
    verdict = report.verdict
    over = cert.get("over", "C")
    if "over" in cert and over != "R":
        raise CheckError(f'certificate: "over" must be "R" when given, got {_short(over)}')
    _strict(cert, "certificate", IDENT_KEYS[verdict] + (("over",) if "over" in cert else ()))
    if len(layers) != 2 or not isinstance(layers[0], _Layer) or not isinstance(layers[0].act, tuple):
        report.reasons.append("the certificate covers one hidden dense layer with a polynomial activation")
        report.accepted = False
        return report
    first, last = layers
    coeffs, d = list(first.act), len(first.act) - 1
    W = [list(r) for r in first.weight]
    R = len(W)
    V = [[last.weight[i][j] for i in range(len(last.weight))] for j in range(R)]
    bias = uniform_bias(layers)  # the declared parameter space (issue 25): biases in both layers or in none
    if bias is None:
        report.reasons.append("the tensor certificate takes biases in both layers or in none; this model declares "
                              "them in one layer only")
        report.accepted = False
        return report
    if d < 2:
        report.reasons.append(f"activation degree {d} < 2")
    widths = [n_in] + [len(l.weight) for l in layers]
    if cert.get("widths") != widths:
        report.reasons.append(f"certificate widths {_short(cert.get('widths'))} differ from the model's {widths}")
    if not _is_int(cert.get("degree")) or cert.get("degree") != d or cert.get("bias") is not bias:
        report.reasons.append(f"certificate degree/bias {_short(cert.get('degree'))}/{_short(cert.get('bias'))} differ "
                              f"from the model's {d}/{bias}")
    terms = cert.get("rank_one_terms")
    if not isinstance(terms, list) or len(terms) != R:
        report.reasons.append(f"rank_one_terms must list the model's {R} neurons")
    else:
        for j, t in enumerate(terms):
            t = _strict(t, f"certificate.rank_one_terms[{j}]", RANK_ONE_TERM_KEYS)
            if not _is_int(t.get("neuron")) or t.get("neuron") != j or _vector(t.get("v"), f"term {j + 1} v") != tuple(V[j]) \
                    or _vector(t.get("w"), f"term {j + 1} w") != tuple(W[j]):
                report.reasons.append(f"rank-one term {j + 1} is not (column {j + 1} of W_2, row {j + 1} of W_1)")
        if not report.reasons:
            report.checks.append(f"{R} rank-one terms v_j (x) w_j^{d} are the model's")
    if report.reasons:  # widths, degree or theta's terms are not the model's: a certificate of another model
        report.accepted = False
        report.mismatch = True
        return report
    latent = _latent_scalings(coeffs, bias, d)
    K = _KProof(V, W, R)
    if verdict == "not-identifiable":
        _check_ident_witness(report, cert, K, coeffs, d, bias, latent, [l for l in first.bias], over)
    else:
        _check_ident_positive(report, cert, K, coeffs, d, bias, latent, list(first.bias), over)
    report.accepted = not report.reasons
    return report


def _check_ident_positive(report, cert, K: _KProof, coeffs, d, bias, latent, b1, over: str = "C") -> None:
    R = K.R
    if not _check_ident_kruskal(report, cert, K, d):
        return
    avail = _check_ident_independence(report, cert, K, d, bias)
    if avail is None:
        return
    neurons = cert.get("neurons")
    if not isinstance(neurons, list) or len(neurons) != R:
        raise CheckError(f"neurons must list {R} entries")
    allowed = set(range(1, d - 1)) if bias else set(range(d))
    sizes, complex_sizes = [], []
    for j, nd in enumerate(neurons):
        if not _check_ident_neuron(report, j, nd, coeffs, d, bias, latent, b1, avail & allowed, over,
                                   sizes, complex_sizes):
            return
    report.checks.append(f"every neuron's system has exactly the latent scalings "
                         f"({'every alpha != 0' if latent == 'all' else [str(a) for a in latent]}) as "
                         + ("real solutions (Sturm sequences; a real theta' has real scalings), "
                            f"with {complex_sizes} complex ones" if over == "R" else "solutions"))
    _check_ident_orbit(report, cert, R, latent, sizes, over)


def _check_ident_kruskal(report, cert, K: _KProof, d) -> bool:
    """Check the Kruskal block (reshaping, k-rank proofs and bounds, the condition); True when it holds."""
    R = K.R
    kr = _strict(cert.get("kruskal"), "certificate.kruskal", KRUSKAL_KEYS)
    modes, proofs, claimed = kr.get("reshaping"), kr.get("modes"), kr.get("k_lower")
    if not (isinstance(modes, list) and len(modes) == 3 and all(isinstance(m, str) and m for m in modes)
            and isinstance(proofs, list) and len(proofs) == 3):
        raise CheckError("kruskal: 'reshaping' and 'modes' must list three modes")
    if not _is_int(kr.get("R")) or kr.get("R") != R:
        report.reasons.append(f"kruskal R {_short(kr.get('R'))} is not the model's {R} neurons")
        return False
    joined = "".join(modes)
    if joined.count("V") != 1 or not modes[0].startswith("V") or set(joined) != {"V", "W"} or \
            joined.count("W") != d or "V" in "".join(modes[1:]):
        report.reasons.append(f"reshaping {modes} is not V W^a | W^b | W^c with a + b + c = {d}")
        return False
    ks = [K.bound(p, m, f"certificate.kruskal.modes[{i}]") for i, (p, m) in enumerate(zip(proofs, modes))]
    if any(k < 0 for k in ks):
        report.reasons.append(f"a k-rank proof fails (a minor or entry claimed nonzero is zero): bounds {ks}")
        return False
    if claimed != ks:
        report.reasons.append(f"claimed k-rank bounds {_short(claimed)} differ from the recomputed {ks}")
        return False
    if not (sum(ks) >= 2 * R + 2 or (R == 1 and min(ks) >= 1)):
        report.reasons.append(f"Kruskal's condition fails: {' + '.join(map(str, ks))} < 2R+2 = {2 * R + 2}")
        return False
    report.checks.append(f"Kruskal: k-ranks >= {ks} on {' (x) '.join(modes)}, sum {sum(ks)} >= 2R+2 = {2 * R + 2}: "
                         "the rank-one terms are unique up to permutation and scaling")
    return True


def _check_ident_independence(report, cert, K: _KProof, d, bias):
    """Check the lower-degree independence proofs; return the independent degrees, or None on a failure."""
    R = K.R
    avail = set()
    indep = cert.get("independence")
    if not isinstance(indep, list):
        raise CheckError("independence must be a list")
    for idx, e in enumerate(indep):
        e = _strict(e, f"certificate.independence[{idx}]", INDEPENDENCE_KEYS)
        k = e.get("degree")
        if not (isinstance(k, int) and not isinstance(k, bool) and 0 <= k < d):
            raise CheckError(f"independence: bad degree {_short(k)}")
        if K.bound(e.get("proof"), "V" + "W" * k, f"certificate.independence[{idx}].proof") != R:
            report.reasons.append(f"degree {k}: the terms v_j (x) w_j^{k} are not proved independent")
            return None
        avail.add(k)
    report.checks.append(f"lower-degree terms proved linearly independent for degrees {sorted(avail)}")
    if bias and d - 1 not in avail:
        report.reasons.append(f"with biases the degree-{d - 1} terms must be independent (they fix b')")
        return None
    return avail


def _check_ident_neuron_system(report, j, nd, coeffs, d, bias, b1, usable):
    """Check neuron j's index, bias, degrees, equations, gcd and solution count; return (gcd, solutions) or None."""
    degs = nd.get("degrees")
    if not _is_int(nd.get("neuron")) or nd.get("neuron") != j or \
            parse_number(nd.get("b"), f"neuron {j + 1} b") != b1[j]:
        report.reasons.append(f"neuron {j + 1}: index or bias differs from the model")
        return None
    if not isinstance(degs, list) or not all(_is_int(k) for k in degs) or \
            not set(degs) <= usable or len(set(degs)) != len(degs):
        report.reasons.append(f"neuron {j + 1}: degrees {_short(degs)} are not among the independent ones")
        return None
    eqs = _neuron_equations(coeffs, b1[j], bias, d, degs)
    listed = nd.get("polynomials")
    if not isinstance(listed, list) or not all(
            isinstance(p, list) and len(p) == 2 and _is_int(p[0]) and isinstance(p[1], list) for p in listed) \
            or sorted((p[0], _ipoly_trim(_vector(p[1], f"neuron {j + 1} polynomial") if p[1] else []))
                      for p in listed) != sorted(eqs.items()):
        report.reasons.append(f"neuron {j + 1}: the listed per-neuron polynomials are not the model's")
        return None
    g = []
    for p in eqs.values():
        g = _ipoly_gcd(g, p) if g else _ipoly_gcd(p, p)
    g = _ipoly_strip_x(g)
    sols = "all" if not any(eqs.values()) else _ipoly_roots_count(g)
    cg = nd.get("gcd")
    if (sols == "all" and cg is not None) or (sols != "all" and (
            not isinstance(cg, list) or not cg or _ipoly_trim(_vector(cg, f"neuron {j + 1} gcd")) != g)):
        report.reasons.append(f"neuron {j + 1}: the listed gcd is not the gcd of the equations")
        return None
    if nd.get("solutions") != sols:
        report.reasons.append(f"neuron {j + 1}: {sols} solutions, the certificate says "
                              f"{_short(nd.get('solutions'))}")
        return None
    return g, sols


def _check_ident_neuron(report, j, nd, coeffs, d, bias, latent, b1, usable, over, sizes, complex_sizes) -> bool:
    """Check neuron j's entry against the model and the latent scalings (appending to sizes); True when it holds."""
    nd = _strict(nd, f"certificate.neurons[{j}]", REAL_NEURON_KEYS if over == "R" else NEURON_KEYS)
    system = _check_ident_neuron_system(report, j, nd, coeffs, d, bias, b1, usable)
    if system is None:
        return False
    g, sols = system
    if over == "R":  # the claim is about real lambda: count the real roots of the gcd (Sturm)
        real = "all" if sols == "all" else _real_roots_count(g)
        if nd.get("real_solutions") != real:
            report.reasons.append(f"neuron {j + 1}: {real} real solutions, the certificate says "
                                  f"{_short(nd.get('real_solutions'))}")
            return False
        complex_sizes.append(sols)
        sols = real
    cl = nd.get("latent")
    if cl != "all" and not (isinstance(cl, list) and cl):
        raise CheckError(f"neuron {j + 1}: latent must be \"all\" or a non-empty list")
    if latent == "all":
        if sols != "all" or cl != "all":
            report.reasons.append(f"neuron {j + 1}: solutions {sols} are not the monomial scalings")
            return False
        return True
    if cl == "all" or [parse_number(a, "latent") for a in (cl or [])] != latent:
        report.reasons.append(f"neuron {j + 1}: latent scalings {_short(cl)} are not the activation's {latent}")
        return False
    if sols == "all" or sols != len(latent) or any(_poly(g, a) != 0 for a in latent):
        report.reasons.append(f"neuron {j + 1}: {sols} {'real ' if over == 'R' else ''}solutions but "
                              f"{len(latent)} latent scalings")
        return False
    sizes.append(len(latent))
    return True


def _check_ident_orbit(report, cert, R, latent, sizes, over) -> None:
    """Check the orbit's dimension and size (R! times the latent scalings per neuron) and report the fibre."""
    if latent == "all":
        if cert.get("orbit_size") is not None or cert.get("orbit_dimension") != R:
            report.reasons.append("orbit: a torus of dimension R (monomial scalings) expected")
            return
        report.checks.append(f"fibre = orbit: S_{R} x a torus of dimension {R}")
        return
    if not _is_int(cert.get("orbit_dimension")) or cert.get("orbit_dimension") != 0:
        report.reasons.append("orbit: a finite orbit has orbit_dimension 0")
        return
    orbit = 1
    for k in range(2, R + 1):
        orbit *= k
    for s_ in sizes:
        orbit *= s_
    if cert.get("orbit_size") != str(orbit):
        report.reasons.append(f"orbit size {_short(cert.get('orbit_size'))} differs from R! x prod = {orbit}")
        return
    report.checks.append(f"fibre = orbit over {over}: {orbit} points, each from a unique latent element")


def _check_ident_witness(report, cert, K: _KProof, coeffs, d, bias, latent, b1, over: str = "C") -> None:
    w = _dict(cert.get("witness"), "witness")
    _strict(w, "certificate.witness", IDENT_WITNESS_KEYS["lambda"] if "lambda" in w else
            REAL_WITNESS_KEYS if over == "R" else IDENT_WITNESS_KEYS["minimal_polynomial"])
    j = w.get("neuron")
    if not (isinstance(j, int) and not isinstance(j, bool) and 0 <= j < K.R):
        raise CheckError(f"witness: bad neuron {_short(j)}")
    if latent == "all":
        report.reasons.append("the activation's scalings are all of C*: no scaling lies outside K")
        return
    if not any(K.W[j]) or not any(K.V[j]) or any(
            all(K.W[j][a] * K.W[k][c] == K.W[k][a] * K.W[j][c] for a in range(len(K.W[j])) for c in range(a))
            for k in range(K.R) if k != j):
        report.reasons.append(f"neuron {j + 1} is dead or has a proportional twin: the point may lie in the orbit")
        return
    eqs = _neuron_equations(coeffs, b1[j], bias, d, range(1, d - 1) if bias else range(d))
    listed = w.get("polynomials")
    if w.get("kind") != "per-neuron" or not _is_int(w.get("degree")) or w.get("degree") != d or \
            not isinstance(listed, list) or not all(isinstance(p, list) and len(p) == 2 and _is_int(p[0])
                                                    and isinstance(p[1], list) for p in listed) or \
            sorted((p[0], _ipoly_trim(_vector(p[1], "witness polynomial") if p[1] else [])) for p in listed) != \
            sorted(eqs.items()):
        report.reasons.append(f"the witness's kind, degree or per-neuron polynomials are not neuron {j + 1}'s")
        return
    if "lambda" in w:
        lam = parse_number(w.get("lambda"), "witness lambda")
        if lam == 0 or lam in latent or any(_poly(p, lam) != 0 for p in eqs.values()):
            report.reasons.append(f"lambda = {lam} is zero, a latent scaling, or misses a per-neuron equation")
            return
        if bias:
            s = -coeffs[d - 1] / (d * coeffs[d])
            if parse_number(w.get("bias"), "witness bias") != s + lam * (b1[j] - s):
                report.reasons.append("the witness bias is not s + lambda (b - s)")
                return
        report.checks.append(f"neuron {j + 1}: lambda = {lam} solves every equation (degrees {sorted(eqs)}) and is not a "
                             "latent scaling: a fibre point outside the orbit")
        return
    q = _ipoly_trim(_vector(w.get("minimal_polynomial"), "witness minimal_polynomial"))
    if len(q) < 2 or q[0] == 0 or any(_poly(q, a) == 0 for a in latent) or \
            any(_ipoly_divmod(p, q)[1] for p in eqs.values()):
        report.reasons.append("the witness polynomial has a latent or zero root, or does not divide every equation")
        return
    real = _real_roots_count(q)
    if over == "R" and (w.get("real_roots") != real or real == 0):
        report.reasons.append(f"the witness polynomial has {real} real roots (Sturm), the certificate says "
                              f"{_short(w.get('real_roots'))}: a real fibre point outside the orbit needs one")
        return
    report.checks.append(f"neuron {j + 1}: every root of the witness polynomial solves every equation and none is a latent "
                         f"scaling: fibre points outside the orbit ({real} real root(s), Sturm: "
                         + ("not identifiable over R and C)" if real else "over C only; the claim is about C)"))
