"""``symeq explain``: a step-by-step report of the whole pipeline of Theorem 4.1 on one model.

:func:`explain` runs :func:`symeq.verify` and writes, into one folder:

``report.md``
    Markdown with LaTeX math: the model, the group, the premise and how it was decided, the
    derived actions rho_i(g) as matrices (with their cycles and orbits), each layer's exact
    check, the homomorphism check, the identifiability status, the verdict and the certificate.
``report.html``
    the same report as one self-contained page: the math is MathML (rendered natively by the
    browser, nothing is downloaded when it is viewed) and the picture is inline SVG.
``network.png``, ``network.svg``
    the picture of :mod:`symeq.display` (only when matplotlib, the ``plot`` extra, is installed;
    without it the reports say so and everything else is written).
``certificate.json``, ``model.json``
    the certificate, and the model it is about, so that ``symeq check certificate.json
    model.json`` re-verifies it with the independent checker.

The report is built once as a list of blocks (headings, paragraphs, display formulas, tables)
whose formulas carry both notations, LaTeX for Markdown and presentation MathML for HTML, so the
two files cannot say different things.

Examples
--------
>>> import tempfile, symeq
>>> out = tempfile.mkdtemp()
>>> paths = explain(symeq.builtin_example(), out_dir=out)
>>> sorted(k for k in paths if k not in ("png", "svg"))
['certificate', 'html', 'markdown', 'model']
>>> "<math" in paths["html"].read_text()
True
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from .errors import EngineMissing, InputError
from .layers.registry import supports
from .numbers import mat_rows

__all__ = ["explain"]

MAX_MATRIX = 16  # larger group matrices and weights are not written out

THEOREM = ("Theorem 4.1 (Shahverdi, Marchetti, Bökman, Kohn, arXiv 2601.21645, 2026): if the end-to-end "
           "map f is equivariant under a group G acting on input and output, and θ is weakly identifiable, "
           "then G acts on every hidden space through homomorphisms ")

VERDICT_MEANING = {
    "layerwise-equivariant": "the conclusion of Theorem 4.1 holds: every layer is equivariant under the derived "
                             "actions, each of which lies in the layer's latent group",
    "not-equivariant": "the premise fails: f is not G-equivariant, and the witness above proves it",
    "no-layerwise-parameter": "f is equivariant, but no parameter with the same function and widths is layerwise "
                              "equivariant: θ is not identifiable, and the theorem's hypothesis is needed",
    "undetermined": "f is equivariant, but no latent action was found at θ; whether a re-parametrization θ' in "
                    "the fibre has one was not decided",
}


# -- formulas in two notations -----------------------------------------------------------------

@dataclass(frozen=True)
class Math:
    """One formula: ``latex`` for Markdown, ``mathml`` (presentation, without <math>) for HTML."""

    latex: str
    mathml: str

    def __add__(self, other: "Math") -> "Math":
        return Math(self.latex + " " + other.latex, self.mathml + other.mathml)


def _esc(s: str) -> str:
    return html.escape(str(s), quote=False)


def mi(s: str) -> Math:
    return Math(s, f"<mi>{_esc(s)}</mi>")


def mo(s: str, latex: str | None = None) -> Math:
    return Math(latex if latex is not None else s, f"<mo>{_esc(s)}</mo>")


def mtext(s: str) -> Math:
    return Math(rf"\mathrm{{{s}}}", f"<mtext>{_esc(s)}</mtext>")


def sub(base: Math, index: Math) -> Math:
    return Math(f"{{{base.latex}}}_{{{index.latex}}}", f"<msub><mrow>{base.mathml}</mrow><mrow>{index.mathml}</mrow></msub>")


def _cat(*parts: Math) -> Math:
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


RHO = Math(r"\rho", "<mi>ρ</mi>")
THETA = Math(r"\theta", "<mi>θ</mi>")


def rho(index) -> Math:
    idx = mtext(index) if isinstance(index, str) and not index.isdigit() else Math(str(index), f"<mn>{index}</mn>")
    return sub(RHO, idx)


def rho_of(index, gname: str) -> Math:
    return _cat(rho(index), mo("("), mtext(gname), mo(")"))


def _sympy_rational(x):
    import sympy

    return sympy.Rational(int(x.p), int(x.q))


def matrix_math(M) -> Math:
    """An exact matrix in both notations (through sympy, the symbolic backend)."""
    import sympy

    S = sympy.Matrix([[_sympy_rational(x) for x in row] for row in mat_rows(M)])
    return Math(sympy.latex(S), _bracketed(sympy.mathml(S, printer="presentation")))


def _bracketed(mathml: str) -> str:
    """Square brackets drawn by CSS instead of stretchy <mo>[</mo>: a browser stretches operators
    only with a math font (OpenType MATH table) installed, which a viewer may lack."""
    return mathml.replace("<mo>[</mo><mtable>", '<mtable class="matrix">').replace("</mtable><mo>]</mo>", "</mtable>")


def vector_math(v) -> Math:
    import sympy

    S = sympy.Matrix([[_sympy_rational(x) for x in v]])
    return Math(sympy.latex(S), _bracketed(sympy.mathml(S, printer="presentation")))


def activation_math(act) -> Math:
    import sympy

    t = sympy.Symbol("t")
    if act.kind == "relu":
        expr = sympy.Max(0, t)
    else:
        expr = sum((_sympy_rational(c) * t ** k for k, c in enumerate(act.coeffs)), sympy.Integer(0))
    lhs = Math(r"\sigma(t) =", "<mi>σ</mi><mo>(</mo><mi>t</mi><mo>)</mo><mo>=</mo>")
    return lhs + Math(sympy.latex(expr), sympy.mathml(expr, printer="presentation"))


def _premise() -> Math:
    return Math(r"f(\rho_{\mathrm{in}}(g)\,x) = \rho_{\mathrm{out}}(g)\,f(x) \quad \text{for all } g \in G",
                "<mi>f</mi><mo>(</mo><msub><mi>ρ</mi><mtext>in</mtext></msub><mo>(</mo><mi>g</mi><mo>)</mo>"
                "<mi>x</mi><mo>)</mo><mo>=</mo><msub><mi>ρ</mi><mtext>out</mtext></msub><mo>(</mo><mi>g</mi>"
                "<mo>)</mo><mi>f</mi><mo>(</mo><mi>x</mi><mo>)</mo><mspace width='1em'/><mtext>for all</mtext><mspace width='0.3em'/>"
                "<mi>g</mi><mo>∈</mo><mi>G</mi>")


def _layer_identity() -> Math:
    return Math(r"f_i(\rho_{i-1}(g)\,x) = \rho_i(g)\, f_i(x)",
                "<msub><mi>f</mi><mi>i</mi></msub><mo>(</mo><msub><mi>ρ</mi><mrow><mi>i</mi><mo>−</mo><mn>1</mn>"
                "</mrow></msub><mo>(</mo><mi>g</mi><mo>)</mo><mi>x</mi><mo>)</mo><mo>=</mo><msub><mi>ρ</mi><mi>i</mi>"
                "</msub><mo>(</mo><mi>g</mi><mo>)</mo><msub><mi>f</mi><mi>i</mi></msub><mo>(</mo><mi>x</mi><mo>)</mo>")


def _orbit_identity() -> Math:
    return Math(r"\theta^g = k(g)\cdot\theta,\quad k(g) = (\rho_1(g), \dots, \rho_{L-1}(g)) \in \prod_i K_i",
                "<msup><mi>θ</mi><mi>g</mi></msup><mo>=</mo><mi>k</mi><mo>(</mo><mi>g</mi><mo>)</mo><mo>·</mo>"
                "<mi>θ</mi><mo>,</mo><mspace width='1em'/><mi>k</mi><mo>(</mo><mi>g</mi><mo>)</mo><mo>=</mo>"
                "<mo>(</mo><msub><mi>ρ</mi><mn>1</mn></msub><mo>(</mo><mi>g</mi><mo>)</mo><mo>,</mo><mo>…</mo>"
                "<mo>,</mo><msub><mi>ρ</mi><mrow><mi>L</mi><mo>−</mo><mn>1</mn></mrow></msub><mo>(</mo><mi>g</mi>"
                "<mo>)</mo><mo>)</mo><mo>∈</mo><munder><mo>∏</mo><mi>i</mi></munder><msub><mi>K</mi><mi>i</mi></msub>")


def _conclusion() -> Math:
    return Math(r"\rho_i : G \to K_i",
                "<msub><mi>ρ</mi><mi>i</mi></msub><mo>:</mo><mi>G</mi><mo>→</mo><msub><mi>K</mi><mi>i</mi></msub>")


# -- the report as blocks ------------------------------------------------------------------------

class Report:
    """A document of blocks, rendered to Markdown (LaTeX) or HTML (MathML)."""

    def __init__(self):
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, *parts):
        self.blocks.append(("p", parts))

    def math(self, m: Math):
        self.blocks.append(("math", m))

    def items(self, rows):
        self.blocks.append(("list", rows))

    def table(self, header, rows):
        self.blocks.append(("table", header, rows))

    def code(self, text: str):
        self.blocks.append(("code", text))

    def figure(self, png: str | None, svg: str | None, missing: str | None):
        self.blocks.append(("figure", png, svg, missing))

    # Markdown ---------------------------------------------------------------------------------
    @staticmethod
    def _md_inline(parts, table: bool = False) -> str:
        out = []
        for x in parts:
            if isinstance(x, Math):
                out.append(f"${x.latex}$")
            else:
                s = str(x)
                out.append(s.replace("|", r"\|") if table else s)
        return "".join(out)

    def markdown(self) -> str:
        lines = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                lines += ["#" * b[1] + " " + b[2], ""]
            elif kind == "p":
                lines += [self._md_inline(b[1]), ""]
            elif kind == "math":
                lines += ["$$", b[1].latex, "$$", ""]
            elif kind == "list":
                lines += ["- " + self._md_inline(r) for r in b[1]] + [""]
            elif kind == "table":
                lines.append("| " + " | ".join(b[1]) + " |")
                lines.append("|" + "---|" * len(b[1]))
                lines += ["| " + " | ".join(self._md_inline([c] if not isinstance(c, (list, tuple)) else c, True)
                                           for c in row) + " |" for row in b[2]]
                lines.append("")
            elif kind == "code":
                lines += ["```", b[1], "```", ""]
            elif kind == "figure":
                _, png, svg, missing = b
                if png:
                    lines += [f"![The network as a layered graph, neurons coloured by orbit]({png})", ""]
                    if svg:
                        lines += [f"(vector version: [{svg}]({svg}))", ""]
                else:
                    lines += [f"*No picture: {missing}*", ""]
        return "\n".join(lines).rstrip() + "\n"

    # HTML -------------------------------------------------------------------------------------
    @staticmethod
    def _html_inline(parts) -> str:
        out = []
        for x in parts:
            if isinstance(x, Math):
                out.append(f"<math>{x.mathml}</math>")
            else:
                out.append(_md_code_to_html(_esc(x)))
        return "".join(out)

    def html(self, title: str, svg_inline: str | None) -> str:
        body = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                body.append(f"<h{b[1]}>{_esc(b[2])}</h{b[1]}>")
            elif kind == "p":
                body.append(f"<p>{self._html_inline(b[1])}</p>")
            elif kind == "math":
                body.append(f'<div class="display"><math display="block">{b[1].mathml}</math></div>')
            elif kind == "list":
                body.append("<ul>" + "".join(f"<li>{self._html_inline(r)}</li>" for r in b[1]) + "</ul>")
            elif kind == "table":
                head = "".join(f"<th>{_esc(c)}</th>" for c in b[1])
                rows = "".join("<tr>" + "".join(
                    f"<td>{self._html_inline([c] if not isinstance(c, (list, tuple)) else c)}</td>" for c in row)
                    + "</tr>" for row in b[2])
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif kind == "code":
                body.append(f"<pre><code>{_esc(b[1])}</code></pre>")
            elif kind == "figure":
                _, png, svg, missing = b
                if svg_inline:
                    body.append(f'<figure class="network">{svg_inline}<figcaption>The network as a layered graph: '
                                f"neurons coloured by their orbit under the derived action, arrows for the "
                                f"permutation each generator induces (also saved as {_esc(png)} and "
                                f"{_esc(svg)}).</figcaption></figure>")
                else:
                    body.append(f'<p class="missing"><em>No picture: {_esc(missing)}</em></p>')
        return _HTML_PAGE.format(title=_esc(title), body="\n".join(body))


def _md_code_to_html(s: str) -> str:
    """The shared text's Markdown marks, **strong** and `code`, as HTML (s is already escaped)."""
    parts = s.split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{part}</code>")
        else:
            bold = part.split("**")
            out.append("".join(f"<strong>{b}</strong>" if j % 2 else b for j, b in enumerate(bold)))
    return "".join(out)


_HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 62rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; color: #1a1a1a; }}
h1 {{ font-size: 1.6rem; border-bottom: 2px solid #ddd; padding-bottom: .3rem; }}
h2 {{ font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #eee; }}
h3 {{ font-size: 1.05rem; }}
div.display {{ margin: .8rem 0; overflow-x: auto; overflow-y: hidden; padding: .2rem 0; }}
math {{ font-size: 1.1em; }}
mtable.matrix {{ padding: 0 .3em; border-left: 1.5px solid currentColor; border-right: 1.5px solid currentColor;
  background: linear-gradient(currentColor, currentColor) left top / .3em 1.5px no-repeat,
              linear-gradient(currentColor, currentColor) left bottom / .3em 1.5px no-repeat,
              linear-gradient(currentColor, currentColor) right top / .3em 1.5px no-repeat,
              linear-gradient(currentColor, currentColor) right bottom / .3em 1.5px no-repeat; }}
table {{ border-collapse: collapse; margin: .8rem 0; }}
th, td {{ border: 1px solid #ccc; padding: .25rem .6rem; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }}
code, pre {{ font-family: ui-monospace, "DejaVu Sans Mono", monospace; background: #f6f6f6; }}
pre {{ padding: .6rem; overflow-x: auto; }}
figure.network svg {{ max-width: 100%; height: auto; }}
figcaption {{ font-size: .9rem; color: #555; }}
.missing {{ color: #a33; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""


# -- the content -----------------------------------------------------------------------------------

def _cycles(moves) -> str:
    """Cycle notation (symeq/notation.py: neurons from 1, values move along the cycles, the
    factor written in front of the neuron it arrives at) of moves (source, target, factor)."""
    from .notation import format_cycles

    source, factor = [0] * len(moves), [1] * len(moves)
    for s_, t, c in moves:
        source[t], factor[t] = s_, c
    return format_cycles(source, factor)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "." if text else ""


def _show_action(rep: Report, layer, index, gname: str, M, matrix: bool = False):
    """One derived action: its cycles (or P (x) R by tokens, heads and blocks), and its matrix
    only when asked (``matrix``)."""
    from .display import neuron_moves

    lhs = rho_of(index, gname) + mo("=")
    if supports(layer, "head-blocks"):
        from .layers.attention import block_monomial_parts, factor_kron
        from .notation import format_cycles

        P, R = factor_kron(M, layer.tokens, layer.heads * layer.dv)
        tokens = [next(s_ for s_ in range(layer.tokens) if P[t, s_] != 0) for t in range(layer.tokens)]
        parts = block_monomial_parts(R, layer.heads, layer.dv)
        rep.p(rho_of(index, gname), " acts on every token's value spaces as ",
              Math(r"P \otimes R", "<mi>P</mi><mo>⊗</mo><mi>R</mi>"),
              ": a token permutation P and a block-monomial R (one invertible block per head). In cycles "
              f"(numbered from 1): tokens `{format_cycles(tokens, [1] * len(tokens))}`, heads "
              f"`{format_cycles([k for k, _ in parts], [1] * len(parts))}`.")
        if matrix:
            rep.math(Math("P =", "<mi>P</mi><mo>=</mo>") + matrix_math(P))
        rows = []
        for h, (k, B) in enumerate(parts):
            rows.append([f"head {h + 1}", f"head {k + 1}", [matrix_math(B)]])
        rep.table(["head of the image", "comes from", "block B (value space)"], rows)
        return
    if hasattr(M, "pixel"):  # a conv layer: channel action (x) pixel permutation (docs/conv.md)
        from .notation import format_cycles

        rep.p(rho_of(index, gname), f" acts as a channel action times a pixel permutation: channels "
              f"`{format_cycles(list(M.source), list(M.factor))}` (cycles, numbered from 1) ⊗ the {M.describe()} "
              f"of the {M.hw[0]}×{M.hw[1]} grid.")
        return
    moves = neuron_moves(layer, M)
    if moves is not None:
        rep.p(rho_of(index, gname), f": `{_cycles(moves)}` — a monomial matrix, (ρ(g) y)_j = c_j y_s; in cycles "
              "the values move from neuron to neuron (numbered from 1), and −j or c*j is the factor c_j of "
              "the neuron j they arrive at.")
    else:
        rep.p(rho_of(index, gname), " is not a monomial matrix.")
    if matrix or moves is None:
        rep.math(lhs + matrix_math(M))


def _orbit_lines(columns) -> list:
    rows = []
    for col in columns:
        if col["orbits"] is None:
            continue
        label = col["label"].split("\n")[0].replace("$\\mathbb{R}^{", "R^").replace("}$", "")
        text = ", ".join("{" + ", ".join(col["nodes"][j] for j in o) + "}" for o in col["orbits"])
        rows.append([f"{label}: {len(col['orbits'])} orbit(s) {text}"])
    return rows


def build_report(v, cert_name: str, model_name: str, picture: tuple, matrix: bool = False,
                 identifiability: dict | None = None) -> Report:
    """The blocks of the report on a :class:`~symeq.theorem.Verification` (``matrix``: also
    every action as a matrix; ``identifiability``: the decision shown in the identifiability
    section when it differs from ``v.identifiability``, see :func:`report_identifiability`)."""
    from .theorem import latent_group_names

    m = v.model
    chain = m.chain()
    knames = latent_group_names(m)  # bias-free models: the offset-free groups (docs/theory.md)
    rep = Report()
    rep.h(1, f"symeq explain: {m.name}")
    rep.p(f"**Verdict: {v.verdict}** (exit code {v.exit_code}; {v.seconds:.2f} s). ",
          _sentence(VERDICT_MEANING.get(v.verdict, "")))
    rep.p(THEOREM, _conclusion(), " such that every layer is equivariant. This report follows symeq's "
          "exact pipeline on this model: premise, derived actions, their checks, identifiability, verdict.")
    rep.figure(*picture)
    _model_section(rep, m, chain, knames)
    _group_section(rep, v.group)
    _premise_section(rep, v)
    step = 4
    if v.reparametrized:
        _reparametrized_section(rep, v, step)
        step += 1
    _actions_section(rep, v, chain, knames, matrix, step)
    _checks_sections(rep, v.derivation, step + 1)
    _closing_sections(rep, v, identifiability, cert_name, model_name, step + 3)
    return rep


def _model_section(rep: Report, m, chain, knames) -> None:
    """Section 1 of :func:`build_report`: the layers, their maps, widths, activations and latent groups."""
    rep.h(2, "1. The model")
    rep.p(f"Widths {m.widths}; {len(chain.layers) - 1} hidden space(s) in the chain the theorem is about"
          + (" (the attention layer splits into its heads' value spaces and its output projection)"
             if m.token_mixing else "") + ".")
    rows = []
    for i, layer in enumerate(chain.layers, 1):
        last = i == len(chain.layers)
        if supports(layer, "head-blocks"):
            rows.append([str(i), "Y_h = (X A_h Xᵀ) X V_h for each head h", str(layer.out_dim),
                         "lightning attention (no softmax)", layer.latent_group_name])
        elif last:
            rows.append([str(i), "x ↦ W x + b (affine)", str(layer.out_dim), "none", "(output: acted on by G)"])
        else:
            rows.append([str(i), "x ↦ σ(W x + b)", str(layer.out_dim), [activation_math(layer.activation)],
                         knames[i - 1]])
    rep.table(["layer", "map", "width", "activation", "latent group K_i"], rows)


def _group_section(rep: Report, G) -> None:
    """Section 2 of :func:`build_report`: G and its generators' input and output matrices."""
    rep.h(2, "2. The group")
    rep.p(f"G = {G.label}, of order {G.order()}, generated by {', '.join(G.names)}; it acts on the input by "
          "ρ_in and on the output by ρ_out:")
    for gname, (a, b) in zip(G.names, G.generators):
        if a.nrows() <= MAX_MATRIX and b.nrows() <= MAX_MATRIX:
            rep.math(_cat(rho_of("in", gname), mo("="), matrix_math(a), mo(","), Math(r"\quad", "<mspace width='1em'/>"),
                          rho_of("out", gname), mo("="), matrix_math(b)))
        else:
            rep.p(f"ρ_in({gname}) and ρ_out({gname}) are {a.nrows()}×{a.nrows()} and {b.nrows()}×{b.nrows()} "
                  "matrices (in the certificate).")


def _premise_section(rep: Report, v) -> None:
    """Section 3 of :func:`build_report`: the premise, its method and its witness when it fails."""
    eq = v.equivariance
    rep.h(2, "3. Premise: end-to-end equivariance")
    rep.math(_premise())
    state = "Undecided" if eq.holds is None else "Holds" if eq.holds else "Fails"
    rep.p(f"**{state}**, decided by the method `{v.end_to_end_method}`: {eq.detail}.")
    if eq.witness is not None and hasattr(eq.witness, "enclosures"):  # a ball witness (real activations)
        w = eq.witness
        lo, hi = w.enclosures[w.output]
        rep.p(f"Witness for generator {w.generator}: at the rational point x = ({', '.join(map(str, w.x))}), output "
              f"{w.output + 1} of f(ρ_in(g) x) − ρ_out(g) f(x) lies in [{float(lo):.6g}, {float(hi):.6g}] (arb balls "
              f"at {w.precision} bits; exact ends in the certificate), which excludes 0.")
    elif eq.witness is not None:
        w = eq.witness
        rep.p(f"Witness for generator {w.generator}: an exact rational point where the two sides differ:")
        rep.math(Math("x =", "<mi>x</mi><mo>=</mo>") + vector_math(w.x))
        rep.math(Math(r"f(\rho_{\mathrm{in}}(g)\,x) =", "<mi>f</mi><mo>(</mo><msub><mi>ρ</mi><mtext>in</mtext>"
                      "</msub><mo>(</mo><mi>g</mi><mo>)</mo><mi>x</mi><mo>)</mo><mo>=</mo>") + vector_math(w.lhs))
        rep.math(Math(r"\rho_{\mathrm{out}}(g)\,f(x) =", "<msub><mi>ρ</mi><mtext>out</mtext></msub><mo>(</mo>"
                      "<mi>g</mi><mo>)</mo><mi>f</mi><mo>(</mo><mi>x</mi><mo>)</mo><mo>=</mo>") + vector_math(w.rhs))


def _reparametrized_section(rep: Report, v, step: int) -> None:
    """The weak-identifiability section of :func:`build_report`: the submodel and theta' (small layers in full)."""
    rep.h(2, f"{step}. Weak identifiability: the re-parametrization θ'")
    r = v.reduction
    if r is not None:
        rep.p(f"θ is a lift of a smaller submodel: {len(r.removed)} inactive neuron(s) removed and "
              f"{len(r.merged)} clone(s) merged give widths {r.model.widths}. The actions below hold at θ', "
              "which has the same widths and the same function as θ (Theorem 4.1 under weak identifiability).")
    else:
        rep.p("The actions below hold at θ', a parameter with the same widths and the same function as θ.")
    for i, layer in enumerate(v.model.layers, 1):
        if supports(layer, "dense-rows") and layer.weight.nrows() <= MAX_MATRIX \
                and layer.weight.ncols() <= MAX_MATRIX:
            rep.math(Math(f"W'_{{{i}}} =", f"<msubsup><mi>W</mi><mn>{i}</mn><mo>′</mo></msubsup><mo>=</mo>")
                     + matrix_math(layer.weight) + Math(rf",\quad b'_{{{i}}} =",
                     f"<mo>,</mo><mspace width='1em'/><msubsup><mi>b</mi><mn>{i}</mn><mo>′</mo></msubsup><mo>=</mo>")
                     + vector_math(layer.bias))


def _actions_section(rep: Report, v, chain, knames, matrix: bool, step: int) -> None:
    """The derived actions of :func:`build_report`, per hidden space and generator, and the neurons' orbits."""
    from .display import network_columns

    m, G, d = v.model, v.group, v.derivation
    rep.h(2, f"{step}. Derived actions on the hidden spaces")
    if d is None:
        rep.p("Not derived: the premise fails, so the theorem claims nothing here.")
        return
    rep.p("For each generator g, G acts on the first- and last-layer parameters (the adjunction "
          "W₁ ↦ W₁ ρ_in(g)⁻¹, (W_L, b_L) ↦ ρ_out(g)(W_L, b_L)), giving θ^g with the same function. "
          "Identifiability then gives a unique k(g) in the product of the latent groups with")
    rep.math(_orbit_identity())
    cands = ", ".join(f"{g}: {c}" for g, c in d.candidates.items())
    rep.p(f"Found by matching neurons exactly (`{d.method}`); candidates k(g) per generator: {cands or 'none'}.")
    if not d.found:
        rep.p(f"**No action found at θ**: {d.failure}")
        return
    for i, per_g in enumerate(d.actions):
        layer = chain.layers[i]
        rep.h(3, f"Hidden space {i + 1}: {layer.hidden_label}, K = {knames[i]}")
        for gname, M in zip(G.names, per_g):
            _show_action(rep, layer, i + 1, gname, M, matrix)
    orbits = _orbit_lines(network_columns(m.with_group(G), d.actions))
    if orbits:
        rep.p("Orbits of the neurons under the derived action (the colours of the picture):")
        rep.items(orbits)


def _checks_sections(rep: Report, d, step: int) -> None:
    """Each layer's check and the homomorphism (sections ``step`` and ``step + 1`` of :func:`build_report`)."""
    rep.h(2, f"{step}. Each layer's check")
    if d is None or not d.layer_checks:
        rep.p("No layer was checked" + (" (no derived action)." if d is not None else " (the premise fails)."))
    else:
        rep.p("Every layer f_i is checked exactly against the derived actions (ρ_0 = ρ_in, ρ_L = ρ_out):")
        rep.math(_layer_identity())
        rep.table(["layer", "generator", "result", "how"],
                  [[str(c.layer), c.generator, "holds" if c.holds else "FAILS", c.detail] for c in d.layer_checks])

    rep.h(2, f"{step + 1}. Homomorphism")
    if d is None or d.homomorphism is None:
        rep.p("Not reached.")
    else:
        rep.p(f"**{'Holds' if d.homomorphism else 'Fails'}**: the tuples (ρ_in(g), ρ_1(g), …, ρ_out(g)) of the "
              f"generators generate a group of order {d.group_order} = |G| on which the projection to ρ_in is "
              "injective, so g ↦ ρ_i(g) respects every relation of G and each ", _conclusion(),
              " is a homomorphism.")


def _closing_sections(rep: Report, v, identifiability, cert_name: str, model_name: str, step: int) -> None:
    """Identifiability, the verdict and the certificate (sections ``step`` to ``step + 2`` of :func:`build_report`)."""
    rep.h(2, f"{step}. Identifiability")
    ident = identifiability if identifiability is not None else v.identifiability
    rep.p(f"Status **{ident['status']}**: {ident['detail']}.")
    if ident.get("tried"):
        rep.items([[f"{t['method']}: {t['status']}" + (f" — {t['reason']}" if t.get("reason") else "")]
                   for t in ident["tried"]])
    if v.notes:
        rep.items([[n] for n in v.notes])

    rep.h(2, f"{step + 1}. Verdict")
    rep.p(f"**{v.verdict}** (exit code {v.exit_code}): {VERDICT_MEANING.get(v.verdict, '')}.")

    rep.h(2, f"{step + 2}. Certificate")
    rep.p(f"The certificate is `{cert_name}` and the model it is about `{model_name}`; the independent "
          "checker (standard library only, `fractions.Fraction`) re-verifies it:")
    rep.code(f"symeq check {cert_name} {model_name}")


#: seconds the report spends deciding identifiability when the verification left it open
IDENTIFIABILITY_BUDGET = 10.0


def report_identifiability(v, model, timeout: float | None = None) -> dict:
    """The identifiability the report shows: ``v.identifiability`` when decided, else the decision of
    ``symeq verify --identifiability`` (the one report of symeq/fibre/decide.py that ``symeq fibre``
    prints too), within :data:`IDENTIFIABILITY_BUDGET` seconds.  ``v`` itself is not changed, so the
    verdict, the exit code and the certificate stay those of the verification."""
    import copy

    from .errors import BudgetExceeded, LimitExceeded
    from .theorem import decide_verification_identifiability, identifiability_stopped

    if v.identifiability.get("status") != "unknown" or v.verdict == "not-equivariant":
        return v.identifiability
    budget = IDENTIFIABILITY_BUDGET if timeout is None else min(timeout, IDENTIFIABILITY_BUDGET)
    w = copy.copy(v)
    w.identifiability, w.notes = dict(v.identifiability), []
    try:
        decide_verification_identifiability(w, model.with_group(None), budget)
    except (LimitExceeded, BudgetExceeded) as e:
        identifiability_stopped(w, e, budget)
    if w.identifiability.get("status") in (None, "unknown"):
        return v.identifiability
    return w.identifiability


# -- the entry point -------------------------------------------------------------------------

def explain(model, group=None, out_dir=".", *, verification=None, matrix: bool = False, **verify_options) -> dict:
    """Run :func:`symeq.verify` on ``model`` and write the step-by-step report into ``out_dir``.

    Parameters
    ----------
    model : a :class:`~symeq.models.Model`
    group : a :class:`~symeq.groups.FiniteGroup` or a built-in group spec such as ``"mirror:2x3"``;
        defaults to the model's group
    out_dir : the folder to write into (created if needed)
    verification : an existing :class:`~symeq.theorem.Verification` of ``model`` (skips verifying)
    matrix : also write every action as a matrix (by default its cycle notation only)
    verify_options : passed to :func:`symeq.verify` (``method``, ``timeout``, ``seed``)

    Returns
    -------
    dict
        The written paths: ``markdown``, ``html``, ``certificate``, ``model``, and ``png`` and
        ``svg`` when matplotlib is installed (without it the reports say that the picture is
        missing and how to get it).

    References
    ----------
    Shahverdi, Marchetti, Bokman, Kohn, arXiv 2601.21645 (2026), Theorem 4.1.
    """
    from .display import network_figure
    from .io import model_to_json, write_json
    from .theorem import verify

    if isinstance(group, str):
        from .groups import builtin_group

        group = builtin_group(group)
    if group is not None:
        model = model.with_group(group)
    v = verification if verification is not None else verify(model, **verify_options)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out}: cannot create the output folder ({e.__class__.__name__})") from None
    paths = {"certificate": out / "certificate.json", "model": out / "model.json"}
    write_json(v.certificate(), paths["certificate"])
    # the certificate is checked against the model as given (theta, not theta'), as `symeq check` does
    original = v.original if v.reparametrized else v.model
    write_json(model_to_json(original.with_group(v.group)), paths["model"])

    svg_inline, missing = None, None
    from .display import MAX_PICTURE_NODES

    widest = max(v.model.chain().widths)
    try:
        if widest > MAX_PICTURE_NODES:  # one circle per neuron and a line per weight: bounded memory first
            raise EngineMissing(f"the picture is drawn for at most {MAX_PICTURE_NODES} neurons per layer; this "
                                f"network has {widest} (the actions are in the text)")
        png, svg = network_figure(v, out / "network.png", out / "network.svg")
        paths["png"], paths["svg"] = png, svg
        text = svg.read_text(encoding="utf-8")
        svg_inline = text[text.find("<svg"):]
    except EngineMissing as e:
        missing = str(e)
    picture = ("network.png", "network.svg", missing) if svg_inline else (None, None, missing)
    rep = build_report(v, "certificate.json", "model.json", picture, matrix=matrix,
                       identifiability=report_identifiability(v, original, verify_options.get("timeout")))
    paths["markdown"] = out / "report.md"
    paths["markdown"].write_text(rep.markdown(), encoding="utf-8")
    paths["html"] = out / "report.html"
    paths["html"].write_text(rep.html(f"symeq explain: {v.model.name}", svg_inline), encoding="utf-8")
    return paths
