"""Pictures of a network and of the latent actions Theorem 4.1 derives on it.

The network is drawn as a layered graph, one column per space (input, every hidden space of the
chain, output).  Neurons are coloured by their orbit under the derived action: the orbits of the
permutation part of rho_i over all generators of G.  Each generator gets a colour, and for each
column where its action is monomial (a permutation with signs or scales) a curved arrow runs from
neuron s to neuron j whenever (rho_i(g) y)_j = c * y_s; the arrow is dashed when c < 0, and c is
written beside it when c is not +-1 (monomial activations; gauge).  For attention the heads
column has one node per (token, head): the action there is P (x) R with R block monomial, and an
arrow (s, k) -> (t, h) says that head k of token s is carried to head h of token t by an
invertible d_v x d_v block.

The orbit and move computations need no plotting library; the pictures need matplotlib (the
``plot`` extra).  Pictures are drawn on a :class:`matplotlib.figure.Figure` with the Agg canvas,
never through pyplot, so that importing symeq does not switch a notebook's backend.

Examples
--------
>>> from symeq.numbers import matrix
>>> neuron_moves(None, matrix([[0, -1], [1, 0]]))      # (source, target, factor)
[(1, 0, -1), (0, 1, 1)]
>>> orbits_of(3, [[(0, 1, 1), (1, 0, 1), (2, 2, -1)]])
[[0, 1], [2]]
"""

from __future__ import annotations

import io
from pathlib import Path

from .errors import EngineMissing
from .layers.registry import any_supports, supports
from .numbers import mat_rows, monomial_parts

__all__ = [
    "neuron_moves",
    "orbits_of",
    "network_columns",
    "network_figure",
    "verification_figure",
    "model_figure",
    "model_png",
    "verification_png",
    "verification_svg",
]

MATPLOTLIB_MISSING = "matplotlib is needed for pictures: pip install 'symeq[plot]'"
GENERATOR_COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
NEUTRAL = "#eeeeee"


# -- the combinatorics: no plotting library needed -------------------------------------------

def neuron_moves(layer, M):
    """How an action moves the neurons of one column: a list of (source, target, factor).

    ``layer`` is the chain layer whose output the column is (None for the input or output, or a
    dense layer): then M must be monomial, and (M y)_j = factor * y_source.  For a heads layer the
    nodes are (token, head) pairs numbered t * H + h and the factor is the d_v x d_v block.
    Returns None when the action is not of that form (e.g. a rotation acting on the input).
    """
    if layer is not None and supports(layer, "head-blocks"):  # (token, head) nodes: the kind's own moves
        return layer.neuron_moves(M)
    # a conv layer's action (symeq.layers.conv.ConvAction) is monomial on the whole space, in sparse form
    parts = M.monomial() if hasattr(M, "monomial") else monomial_parts(M)
    if parts is None:
        return None
    cols, vals = parts
    return [(cols[j], j, vals[j]) for j in range(len(cols))]


def orbits_of(n: int, moves_per_generator) -> list[list[int]]:
    """Orbits of {0..n-1} under the permutations given as moves (one list per generator).

    The orbits of a group are those of its generators' permutations joined transitively, so a
    union-find over every (source, target) pair gives them without enumerating the group.
    """
    from .unionfind import union_find

    find = union_find(range(n), ((s, t) for moves in moves_per_generator for s, t, _ in moves or []))
    groups: dict = {}
    for a in range(n):
        groups.setdefault(find(a), []).append(a)
    return sorted(groups.values())


def network_columns(model, actions=None):
    """The columns of the picture: a list of dicts with the column's label, node count, node
    labels, and per generator the moves (None where the action is unknown or not monomial).

    Node labels number neurons from 1 (``"1"``, ``"2"``, ...; heads ``"token.head"`` from ``1.1``),
    as all text output does; ``moves`` and ``orbits`` hold 0-based indices into ``nodes``.

    ``actions[i][g]`` is rho_{i+1}(g) on hidden column i+1, as in
    :attr:`symeq.theorem.Verification.actions`; without it hidden columns carry no moves.
    """
    from .theorem import latent_group_names

    chain = model.chain()
    knames = latent_group_names(model)  # bias-free models: the offset-free groups (docs/theory.md)
    G = model.group
    ngen = len(G.generators) if G is not None else 0
    cols = []

    def col(label, n, node_labels, layer, mats):
        moves = [None if M is None else neuron_moves(layer, M) for M in mats]
        cols.append({"label": label, "n": n, "nodes": node_labels, "moves": moves,
                     "orbits": orbits_of(n, moves) if any(m is not None for m in moves) else None})

    n0 = chain.layers[0].in_dim
    col(f"input $\\mathbb{{R}}^{{{n0}}}$", n0, [str(j + 1) for j in range(n0)], None,
        [a for a, _ in G.generators] if G is not None else [])
    for i, layer in enumerate(chain.layers[:-1]):
        mats = [actions[i][g] for g in range(ngen)] if actions else [None] * ngen
        if supports(layer, "head-blocks"):
            T, H = layer.tokens, layer.heads
            label = f"hidden {i + 1}: heads\n{T} tokens x {H} heads, $d_v$ = {layer.dv}"
            col(label, T * H, [f"{t + 1}.{h + 1}" for t in range(T) for h in range(H)], layer, mats)
        else:
            label = f"hidden {i + 1}: {layer.hidden_label}\nK: {knames[i]}"
            col(label, layer.out_dim, [str(j + 1) for j in range(layer.out_dim)], layer, mats)
    nL = chain.layers[-1].out_dim
    col(f"output $\\mathbb{{R}}^{{{nL}}}$", nL, [str(j + 1) for j in range(nL)], None,
        [b for _, b in G.generators] if G is not None else [])
    return cols


