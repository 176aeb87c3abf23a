"""The whole pipeline of Theorem 4.1: premise -> conclusion -> certificate.

:func:`verify` decides end-to-end equivariance exactly, derives the layerwise actions
rho_i : G -> K_i, checks them exactly, and returns a :class:`Verification` with the verdict,
the derived actions, every check made, a readable report and a certificate that the independent
checker :mod:`symeq_check` re-verifies with nothing but ``fractions.Fraction``.

Verdicts and exit codes: ``layerwise-equivariant`` (0), ``not-equivariant`` (1, with a rational
witness), ``no-layerwise-parameter`` (1, reserved for the fibre-wide search), ``undetermined`` (3).

Examples
--------
>>> from symeq.examples import builtin_example
>>> v = verify(builtin_example())
>>> v.verdict, v.exit_code
('layerwise-equivariant', 0)
>>> len(v.actions), len(v.actions[0])   # hidden layers x generators
(2, 1)
>>> from symeq_check import check_certificate
>>> from symeq.io import model_to_json
>>> check_certificate(v.certificate(), model_to_json(builtin_example())).accepted
True
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from .version import __version__
from .budget import Deadline
from .digest import layers_digest
from .equivariance import EquivarianceResult, decide_equivariance, has_real, layers_first, refute_with_balls
from .errors import BudgetExceeded, InputError, LimitExceeded
from .groups import FiniteGroup
from .io import CERTIFICATE_FORMAT, layers_to_json
from .layerwise import Derivation, absorbs_offsets, derive_latent_actions
from .layers.registry import all_support, supports
from .graph.model import GraphModel
from .models import Model
from .notation import format_cycles, wrap_cycles
from .numbers import format_matrix, format_number, mat_rows, monomial_parts
from .steps import Skip, run_steps

__all__ = ["Verification", "verify", "EXIT_CODES", "VERIFY_STEPS", "latent_group_names", "describe_action",
           "decide_verification_identifiability", "identifiability_stopped"]

EXIT_CODES = {"layerwise-equivariant": 0, "not-equivariant": 1, "no-layerwise-parameter": 1, "undetermined": 3}


def _versions() -> dict:
    import flint
    import networkx
    import sympy

    return {"symeq": __version__, "python-flint": flint.__version__, "sympy": sympy.__version__,
            "networkx": networkx.__version__, "python": platform.python_version()}


@dataclass
class Verification:
    """The outcome of :func:`verify`.

    Attributes
    ----------
    verdict : "layerwise-equivariant", "not-equivariant", "no-layerwise-parameter" or "undetermined"
    model, group : what was verified
    equivariance : the end-to-end decision (premise)
    derivation : the layerwise derivation (None when the premise failed)
    identifiability : {"status": ..., "detail": ...}
    actions : ``actions[i][g]`` = rho_{i+1}(g) on hidden layer i+1 (post-activation), or None
    """

    verdict: str
    model: Model
    group: FiniteGroup
    equivariance: EquivarianceResult
    derivation: Derivation | None
    identifiability: dict
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    original: Model | None = None
    reduction: object = None
    fibre: object = None
    #: the verify pipeline's trace: ``(step, reason)`` per step tried (reason None for the one that decided)
    steps: list = field(default_factory=list)

    @property
    def reparametrized(self) -> bool:
        """True when the actions hold at theta' != theta (same widths and function)."""
        return self.original is not None

    @property
    def exit_code(self) -> int:
        code = EXIT_CODES[self.verdict]
        # identifiability was asked for and a size limit stopped it: the premise is open, so the
        # run as a whole is undetermined (3) although the layerwise conclusion was established
        if code == 0 and self.identifiability.get("status") in ("undetermined", "locally-identifiable",
                                                                 "locally-weakly-identifiable"):
            return EXIT_CODES["undetermined"]
        return code

    @property
    def actions(self):
        return None if self.derivation is None else self.derivation.actions

    @property
    def end_to_end_method(self) -> str:
        if self.verdict == "layerwise-equivariant" and self.equivariance.probabilistic:
            return f"{self.equivariance.method}, then proven exactly by the layerwise checks"
        return self.equivariance.method

    # -- certificate ------------------------------------------------------------------------
    def certificate(self, dense: bool = False) -> dict:
        """The certificate (JSON-ready dict) that ``symeq check`` re-verifies.

        The actions are in sparse form (``symeq-certificate/2``, see docs/certificates.md):
        a monomial action as ``{"kind": "monomial", "source", "factor"}``, attention heads as
        ``{"kind": "block-monomial", ...}``. ``dense=True`` writes the older
        ``symeq-certificate/1`` with dense matrices (every entry; large at real widths).
        """
        eq = self.equivariance.to_json()
        if self.verdict == "layerwise-equivariant":
            eq["holds"] = True
            eq["method"] = self.end_to_end_method
            eq["probabilistic"] = False
        d = self.derivation
        return {
            "format": DENSE_CERTIFICATE_FORMAT if dense else CERTIFICATE_FORMAT,
            "verdict": self.verdict,
            "theorem": "Shahverdi-Marchetti-Bokman-Kohn 2026, Theorem 4.1 (conclusion at theta)",
            "model_name": self.model.name,
            "equivariance": eq,
            "identifiability": self.identifiability,
            "input_dim": self.model.input_dim,
            "group": self.group.to_json(),
            "parameters": self._parameters_json(),
            "latent_groups": latent_group_names(self.model),
            "latent_actions": None if self.actions is None else [
                [format_matrix(m) if dense else action_to_json(layer, m) for m in per_g]
                for layer, per_g in zip(self.model.chain().layers, self.actions)],
            # affine latent actions y -> rho y + c (sigmoid sign flips): the constant parts, or null
            "latent_offsets": None if d is None or d.offsets is None else [
                [[str(x) for x in c] for c in layer] for layer in d.offsets],
            "checks": {
                "layers": [] if d is None else [c.to_json() for c in d.layer_checks],
                "homomorphism": None if d is None else d.homomorphism,
                "group_order": None if d is None else d.group_order,
                "candidates_per_generator": {} if d is None else d.candidates,
                "derivation_method": None if d is None else d.method,
                "failure": None if d is None else d.failure,
            },
            "notes": self.notes,
            "versions": _versions(),
        }

    def _parameters_json(self) -> dict:
        """theta in the certificate: its digest always (binding the certificate to the model file);
        a copy of the layers for a re-parametrized theta' and for models up to INLINE_PARAMETERS
        parameters -- a large theta is only digested, the checker reads it from the model file."""
        layers = layers_to_json(self.model)
        if self.reparametrized:  # theta' differs from the model file: the checker needs it whole
            return {"layers": layers, "reparametrized": True}
        out = {"layers_sha256": layers_digest(layers, self.model.input_dim), "reparametrized": False}
        if self.model.n_params <= INLINE_PARAMETERS:
            out["layers"] = layers
        return out

    def to_json(self) -> dict:
        """Everything as JSON (the CLI's ``--json`` output): the certificate plus timing."""
        out = self.certificate()
        out["seconds"] = round(self.seconds, 3)
        out["exit_code"] = self.exit_code
        return out

    # -- report -----------------------------------------------------------------------------
    def report(self, matrix: bool = False) -> str:
        """A readable report: premise, derived actions, each layer's check, verdict.

        Each action is shown as a signed permutation in cycle notation (symeq/notation.py,
        neurons from 1); ``matrix=True`` adds the dense matrices (and theta' in full).
        """
        m, G, eq = self.model, self.group, self.equivariance
        lines = [f"symeq verify: {m.name}"]
        chain = m.chain()
        knames = latent_group_names(m)
        lines.append(f"  widths {m.widths}; hidden layers "
                     + ", ".join(f"{l.hidden_label} [K = {k}]" for l, k in zip(chain.layers, knames)))
        lines.append(f"  group: {G.label}, generators {', '.join(G.names)}")
        lines.append("")
        lines.append("Premise: end-to-end equivariance f(rho_in(g) x) = rho_out(g) f(x)")
        lines.append(f"  {'UNDECIDED' if eq.holds is None else 'holds' if eq.holds else 'FAILS'} ({eq.method}): "
                     f"{eq.detail}")
        if eq.witness is not None and hasattr(eq.witness, "lines"):  # a ball witness (real activations)
            lines.extend(eq.witness.lines())
        elif eq.witness is not None:
            w = eq.witness
            lines.append(f"  witness for generator {w.generator}: x = [{', '.join(map(str, w.x))}]")
            lines.append(f"    f(g x) = [{', '.join(map(str, w.lhs))}]")
            lines.append(f"    g f(x) = [{', '.join(map(str, w.rhs))}]")
        d = self.derivation
        if self.reparametrized:
            r = self.reduction
            lines.append("")
            if r is not None:
                lines.append(f"Submodel: {len(r.removed)} inactive neuron(s) removed, {len(r.merged)} clone(s) merged; "
                             f"reduced widths {r.model.widths}")
            lines.append("  the actions below hold at theta' (same widths and function as theta):")
            if matrix or self.model.n_params <= SMALL_MODEL_PARAMS:
                for i, l in enumerate(self.model.layers, 1):
                    if not supports(l, "dense-rows"):  # attention, conv, pooling: not printed row by row
                        what = "heads" if supports(l, "token-mixing") else "parameters"
                        lines.append(f"  theta' layer {i}: {l.label} (its {what} are in the certificate)")
                        continue
                    lines.append(f"  theta' layer {i}: W = {[[str(x) for x in row] for row in mat_rows(l.weight)]}, "
                                 f"b = {[str(x) for x in l.bias]}")
            else:
                lines.append(f"  (theta' has {self.model.n_params} parameters: they are in the certificate; "
                             "--matrix prints them)")
        if d is not None:
            lines.append("")
            lines.append("Conclusion: actions rho_i(g) in K_i on every hidden layer")
            if d.found:
                lines.append("  (cycles of neurons, numbered from 1, in the direction the values move; -j: the value "
                             "arriving at j changes sign, c*j: it is multiplied by c)")
                for i, per_g in enumerate(d.actions):
                    for gname, M in zip(G.names, per_g):
                        lines.extend(describe_action(chain.layers[i], M, f"rho_{i + 1}({gname}) on hidden layer "
                                                      f"{i + 1} ({knames[i]})", matrix))
                        offset = None if d.offsets is None else d.offsets[i][G.names.index(gname)]
                        if offset is not None and any(x != 0 for x in offset):
                            lines.append("    + offset " + ", ".join(f"{j + 1}: {x}" for j, x in enumerate(offset)
                                                                     if x != 0) + " (neuron: constant; others 0)")
                lines.append("  checks (exact):")
                for c in d.layer_checks:
                    lines.append(f"    layer {c.layer}, {c.generator}: {'ok' if c.holds else 'FAILED'} - {c.detail}")
                lines.append(f"    homomorphism: ok - g -> rho_i(g) respects every relation of G (|G| = {d.group_order})")
            else:
                lines.append(f"  not found: {d.failure}")
        lines.append("")
        lines.append(f"Identifiability: {self.identifiability['status']} - {self.identifiability['detail']}")
        for n in self.notes:
            lines.append(f"Note: {n}")
        lines.append("")
        why = (f"; identifiability {self.identifiability.get('status')}"
               if self.exit_code != EXIT_CODES[self.verdict] else "")
        lines.append(f"Verdict: {self.verdict} (exit {self.exit_code}{why}; {self.seconds:.2f} s)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def _repr_latex_(self) -> str:
        import sympy

        parts = [rf"\text{{Verdict: {self.verdict}}}"]
        if self.actions:
            for i, per_g in enumerate(self.actions):
                for gname, M in zip(self.group.names, per_g):
                    parts_ = monomial_parts(M) if M.nrows() > 16 else None
                    if parts_ is not None:  # a large action: its cycles (symeq/notation.py), not the matrix
                        parts.append(rf"\rho_{{{i + 1}}}(\mathrm{{{gname}}}) = \texttt{{{format_cycles(*parts_)}}}")
                        continue
                    S = sympy.Matrix([[sympy.Rational(int(x.p), int(x.q)) for x in r] for r in mat_rows(M)])
                    parts.append(rf"\rho_{{{i + 1}}}(\mathrm{{{gname}}}) = {sympy.latex(S)}")
        return "$" + r" \quad ".join(parts) + "$"


DENSE_CERTIFICATE_FORMAT = "symeq-certificate/1"
#: a certificate carries a copy of theta up to this many parameters, beyond only its digest
INLINE_PARAMETERS = 20_000


def action_to_json(layer, M) -> dict:
    """The sparse JSON form of one latent action on the output of chain layer ``layer``.

    Monomial: ``{"kind": "monomial", "source": [s_j], "factor": [c_j]}`` with
    ``(M y)_j = c_j y_{s_j}`` (from 0). Attention heads: ``{"kind": "block-monomial", "tokens",
    "heads", "blocks"}`` for ``M = P (x) R``, ``P[t][tokens[t]] = 1`` and block row h of R holding
    ``blocks[h]`` in block column ``heads[h]``. Anything else: ``{"kind": "dense", "matrix"}``.

    >>> from symeq.numbers import matrix
    >>> action_to_json(None, matrix([[0, -1], [1, 0]]))
    {'kind': 'monomial', 'source': [1, 0], 'factor': ['-1', '1']}
    """
    if hasattr(M, "to_json"):  # an action class with its own sparse form (conv: symeq.layers.conv.ConvAction)
        return M.to_json()
    if layer is not None and supports(layer, "head-blocks"):
        from .layers.attention import block_monomial_parts, factor_kron

        fac = factor_kron(M, layer.tokens, layer.heads * layer.dv)
        parts = None if fac is None else block_monomial_parts(fac[1], layer.heads, layer.dv)
        if parts is not None:
            P = fac[0]
            return {"kind": "block-monomial",
                    "tokens": [next(s for s in range(layer.tokens) if P[t, s] != 0) for t in range(layer.tokens)],
                    "heads": [k for k, _ in parts], "blocks": [format_matrix(B) for _, B in parts]}
    else:
        parts = monomial_parts(M)
        if parts is not None:
            return {"kind": "monomial", "source": parts[0], "factor": [format_number(c) for c in parts[1]]}
    return {"kind": "dense", "matrix": format_matrix(M)}


def latent_group_names(model) -> list:
    """The name of K_i for every hidden space of ``model``'s chain, by the absorbed-constant rule.

    A model with biases has the whole latent group of each layer (the layer's
    ``latent_group_name``); a bias-free model has its offset-free part (docs/theory.md, "The
    absorbed-constant rule"; :meth:`symeq.activations.Activation.group_name` with ``bias=False``):
    no bias absorbs an offset or the shift s (1 - alpha) of a pre-activation.  The certificate's
    ``latent_groups`` and the reports use these names.

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import polynomial
    >>> layers = lambda b: [DenseLayer([[1, 2], [3, -1]], [b, 0], polynomial([0, 1, 1])),
    ...                     DenseLayer([[2, -1]], [0], None)]
    >>> latent_group_names(Model(2, layers(1)))
    ['monomial matrices acting affinely (y -> q y + e (1 - q), e = sigma(s))']
    >>> latent_group_names(Model(2, layers(0)))
    ['permutations']
    """
    bias = absorbs_offsets(model)
    names = []
    for layer in model.chain().layers[:-1]:
        # attention heads have no activation (and no offsets); a float activation names one group
        offset_free = getattr(getattr(layer, "activation", None), "group_name", None)
        names.append(layer.latent_group_name if bias or offset_free is None else offset_free(False))
    return names


def _dense_lines(M) -> list[str]:
    return ["    [" + " ".join(f"{str(x):>3}" for x in row) + "]" for row in mat_rows(M)]


def describe_action(layer, M, title: str = "action", matrix: bool = False) -> list[str]:
    """Lines showing an action: its cycles (signed permutation), or for attention heads the
    token and head permutations and the d_v x d_v blocks of P (x) R; the matrix when asked."""
    sparse = action_to_json(layer, M)
    if sparse["kind"] == "block-monomial":
        ones = [1] * len(sparse["tokens"])
        out = [f"  {title}: P (x) R; tokens {format_cycles(sparse['tokens'], ones)}, heads "
               f"{format_cycles(sparse['heads'], [1] * len(sparse['heads']))} (cycles, numbered from 1)"]
        for h, (k, B) in enumerate(zip(sparse["heads"], sparse["blocks"])):
            block = "[" + ", ".join("[" + ", ".join(row) + "]" for row in B) + "]"
            out.append(f"    head {h + 1} <- head {k + 1}, block {block}")
    elif sparse["kind"] == "channel-pixel":  # conv layers (symeq.layers.conv.ConvAction)
        out = [f"  {title}: channels {format_cycles(list(M.source), list(M.factor))} "
               f"(x) pixels: {M.describe()} of the {sparse['height']}x{sparse['width']} grid"]
        return out
    elif sparse["kind"] == "monomial":  # long actions wrap at 100 characters, summarised past 6 lines
        out = wrap_cycles(f"  {title}: ", format_cycles(*monomial_parts(M)))
    else:
        return [f"  {title}: not monomial"] + _dense_lines(M)
    return out + (_dense_lines(M) if matrix else [])


SMALL_MODEL_PARAMS = 200  # theta' is printed in full up to this many parameters (else with --matrix)


def _try_submodel(model: Model, group: FiniteGroup, deadline: Deadline, max_candidates: int):
    """Reduce inactive neurons and clones; if the reduced model has actions, lift them back."""
    from .layerwise import check_layerwise
    from .submodels import lift, reduce_model

    if model.token_mixing:
        return _try_head_submodel(model, group, deadline, max_candidates)
    red = reduce_model(model)
    if not red.changed:
        return None
    d = derive_latent_actions(red.model, group, max_candidates=max_candidates, deadline=deadline)
    if not d.found or d.offsets is not None:
        return None  # lifting affine (sigmoid) actions is not implemented
    theta2, actions = lift(model, red, d.actions)
    checks, hom, order, msg = check_layerwise(theta2, group, actions, deadline)
    if not (all(c.holds for c in checks) and hom):
        raise AssertionError(f"lifted actions fail their checks: {msg}")
    d2 = Derivation(True, actions, checks, True, order, d.candidates, d.exhaustive, None,
                    d.method + ", on the reduced submodel, lifted back")
    return theta2, d2, red


FIBRE_SEARCH_MAX_PARAMS = 40
FIBRE_SEARCH_DEFAULT_SECONDS = 60.0


def _try_polynomial_fibre(model, group, deadline, enabled, eq, d, notes):
    """Fibre-wide search (symeq.fibre.search) for small polynomial MLPs with no action at theta."""
    if not enabled or model.has_relu or model.token_mixing or not model.is_polynomial or not eq.exact:
        return None
    if model.sparse_actions:  # the fibre is written for dense layers (docs/conv.md)
        notes.append("fibre-wide search and submodel reduction (dead or cloned channels) skipped: they are written "
                     "for dense layers, not for convolutions (docs/conv.md)")
        return None
    if model.n_params > FIBRE_SEARCH_MAX_PARAMS:
        notes.append(f"fibre-wide search skipped: {model.n_params} parameters (more than {FIBRE_SEARCH_MAX_PARAMS}); "
                     "run symeq.fibre.search.search_fibre directly with a time budget")
        return None
    from .fibre.search import MAX_GROUP_ORDER, search_fibre

    if group.order() > MAX_GROUP_ORDER:
        return None
    budget = FIBRE_SEARCH_DEFAULT_SECONDS
    if deadline.seconds is not None:
        budget = max(0.0, deadline.seconds - deadline.elapsed())
    deadline.check("starting the fibre-wide search")
    fs = search_fibre(model, group, check_theta=False, timeout=budget)
    lines = list(fs.proof or [])
    if fs.verdict == "layerwise-parameter" and fs.parameter is not None:
        from .layerwise import check_layerwise

        theta2 = fs.parameter.with_group(group)
        offsets = fs.offsets  # affine actions (absorbed-constant rule)
        checks, hom, order, msg = check_layerwise(theta2, group, fs.actions, deadline, offsets)
        if not (all(c.holds for c in checks) and hom):
            raise AssertionError(f"fibre-wide search returned actions that fail their checks: {msg}")
        d2 = Derivation(True, fs.actions, checks, True, order, d.candidates, True, None,
                        "fibre-wide search (Groebner basis per candidate action), re-parametrized", offsets=offsets)
        ident = {"status": "not-identifiable",
                 "detail": "no latent action at theta (theta^g is in the fibre but not in the orbit), "
                           "but theta' in the same fibre is layerwise equivariant"}
        notes.append(f"re-parametrized by the fibre-wide search: theta' has the same function (polynomial maps "
                     f"equal exactly) and is layerwise equivariant under the candidate action {getattr(fs.candidate, 'label', '')}")
        v = Verification("layerwise-equivariant", theta2, group, eq, d2, ident, notes, deadline.elapsed())
        v.original = model
        v.fibre = fs
        return v
    if fs.verdict == "no-layerwise-parameter":
        ident = {"status": "not-identifiable",
                 "detail": "theta^g is in the fibre of theta but not in its orbit"}
        notes.append("fibre-wide search (exhaustive over candidate actions up to conjugacy): no parameter with the "
                     "same function is layerwise equivariant" + ("" if fs.exact else " (some emptiness proofs are modular)"))
        notes.extend(lines)
        v = Verification("no-layerwise-parameter", model, group, eq, d, ident, notes, deadline.elapsed())
        v.fibre = fs
        return v
    notes.append(f"fibre-wide search: {fs.verdict}" + (f" ({lines[-1]})" if lines else ""))
    return None


def _relu_probe(model, notes) -> None:
    from .relu.probe import functional_dimension

    if model.n_params > 2000:
        return
    p = functional_dimension(model)
    notes.append(f"numeric evidence (not a proof): Jacobian rank {p['rank']} at random inputs against "
                 f"#params - #hidden neurons = {p['bound']}"
                 + (" - a hidden symmetry beyond positive scalings and permutations (Grigsby-Lindsey-Rolnick)"
                    if p["hidden_symmetry"] else " - no hidden symmetry detected"))


def _reparametrized(model, group, eq, d, notes, deadline: Deadline, fd, method: str) -> Verification | None:
    """The verification on theta' = ``fd.parameter`` when its actions ``fd.actions`` check as layerwise, else None.

    Shared by the exact fibre-wide decisions for one hidden ReLU and one hidden leaky ReLU layer;
    ``method`` names the decision in the derivation.
    """
    from .layerwise import check_layerwise

    theta2 = fd.parameter
    actions = [list(fd.actions)] if fd.actions and not isinstance(fd.actions[0], list) else fd.actions
    checks, hom, order, _ = check_layerwise(theta2, group, actions, deadline)
    if not (all(c.holds for c in checks) and hom):
        return None
    d2 = Derivation(True, actions, checks, True, order, d.candidates if d is not None else {}, True, None, method)
    ident = {"status": "not-identifiable",
             "detail": "no positive monomial action at theta, but theta' in the same fibre has one"}
    notes.append("re-parametrized: theta' (same width, same function, decided with the canonical form of the "
                 "piecewise-linear function) is layerwise equivariant")
    v = Verification("layerwise-equivariant", theta2, group, eq, d2, ident, notes, deadline.elapsed())
    v.original = model
    v.fibre = fd
    return v


def _try_relu_fibre(model: Model, group: FiniteGroup, deadline: Deadline):
    """For one hidden ReLU layer: the exact fibre-wide decision (symeq.relu.fibre)."""
    if not model.has_relu or model.depth != 2 or model.sparse_actions:  # written for dense layers (docs/conv.md)
        return None
    from .relu.fibre import decide_fibre
    from .relu.lp import deadline_scope

    deadline.check("deciding the ReLU fibre")
    with deadline_scope(deadline):  # its exact LPs check the budget
        fd = decide_fibre(model, group, check_theta=False)

    def finish(eq, d, notes):
        proof = fd.proof.get("lines", [])
        if fd.verdict == "no-layerwise-parameter":
            ident = {"status": "not-identifiable",
                     "detail": "theta^g is in the fibre of theta but not in its orbit (no positive monomial action at theta)"}
            notes.append(f"fibre-wide (exact, one hidden ReLU layer): no parameter of width {fd.width} with the same "
                         f"function is layerwise equivariant; the smallest layerwise-equivariant width is "
                         f"{fd.smallest_equivariant_width}")
            notes.extend(proof)
            v = Verification("no-layerwise-parameter", model, group, eq, d, ident, notes, deadline.elapsed())
            v.fibre = fd
            return fd, v
        if fd.verdict == "layerwise-parameter" and fd.parameter is not None and fd.actions is not None:
            v = _reparametrized(model, group, eq, d, notes, deadline, fd,
                                "exact fibre-wide search (one hidden ReLU layer), re-parametrized")
            if v is not None:
                return fd, v
        return fd, None

    return finish


def _try_head_submodel(model, group, deadline, max_candidates):
    """Attention: merge clones of heads, derive on the reduced model, lift back."""
    from .attention import lift_heads, reduce_heads
    from .layerwise import check_layerwise

    red = reduce_heads(model)
    if not red.changed:
        return None
    d = derive_latent_actions(red.model, group, max_candidates=max_candidates, deadline=deadline)
    if not d.found or d.offsets is not None:
        return None
    lifted = lift_heads(model, red, d.actions)
    if lifted is None:
        return None
    theta2, actions = lifted
    checks, hom, order, msg = check_layerwise(theta2, group, actions, deadline)
    if not (all(c.holds for c in checks) and hom):
        raise AssertionError(f"lifted head actions fail their checks: {msg}")
    d2 = Derivation(True, actions, checks, True, order, d.candidates, d.exhaustive, None,
                    d.method + ", on the model with clones of heads merged, lifted back")
    merged = sum(len(g) - 1 for g in red.groups)
    red.removed, red.merged = [], [None] * merged  # the report's counters
    return theta2, d2, red


def verify(
    model: Model,
    group: FiniteGroup | None = None,
    *,
    method: str = "auto",
    timeout: float | None = None,
    seed: int | None = 0,
    max_candidates: int = 64,
    fibre_search: bool = True,
    identifiability: bool = False,
    max_tie_nodes: int = 100000,
    identifiability_field: str = "R",
) -> Verification:
    """Verify the conclusion of Theorem 4.1 for ``model`` at its parameter theta.

    Parameters
    ----------
    model : a :class:`~symeq.models.Model` (polynomial or ReLU activations)
    group : the group; defaults to ``model.group``
    method : how end-to-end equivariance is decided ("auto", "grid", "symbolic", "probabilistic")
    timeout : seconds before :class:`~symeq.errors.BudgetExceeded` (exit 3)
    seed : seed of the random points of the probabilistic method
    identifiability : also decide identifiability at theta by comparing the fibre with the orbit
        (Groebner basis; small polynomial models only, within the time budget)
    identifiability_field : "R" (default): among real parameters; "C": among complex ones
    fibre_search : when no action exists at theta (or at a reduced submodel), search the fibre
        for a layerwise-equivariant theta' (small polynomial models: one Groebner basis per
        candidate action; one hidden ReLU layer: the exact canonical-form decision)

    Returns
    -------
    Verification

    References
    ----------
    Shahverdi, Marchetti, Bokman, Kohn, arXiv 2601.21645 (2026), Theorem 4.1.
    """
    if isinstance(model, GraphModel):  # a graph model (docs/graphs.md): its own pipeline
        from .graph.verify import verify_graph
        return verify_graph(model, group, timeout=timeout, identifiability=identifiability,
                            max_tie_nodes=max_tie_nodes, seed=seed)
    v = _verify(model, group, method=method, timeout=timeout, seed=seed, max_candidates=max_candidates,
                fibre_search=fibre_search, max_tie_nodes=max_tie_nodes)
    if identifiability and v.verdict != "not-equivariant":
        try:
            decide_verification_identifiability(v, model, timeout, group if group is not None else model.group,
                                    field=identifiability_field)
        except (LimitExceeded, BudgetExceeded) as e:
            identifiability_stopped(v, e, timeout)
    return v


def identifiability_stopped(v: Verification, e: LimitExceeded | BudgetExceeded, timeout: float | None) -> None:
    """Record that a size guard (symeq/sizes.py) or the time budget stopped the identifiability decision.

    The layerwise result stays as it was; the premise becomes ``"undetermined"`` (exit 3 through
    :attr:`Verification.exit_code`), with the limit that stopped it and the option that raises it.
    A status already decided before (an exhaustive search proving non-identifiability) is kept.
    """
    if isinstance(e, LimitExceeded):
        limit = {"limit": e.limit, "value": e.value, "maximum": e.maximum, "option": e.option, "what": e.what}
        why = "a size limit refused the computation before it started"
    else:
        limit = {"limit": "time (s)", "value": None, "maximum": timeout if timeout is not None else 60.0,
                 "option": "--timeout", "what": None}
        why = "the time budget ran out"
    if v.identifiability.get("status") not in (None, "unknown"):
        v.notes.append(f"identifiability: the further decision stopped: {why} ({e})")
        return
    option = limit["option"]
    v.identifiability = {
        "status": "undetermined",
        "detail": f"not decided: {why} ({e})"
                  + (f"; raise it with {option}" if option and option not in str(e) else ""),
        "method": None,
        "limit": limit,
    }


def _acts_by_signed_permutations(group) -> bool:
    """Whether every generator acts on input and output by a signed permutation matrix."""
    if group is None:
        return False
    for pair in group.generators:
        for m in pair:
            for i in range(m.nrows()):
                nz = [m[i, j] for j in range(m.ncols()) if m[i, j] != 0]
                if len(nz) != 1 or nz[0] not in (1, -1):
                    return False
    return True


def _identifiability_info(r) -> dict:
    """The fields of ``Verification.identifiability`` that a decision report gives, whatever its status."""
    res = r.result or {}
    info = {"method": r.method, "condition": res.get("condition"), "tried": r.tried, "hints": r.hints,
            "fibre_dimension": res.get("dimension"), "fibre_degree": res.get("degree"),
            "fibre_points": res.get("fibre_points"), "orbit_size": res.get("orbit_size"),
            "field": res.get("field"), "engine": res.get("engine")}
    c = r.decision
    if r.method == "groebner":
        info.update(fibre_dimension=c.dimension, fibre_degree=c.degree, orbit_size=c.orbit_size, field=c.field,
                    engine=c.engine, condition="Gröbner basis of the fibre ideal" if c.criterion == "groebner"
                    else f"{c.criterion}: no Gröbner basis needed")
    if r.method == "jacobian-rank":
        info.update(rank=res.get("rank"), parameters=res.get("parameters"),
                    orbit_dimension=res.get("orbit_dimension"),
                    dimension_lower_bound=res.get("dimension_lower_bound"))
    if r.limit is not None:
        info["groebner_limit"] = {"limit": r.limit.limit, "value": r.limit.value, "maximum": r.limit.maximum,
                                  "option": r.limit.option, "what": r.limit.what}
    return info


def decide_verification_identifiability(v: Verification, model: Model, timeout: float | None, group=None,
                            field: str = "R") -> None:
    """Replace an 'unknown' identifiability status by a decision at theta: the one report of
    :func:`symeq.fibre.decide.decide_identifiability` (classical theorems, tensor, Jacobian factors,
    Jacobian rank, Gröbner; docs/identifiability.md), which ``symeq fibre`` and ``symeq explain`` share.

    Inactive neurons and clones make theta non-identifiable outright (an inactive neuron's free
    weights, or the split of the outgoing weights between clones, move along a curve in the fibre);
    weak identifiability is then decided on the reduced parameter.  A locally identifiable theta
    (exact Jacobian rank) leaves the global premise open: the run exits 3 like an undetermined one.
    """
    from .fibre.decide import decide_identifiability
    from .submodels import reduce_model

    budget = timeout if timeout is not None else 60.0
    red = None
    if not model.token_mixing and model.is_polynomial and not model.has_relu:
        red = reduce_model(model.with_group(None))
    target = red.model if red is not None and red.changed else model
    try:
        r = decide_identifiability(target, timeout=budget, certificate=False, field=field)
    except InputError as e:
        if isinstance(e, LimitExceeded):
            raise
        v.notes.append(f"identifiability: {e}")
        return
    tried = "; ".join(f"{t['method']}: {t['status']}" for t in r.tried)
    res = r.result or {}
    info = _identifiability_info(r)
    for note in r.notes:
        v.notes.append(f"identifiability: {note}")
    previous = v.identifiability.get("status")
    if red is not None and red.changed:
        status = ("weakly-identifiable" if r.status == "identifiable" else
                  "locally-weakly-identifiable" if r.status == "locally-identifiable" else "not-identifiable")
        v.identifiability = dict(info, status=status, reduced_widths=red.model.widths, reduced_status=r.status,
                                 detail=(f"theta has {len(red.removed)} inactive neuron(s) and {len(red.merged)} "
                                         "clone(s): its fibre contains a curve through theta, so it is not "
                                         f"identifiable; the reduced parameter (widths {red.model.widths}) is "
                                         f"{r.status}" + (f" by {r.method}" if r.method else "") + f": {r.reason} "
                                         f"(methods tried: {tried})"))
        return
    if r.method == "fefferman" and r.status == "identifiable" and not _acts_by_signed_permutations(
            group if group is not None else model.group):
        # Fefferman's theorem compares theta only with networks that satisfy F1-F4 too; theta^g does
        # when G acts on input and output by signed permutations (they keep every |weight| ratio and
        # |bias|), so only then does it give the premise of Theorem 4.1 (docs/identifiability.md)
        v.notes.append("identifiability: Fefferman's theorem identifies theta among the networks satisfying "
                       "F1-F4; the group does not act by signed permutations, so theta^g need not satisfy them")
        v.identifiability = dict(info, status="undetermined",
                                 detail=f"not decided: {r.reason}; but G does not act on input and output by "
                                        "signed permutations, so Fefferman's restricted uniqueness does not give "
                                        f"the premise (methods tried: {tried})")
        return
    if r.status not in ("identifiable", "not-identifiable", "locally-identifiable"):
        # asked for and not reached (budget, engine, size guards): the premise is open, so the run is
        # undetermined (exit 3) although the layerwise conclusion stands
        v.notes.append(f"identifiability: undecided ({r.reason})")
        stopped = ""
        if r.limit is not None:  # a size guard refused a step (the report is kept: issue 25)
            info["limit"] = {"limit": r.limit.limit, "value": r.limit.value, "maximum": r.limit.maximum,
                             "option": r.limit.option, "what": r.limit.what}
            stopped = f"a size limit refused the computation before it started ({r.limit}); "
        elif r.budget is not None:  # the time budget ran out in a step
            info["limit"] = {"limit": "time (s)", "value": None, "maximum": budget, "option": "--timeout",
                             "what": None}
            stopped = f"the time budget ran out ({r.budget}); raise it with --timeout; "
        v.identifiability = dict(info, status="undetermined",
                                 detail=f"not decided: {stopped}{r.reason} (methods tried: {tried})"
                                 + (f"; {'; '.join(r.hints)}" if r.hints else ""))
        return
    if previous == "not-identifiable" and r.status == "locally-identifiable":
        # a global proof (theta^g in the fibre, outside the orbit) stands: the local result is about theta's neighbourhood
        v.notes.append(f"identifiability: near theta the fibre is the orbit ({r.reason})")
        return
    if r.status == "locally-identifiable":
        detail = (f"locally identifiable: {r.reason}; the theorem's premise (global identifiability) is open "
                  f"(methods tried: {tried})")
    else:
        # the field the decision is about: R by default (a fibre point counts only when real), C with
        # identifiability_field="C"; Sussmann and Fefferman are about R
        over = res.get("over") or r.over
        detail = f"{r.reason} (over {over}; decided by {r.method}; methods tried: {tried})"
    v.identifiability = dict(info, status=r.status, detail=detail)
    if previous == "not-identifiable" and r.status == "identifiable":  # pragma: no cover
        raise AssertionError("the identifiability decision contradicts the exhaustive search at theta")


@dataclass
class _Run:
    """The state the steps of :func:`_verify` share: the input, the budget, the notes, and what the
    earlier steps found (``pre``: the layers-first derivation, ``eq``: the premise, ``d``: the
    derivation at theta)."""

    model: Model
    group: FiniteGroup
    deadline: Deadline
    method: str
    seed: object
    max_candidates: int
    fibre_search: bool
    max_tie_nodes: int
    notes: list = field(default_factory=list)
    pre: Derivation | None = None
    eq: EquivarianceResult | None = None
    d: Derivation | None = None
    stopped: str = ""  # why the ball witness search stopped early (its budget), for the undetermined report
    real_steps: list = field(default_factory=list)  # the trace of REAL_STEPS

    def result(self, verdict, model, eq, d, ident, **extra) -> Verification:
        v = Verification(verdict, model, self.group, eq, d, ident, self.notes, self.deadline.elapsed())
        for k, val in extra.items():
            setattr(v, k, val)
        return v


_FOUND_AT_THETA = ("k(g) with theta^g = k(g) theta found at theta, {uniq}; the fibre was not computed, "
                   "so identifiability itself is not decided (the conclusion holds regardless)")


def _step_layers_first(run: _Run):
    """Real activations and ReLU: an exact check of every layer proves the premise without enumerating
    regions or evaluating sigma (regions and balls only refute, later steps)."""
    if not (has_real(run.model) or run.model.has_relu):
        return Skip("the premise is polynomial: decided by the end-to-end methods")
    run.pre, proved = layers_first(run.model, run.group, run.deadline, max_candidates=run.max_candidates,
                                   max_nodes=run.max_tie_nodes)
    if proved is None:
        return Skip("no layer-by-layer proof at theta")
    uniq = "unique" if run.pre.unique else "not unique (tied neurons)"
    run.notes.append("layers first: every layer was proved equivariant exactly, which proves end-to-end "
                     "equivariance (a composition of equivariant layers is equivariant)")
    return run.result("layerwise-equivariant", run.model, proved, run.pre,
                      {"status": "unknown", "detail": _FOUND_AT_THETA.format(uniq=uniq)})


def _step_relu_conv_submodel(run: _Run):
    """ReLU at image size: the submodel's proven layers before any linear region."""
    if not (run.model.has_relu and run.model.sparse_actions):
        return Skip("not a ReLU network with convolutions")
    return _relu_conv_submodel_first(run.model, run.group, run.deadline, run.max_candidates, run.notes) \
        or Skip("no reduced submodel with actions")


def _step_real_refute(run: _Run):
    """Real activations without a layerwise proof: the steps :data:`REAL_STEPS` (the submodel, leaky ReLU's
    fibre, a ball witness that refutes, else undetermined; always decides)."""
    if not has_real(run.model):
        return Skip("no real activation")
    sub: list = []
    v = run_steps(REAL_STEPS, run, sub)
    run.real_steps = sub
    return v


def _step_premise(run: _Run):
    """The premise, end to end (decide_equivariance): decides when it fails (not-equivariant)."""
    run.eq = decide_equivariance(run.model, run.group, method=run.method, rng=run.seed, deadline=run.deadline)
    if run.eq.holds:
        return Skip("the premise holds")
    return run.result("not-equivariant", run.model, run.eq, None,
                      {"status": "unknown", "detail": "not examined: the premise (end-to-end equivariance) fails"})


def _step_actions_at_theta(run: _Run):
    """The conclusion at theta: the derivation of the layerwise actions (Theorem 4.1)."""
    run.d = run.pre if run.pre is not None else derive_latent_actions(
        run.model, run.group, max_candidates=run.max_candidates, deadline=run.deadline, max_nodes=run.max_tie_nodes)
    if not run.d.found:
        return Skip(f"no latent action at theta ({run.d.failure})")
    uniq = "unique" if run.d.unique else "not unique (tied neurons)"
    if run.eq.probabilistic:
        run.notes.append("end-to-end equivariance was first checked at random points; the exact layerwise checks "
                         "now prove it (a composition of equivariant layers is equivariant)")
    return run.result("layerwise-equivariant", run.model, run.eq, run.d,
                      {"status": "unknown", "detail": _FOUND_AT_THETA.format(uniq=uniq)})


def _step_submodel(run: _Run):
    """Weak identifiability: merge clones, remove inactive neurons, derive, lift back to theta'."""
    lifted = _try_submodel(run.model, run.group, run.deadline, run.max_candidates)
    if lifted is None:
        return Skip("no inactive neuron or clone, or the reduced model has no actions")
    theta2, d2, red = lifted
    ident = {"status": "unknown",
             "detail": f"theta is a lift of a smaller submodel ({len(red.removed)} inactive neuron(s) removed, "
                       f"{len(red.merged)} clone(s) merged); the reduced parameter has layerwise actions, and "
                       "theta' (same widths, same function) is layerwise equivariant; identifiability of the "
                       "reduced parameter was not decided"}
    run.notes.append("re-parametrized: the actions hold at theta' (same widths, same function as theta), obtained by "
                     "merging clones, removing inactive neurons, and lifting back with equal splits of the outgoing "
                     "weights and inactive neurons where the orbit sizes require it (weak identifiability, "
                     "Theorem 4.1)")
    return run.result("layerwise-equivariant", theta2, run.eq, d2, ident, original=run.model, reduction=red)


def _step_polynomial_fibre(run: _Run):
    """Small polynomial MLPs: the fibre-wide search (symeq.fibre.search)."""
    return _try_polynomial_fibre(run.model, run.group, run.deadline, run.fibre_search, run.eq, run.d, run.notes) \
        or Skip("not run, or the fibre-wide search did not decide")


def _step_relu_fibre(run: _Run):
    """One hidden ReLU layer: the exact fibre-wide decision (symeq.relu.fibre)."""
    if not run.fibre_search:
        return Skip("the fibre-wide search is off")
    relu_fibre = _try_relu_fibre(run.model, run.group, run.deadline)
    if run.model.has_relu and run.model.depth > 2:
        _relu_probe(run.model, run.notes)
        run.notes.append("the exact fibre-wide decision for ReLU covers one hidden layer; this network is deeper")
    if relu_fibre is None:
        return Skip("not one hidden dense ReLU layer")
    _, v = relu_fibre(run.eq, run.d, run.notes)
    return v if v is not None else Skip("the ReLU fibre decision did not decide")


def _step_undetermined(run: _Run):
    """No step decided: undetermined, with what the exhaustive search says about identifiability."""
    eq, d = run.eq, run.d
    if eq.exact and d.exhaustive and 0 in d.candidates.values():
        ident = {"status": "not-identifiable",
                 "detail": "theta^g has the same function as theta (f is equivariant, proven exactly) but is not "
                           "k . theta for any k in prod K_i (exhaustive search): the fibre is larger than the orbit"}
    else:
        ident = {"status": "unknown", "detail": "no latent action found at theta; identifiability not decided"}
    run.notes.append("the conclusion fails at theta itself, and the fibre-wide search did not decide whether a "
                     "re-parametrization theta' in the same fibre is layerwise equivariant")
    return run.result("undetermined", run.model, eq, d, ident)


#: the steps of :func:`verify`, in order (docs/architecture.md, "Pipelines"); the last one always decides
VERIFY_STEPS = (_step_layers_first, _step_relu_conv_submodel, _step_real_refute, _step_premise,
                _step_actions_at_theta, _step_submodel, _step_polynomial_fibre, _step_relu_fibre,
                _step_undetermined)


#: the names the tests and earlier callers used
_decide_identifiability = decide_verification_identifiability


def _verify(model, group, *, method, timeout, seed, max_candidates, fibre_search, max_tie_nodes=100000) -> Verification:
    group = group if group is not None else model.group
    if group is None:
        raise InputError("no group: give the model a \"group\" or pass one (--group mirror:2x3, ...)")
    model.check_group(group)
    deadline = Deadline(timeout)
    group.validate()
    run = _Run(model, group, deadline, method, seed, max_candidates, fibre_search, max_tie_nodes)
    if method != "auto" and (has_real(model) or model.has_relu):  # the methods decide polynomial premises
        run.notes.append(f"method {method!r} was not used: it decides polynomial premises; "
                         + ("real activations are proved layers first and refuted by arb balls" if has_real(model)
                            else "ReLU models are proved layers first and decided by exact linear regions"))
    trace: list = []
    v = run_steps(VERIFY_STEPS, run, trace)
    v.steps = trace + [(f"real_refute.{name}", reason) for name, reason in run.real_steps]
    return v


def _relu_conv_submodel_first(model, group, deadline, max_candidates, notes):
    """A ReLU conv model without actions at theta: reduce dead and cloned channels, prove the lifted
    theta' layer by layer (same function as theta, so this proves the premise too), before the
    region enumeration (which at image size only refutes, within the budget).  None if it fails."""
    lifted = _try_submodel(model, group, deadline, max_candidates)
    if lifted is None:
        return None
    theta2, d2, red = lifted
    eq = EquivarianceResult(True, "layerwise", detail=(
        "theta' (dead and cloned channels of theta reduced and lifted back: the same function) has every layer "
        "equivariant (exact layer checks) and g -> rho_i(g) is a homomorphism: a proof, without linear regions"))
    ident = {"status": "unknown",
             "detail": f"theta is a lift of a smaller submodel ({len(red.removed)} inactive channel(s) removed, "
                       f"{len(red.merged)} clone(s) merged); identifiability of the reduced parameter was not decided"}
    notes.append("re-parametrized: the actions hold at theta' (same widths, same function as theta), obtained by "
                 "merging cloned channels, removing inactive ones and lifting back (weak identifiability, Theorem 4.1)")
    v = Verification("layerwise-equivariant", theta2, group, eq, d2, ident, notes, deadline.elapsed())
    v.original = model
    v.reduction = red
    return v


def _try_real_submodel(model, group, deadline, max_candidates):
    """The submodel route for real activations (clones, inactive neurons), or None; a constant
    neuron sigma(b) with b irrational-valued cannot be folded exactly, and then the route is skipped."""
    from .errors import NotExactError

    try:
        return _try_submodel(model, group, deadline, max_candidates)
    except NotExactError:
        return None


def _one_hidden_leaky(model: Model) -> bool:
    """One dense hidden layer of leaky ReLU (slope != 0) and an affine output layer."""
    return (model.depth == 2 and all_support(model.layers, "tie-walk")
            and model.layers[0].activation is not None
            and model.layers[0].activation.to_spec().get("type") == "leaky_relu")


def _try_leaky_fibre(model: Model, group: FiniteGroup, deadline: Deadline, d, notes) -> Verification | None:
    """One hidden leaky ReLU layer without an action at theta: the exact piecewise-linear machinery.

    The premise by the canonical forms of f(rho_in x) and rho_out f(x) (symeq.relu.leaky), then the
    fibre-wide decision by reduction to the ReLU twin: theta' of the same width that is layerwise
    equivariant, or none at this width (the conclusion fails: theta is not identifiable).  None
    when the premise fails (the ball witness then refutes) or the decision is open.
    """
    if not _one_hidden_leaky(model):
        return None
    from .relu.leaky import decide_fibre_leaky, equivariant_leaky
    from .relu.lp import deadline_scope

    deadline.check("deciding the leaky ReLU premise (canonical forms)")
    with deadline_scope(deadline):
        holds, _ = equivariant_leaky(model, group)
    if not holds:
        return None
    eq = EquivarianceResult(True, "leaky-canonical-form",
                            detail="f(rho_in(g) x) and rho_out(g) f(x) have the same canonical form (kinks, jumps and "
                                   "affine part of the piecewise-linear function) for every generator: a proof")
    deadline.check("deciding the leaky ReLU fibre")
    with deadline_scope(deadline):  # its exact LPs check the budget
        fd = decide_fibre_leaky(model, group, check_theta=False)
    if fd.verdict == "no-layerwise-parameter":
        ident = {"status": "not-identifiable",
                 "detail": "theta^g is in the fibre of theta but not in its orbit (no positive monomial action at theta)"}
        notes.append(f"fibre-wide (exact, one hidden leaky ReLU layer, by reduction to its ReLU twin): no parameter "
                     f"of width {fd.width} with the same function is layerwise equivariant; the smallest "
                     f"layerwise-equivariant width is {fd.smallest_equivariant_width}")
        notes.extend(fd.proof.get("lines", []))
        v = Verification("no-layerwise-parameter", model, group, eq, d, ident, notes, deadline.elapsed())
        v.fibre = fd
        return v
    if fd.verdict == "layerwise-parameter" and fd.parameter is not None and fd.actions is not None:
        v = _reparametrized(model, group, eq, d, notes, deadline, fd,
                            "exact fibre-wide decision (one hidden leaky ReLU layer), re-parametrized")
        if v is not None:
            return v
    notes.append(f"f is equivariant (leaky canonical forms: a proof), but the fibre-wide decision is "
                 f"{fd.verdict}")
    ident = {"status": "unknown", "detail": "no latent action found at theta; identifiability not decided"}
    return Verification("undetermined", model, group, eq, d, ident, notes, deadline.elapsed())


def _step_real_submodel(run: _Run):
    """Real activations: clones and inactive neurons reduced and lifted back (theta' layerwise equivariant)."""
    lifted = _try_real_submodel(run.model, run.group, run.deadline, run.max_candidates)
    if lifted is None:
        return Skip("no inactive neuron or clone, the reduced model has no actions, or a constant neuron is not exact")
    theta2, d2, red = lifted
    eq = EquivarianceResult(True, "layerwise, at theta'",
                            detail="theta' (the same widths; the same function as theta by construction: clones "
                                   "merged, inactive neurons removed, lifted back) is layerwise equivariant, so "
                                   "f = f_theta' is equivariant: a proof")
    ident = {"status": "unknown",
             "detail": f"theta is a lift of a smaller submodel ({len(red.removed)} inactive neuron(s) removed, "
                       f"{len(red.merged)} clone(s) merged); theta' is layerwise equivariant; identifiability "
                       "of the reduced parameter was not decided"}
    run.notes.append("re-parametrized: the actions hold at theta' (same widths and function as theta; the checker "
                     "re-proves the same function by a canonical form: dead neurons dropped, clones merged by the "
                     "identity table)")
    return run.result("layerwise-equivariant", theta2, eq, d2, ident, original=run.model, reduction=red)


def _step_leaky_fibre(run: _Run):
    """One hidden leaky ReLU layer: the exact piecewise-linear premise and fibre (:func:`_try_leaky_fibre`)."""
    if not run.fibre_search:
        return Skip("the fibre-wide search is off")
    return _try_leaky_fibre(run.model, run.group, run.deadline, run.pre, run.notes) \
        or Skip("not one hidden leaky ReLU layer, or its premise fails")


def _step_ball_witness(run: _Run):
    """An input where f(rho_in x) and rho_out f(x) differ, proven with arb balls: not-equivariant."""
    try:
        eq = refute_with_balls(run.model, run.group, deadline=run.deadline, rng=run.seed)
    except BudgetExceeded as e:
        run.stopped = f"; the time budget ran out while looking for a refuting input ({e})"
        return Skip(f"the time budget ran out ({e})")
    if eq is None:
        return Skip("no input refuted equivariance with arb balls")
    ident = {"status": "unknown", "detail": "not examined: the premise (end-to-end equivariance) fails"}
    return run.result("not-equivariant", run.model, eq, None, ident)


def _step_real_undetermined(run: _Run):
    """Real activations, nothing decided: undetermined, with why (no fibre-wide search for smooth activations)."""
    from .equivariance import BALL_PRECISIONS

    d = run.pre
    why = d.failure if d is not None else "no derivation"
    eq = EquivarianceResult(None, "undetermined",
                            detail="not decided: no layerwise action exists at theta, and no input refuted "
                                   f"equivariance with arb balls (precisions up to {BALL_PRECISIONS[-1]} bits)"
                                   f"{run.stopped}")
    ident = {"status": "unknown", "detail": "not decided (real activations: the premise itself is open)"}
    run.notes.append(f"undetermined: the derivation found no action at theta ({why}); f may still be equivariant "
                     "(a non-identifiable theta), and symeq has no fibre-wide search for real activations")
    return run.result("undetermined", run.model, eq, d, ident)


#: real activations without a layerwise proof at theta (the step ``real_refute`` of :data:`VERIFY_STEPS`);
#: the last one always decides
REAL_STEPS = (_step_real_submodel, _step_leaky_fibre, _step_ball_witness, _step_real_undetermined)