# -- drawing ----------------------------------------------------------------------------------

def _matplotlib():
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise EngineMissing(MATPLOTLIB_MISSING) from None
    return matplotlib, Figure, FigureCanvasAgg


def _factor_text(c) -> str | None:
    """The label of a move: nothing for +-1 (the dash shows the sign), the scale otherwise."""
    if hasattr(c, "nrows"):  # a d_v x d_v block (attention heads)
        n = c.nrows()
        diag = c[0, 0]
        if all(c[a, b] == (diag if a == b else 0) for a in range(n) for b in range(n)):
            return None if diag in (1, -1) else _times(diag)
        return None  # a general invertible block: the caption says so
    return None if c in (1, -1) else _times(c)


def _times(c) -> str:
    return "\u00d7" + str(c).replace("-", "\u2212")


def _is_negative(c) -> bool:
    return not hasattr(c, "nrows") and c < 0


MAX_PICTURE_NODES = 300
"""The network picture is drawn up to this many neurons in a layer (a circle per neuron, a line per
nonzero weight: a 1152-wide conv network would need tens of GB in matplotlib)."""


def _weight_edges(chain, columns):
    """Pairs (column, node, node') joined by a nonzero weight, for the faint background edges."""
    edges = set()
    for i, layer in enumerate(chain.layers):
        if supports(layer, "head-blocks"):
            continue  # attention mixes tokens through X A X^T: no per-weight picture
        prev = chain.layers[i - 1] if i > 0 else None
        per_node = prev.dv if prev is not None and supports(prev, "head-blocks") else 1
        own = getattr(layer, "picture_edges", None)  # a kind without weights (pooling) names its own edges
        pairs = own() if own is not None else ((c, r) for r, row in enumerate(mat_rows(layer.weight))
                                               for c, w in enumerate(row) if w != 0)
        for c, r in pairs:
            edges.add((i, c // per_node, r))
    return sorted(edges)


def _draw(model, actions, title: str):
    matplotlib, Figure, FigureCanvasAgg = _matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Circle, FancyArrowPatch

    columns = network_columns(model, actions)
    chain = model.chain()
    G = model.group
    names = list(G.names) if G is not None else []
    dx, dy = 3.2, 1.0
    tallest = max(c["n"] for c in columns)
    # the figure follows the drawing's extent (equal aspect), plus room for title and legend
    xspan, yspan = (len(columns) - 1) * dx + 3.6, (tallest - 1) * dy + 3.1
    scale = min(0.6, 24.0 / yspan)
    fig = Figure(figsize=(max(6.5, xspan * scale), yspan * scale / 0.8), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_axes([0.01, 0.08, 0.98, 0.8])
    ax.set_axis_off()
    ax.set_aspect("equal")

    def pos(ci, j):
        n = columns[ci]["n"]
        return ci * dx, ((n - 1) / 2 - j) * dy

    # faint edges for the nonzero weights
    for ci, a, b in _weight_edges(chain, columns):
        (x0, y0), (x1, y1) = pos(ci, a), pos(ci + 1, b)
        ax.plot([x0, x1], [y0, y1], color="#bbbbbb", lw=0.5, alpha=0.5, zorder=1)

    palette = matplotlib.colormaps["tab20"].colors
    radius = 0.3
    for ci, col in enumerate(columns):
        colour = {}
        if col["orbits"] is not None:
            for k, orbit in enumerate(col["orbits"]):
                for j in orbit:
                    colour[j] = palette[(2 * k) % 20 if k < 10 else (2 * k + 1) % 20]
        small = col["n"] > 0 and max(len(s) for s in col["nodes"]) > 2
        for j in range(col["n"]):
            x, y = pos(ci, j)
            ax.add_patch(Circle((x, y), radius, facecolor=colour.get(j, NEUTRAL), edgecolor="#333333",
                                lw=0.8, zorder=3))
            ax.text(x, y, col["nodes"][j], ha="center", va="center", fontsize=6 if small else 8, zorder=4)
        ax.text(ci * dx, -((tallest - 1) / 2) * dy - 0.9, col["label"], ha="center", va="top", fontsize=8)
        # one arc per moved neuron and generator; generators bulge on alternating sides
        for gi, moves in enumerate(col["moves"]):
            if not moves:
                continue
            gcol = GENERATOR_COLOURS[gi % len(GENERATOR_COLOURS)]
            for s, t, c in moves:
                text = _factor_text(c)
                neg = _is_negative(c)
                xs, ys = pos(ci, s)
                xt, yt = pos(ci, t)
                if s == t:
                    if text is None and not neg:
                        continue
                    # a fixed neuron that is negated or scaled: a mark beside it
                    side = 1 if gi % 2 == 0 else -1
                    ax.text(xs + side * (radius + 0.12 + 0.35 * (gi // 2)), ys,
                            text or "\u22121", color=gcol, fontsize=7, ha="left" if side > 0 else "right",
                            va="center", zorder=5)
                    continue
                dist = abs(yt - ys)
                rad = min(0.6, 1.1 / dist) * (1 if gi % 2 == 0 else -1) * (1 + 0.3 * (gi // 2))
                arrow = FancyArrowPatch((xs, ys), (xt, yt), connectionstyle=f"arc3,rad={rad}",
                                        arrowstyle="-|>", mutation_scale=9, color=gcol, lw=1.1,
                                        linestyle=(0, (3, 2)) if neg else "solid",
                                        shrinkA=9, shrinkB=9, zorder=2, alpha=0.9)
                ax.add_patch(arrow)
                if text is not None:
                    # the midpoint of the quadratic arc lies half way to its control point
                    mx = (xs + xt) / 2 + 0.5 * rad * (yt - ys)
                    my = (ys + yt) / 2 - 0.5 * rad * (xt - xs)
                    ax.text(mx, my, text, color=gcol, fontsize=6, ha="center", va="center", zorder=5,
                            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    top = ((tallest - 1) / 2) * dy
    ax.set_xlim(-1.6, (len(columns) - 1) * dx + 1.6)
    ax.set_ylim(-top - 2.2, top + 0.9)
    handles = [Line2D([0], [0], color=GENERATOR_COLOURS[gi % len(GENERATOR_COLOURS)], lw=1.5,
                      label=f"generator {n}") for gi, n in enumerate(names)]
    if any(_is_negative(c) for col in columns for moves in col["moves"] if moves for _, _, c in moves):
        handles.append(Line2D([0], [0], color="#555555", lw=1.2, linestyle=(0, (3, 2)), label="negated (factor < 0)"))
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    caption = ("colour: orbit of each neuron under the derived action (per column); arrow s \u2192 j: "
               "(\u03c1(g) y)_j = c y_s" if actions else "no derived action: hidden neurons uncoloured")
    if actions and any_supports(chain.layers, "head-blocks"):
        caption += "\nheads column: node t.h = head h of token t; an arrow carries a head's value space by an invertible block"
    fig.text(0.5, 0.895, caption, ha="center", fontsize=7, color="#444444")
    return fig


def verification_figure(verification):
    """The picture of a :class:`~symeq.theorem.Verification` as a matplotlib Figure."""
    v = verification
    title = f"{v.model.name}\n{v.group.label}: {v.verdict}"
    if v.reparametrized:
        title += " (at theta', re-parametrized)"
    return _draw(v.model.with_group(v.group), v.actions, title)


def model_figure(model):
    """The picture of a model alone: its layers, and the group's orbits on input and output."""
    return _draw(model, None, model.name)


def _bytes(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    # No date in the SVG metadata: the same model gives the same file.
    fig.savefig(buf, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    return buf.getvalue()


def network_figure(verification, path_png, path_svg) -> tuple[Path, Path]:
    """Write the picture of ``verification`` as PNG and SVG; return the two paths.

    Raises :class:`~symeq.errors.EngineMissing` when matplotlib is not installed.
    """
    fig = verification_figure(verification)
    path_png, path_svg = Path(path_png), Path(path_svg)
    path_png.write_bytes(_bytes(fig, "png"))
    path_svg.write_bytes(_bytes(fig, "svg"))
    return path_png, path_svg


def model_png(model) -> bytes:
    """PNG bytes of the model's picture (for a notebook's ``_repr_png_``)."""
    return _bytes(model_figure(model), "png")


def verification_png(verification) -> bytes:
    """PNG bytes of the verification's picture (for a notebook's ``_repr_png_``)."""
    return _bytes(verification_figure(verification), "png")


def verification_svg(verification) -> str:
    """The picture as SVG text, without the XML prolog (ready to inline in HTML)."""
    text = _bytes(verification_figure(verification), "svg").decode("utf-8")
    start = text.find("<svg")
    return text[start:] if start >= 0 else text
