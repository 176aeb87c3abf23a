"""The catalogue of a hunt: finds grouped by depth and status, the smallest proven find per
architecture, and a picture of one find (its first-layer hyperplanes and the group's action).

What is proven and what is evidence stays apart: ``counterexample`` (proven: no layerwise
equivariant parameter of the same widths), ``no-action-at-theta`` / ``no-action-at-reduced``
(proven: no action through prod K_i at theta / at the reduced submodel -- *candidates*, not
counterexamples), and the functional dimension: an exact lower bound (:mod:`symeq.relu.fdim`;
"locally identifiable" when it meets ``#params - dim T``), or, in files of older hunters, a float
estimate labelled as evidence (Grigsby-Lindsey-Rolnick 2023).  See :mod:`symeq.relu.deep`.

The picture is an SVG written by hand (no dependency), or, for other suffixes (``.png``,
``.pdf``), drawn with matplotlib when it is installed (else the SVG is written instead, with a
message).

Examples
--------
>>> _clip_line([1, 0], 0, 3)           # the line x = 0 inside [-3, 3]^2
((0.0, -3.0), (0.0, 3.0))
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from flint import fmpq

from ..errors import InputError
from .canonical import hyperplane_key
from .candidates import FIND_STATUSES, read_records, resolve_group

__all__ = ["report", "find_layers", "hyperplane_action", "write_picture"]

PROVEN = {"counterexample": "proven: no layerwise-equivariant parameter of these widths",
          "no-action-at-reduced": "candidate: proven no action at theta nor at its reduced submodel",
          "no-action-at-theta": "candidate: proven no action at theta",
          "layerwise-at-theta": "proven: layerwise equivariant at theta",
          "layerwise-at-reduced": "proven: layerwise equivariant after reduction and lifting",
          "layerwise-in-fibre": "proven: a layerwise-equivariant parameter of this width exists",
          "not-equivariant": "proven: not equivariant (exact witness)",
          "undetermined": "a search or a limit ran out",
          "skipped": "did not build at these widths"}


def _num(index):
    """A candidate's number in text: from 1 (the JSONL's ``index`` counts from 0)."""
    return index + 1 if isinstance(index, int) else index


def find_layers(rec: dict) -> list:
    """Plain layers (exact) of a record's network: the minimised one for one hidden layer."""
    from .deep import layers_from_json

    if "model" not in rec:
        raise InputError(f"candidate {_num(rec.get('index'))} has no network in the file")
    m = rec.get("minimised", {}).get("model") or rec["model"]
    if isinstance(m, list):
        return layers_from_json(m)
    return layers_from_json([{"W": m["W1"], "b": m["b1"], "relu": True}, {"W": m["W2"], "b": m["b2"], "relu": False}])


def _size(layers) -> tuple:
    """Smallest first: fewer hidden neurons with nonzero rows, then smaller numbers."""
    neurons = sum(sum(1 for r in W if any(r)) for W, _, relu in layers if relu)
    height = sum(abs(x.p) + x.q for W, b, _ in layers for r in W for x in r) + sum(
        abs(x.p) + x.q for _, b, _ in layers for x in b)
    return neurons, height


def hyperplane_action(layers, spec: str) -> dict:
    """The first-layer hyperplanes ``w.x + b = 0`` (distinct, normalised) and, per generator ``g``,
    where ``g`` sends each: ``x -> rho_in(g) x`` maps the hyperplane of ``(w, b)`` onto that of
    ``(w rho_in(g)^-1, b)``; ``None`` when the image is not a hyperplane of the network."""
    W, b, _ = layers[0]
    keys = []
    for w, bj in zip(W, b):
        if any(w):
            k, beta, _ = hyperplane_key(w, bj)
            k2, beta2, _ = hyperplane_key([-x for x in w], -bj)
            key = min((tuple(k), beta), (tuple(k2), beta2))
            if key not in keys:
                keys.append(key)
    G = resolve_group(spec)
    n = len(W[0])
    images = {}
    for name, (A, _) in zip(G.names, G.generators):
        Ai = A.inv()
        img = []
        for w, beta in keys:
            w2 = [sum((w[r] * Ai[r, c] for r in range(n)), fmpq(0)) for c in range(n)]
            k, bb, _ = hyperplane_key(w2, beta)
            k2, bb2, _ = hyperplane_key([-x for x in w2], -beta)
            key = min((tuple(k), bb), (tuple(k2), bb2))
            img.append(keys.index(key) if key in keys else None)
        images[name] = img
    return {"hyperplanes": [([str(x) for x in w], str(beta)) for w, beta in keys], "images": images,
            "keys": keys}


def _clip_line(w, b, r: float):
    """Endpoints of ``w.x + b = 0`` inside the square ``[-r, r]^2`` (floats, for drawing only)."""
    a, c, d = float(w[0]), float(w[1]), float(b)
    pts = []
    for x in (-r, r):
        if c != 0:
            y = -(a * x + d) / c
            if -r - 1e-12 <= y <= r + 1e-12:
                pts.append((x, y))
    for y in (-r, r):
        if a != 0:
            x = -(c * y + d) / a
            if -r - 1e-12 <= x <= r + 1e-12:
                pts.append((x, y))
    pts = sorted(set((round(x, 9) + 0.0, round(y, 9) + 0.0) for x, y in pts))
    return (pts[0], pts[-1]) if len(pts) >= 2 else None


_COLOURS = ["#c0392b", "#2471a3", "#1e8449", "#7d3c98"]


def _svg(action: dict, title: str, r: float = 3.0) -> str:
    size, pad = 420, 30
    s = (size - 2 * pad) / (2 * r)

    def px(x, y):
        return pad + (x + r) * s, size - pad - (y + r) * s

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size + 20 * (len(action["images"]) + 2)}">',
           f'<rect x="{pad}" y="{pad}" width="{size - 2 * pad}" height="{size - 2 * pad}" fill="none" stroke="#999"/>',
           f'<text x="{pad}" y="18" font-size="13" font-family="sans-serif">{title}</text>']
    keys = action["keys"]
    for gi, (name, img) in enumerate(action["images"].items()):
        col = _COLOURS[(gi + 1) % len(_COLOURS)]
        for j, (w, beta) in enumerate(keys):
            if img[j] is None:  # the image hyperplane is not one of the network's: draw it dashed
                Ai = resolve_group(action["spec"]).generators[gi][0].inv()
                w2 = [sum((w[q] * Ai[q, c] for q in range(2)), fmpq(0)) for c in range(2)]
                seg = _clip_line(w2, beta, r)
                if seg:
                    (x0, y0), (x1, y1) = px(*seg[0]), px(*seg[1])
                    out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{col}" '
                               f'stroke-dasharray="6,4" stroke-width="1.5"/>')
    for j, (w, beta) in enumerate(keys):
        seg = _clip_line(w, beta, r)
        if seg:
            (x0, y0), (x1, y1) = px(*seg[0]), px(*seg[1])
            out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{_COLOURS[0]}" '
                       f'stroke-width="2.5"/>')
            out.append(f'<text x="{x1 + 3:.1f}" y="{y1 - 3:.1f}" font-size="12" font-family="sans-serif">H{j + 1}</text>')
    y = size + 5
    for gi, (name, img) in enumerate(action["images"].items()):
        y += 18
        desc = ", ".join(f"H{j + 1}->" + (f"H{t + 1}" if t is not None else "new") for j, t in enumerate(img))
        out.append(f'<text x="{pad}" y="{y}" font-size="12" font-family="sans-serif" '
                   f'fill="{_COLOURS[(gi + 1) % len(_COLOURS)]}">{name}: {desc} (dashed: images that are not '
                   f'hyperplanes of the network)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_picture(rec: dict, spec: str, path) -> str:
    """Write the picture of one find; returns a one-line message saying what was written."""
    layers = find_layers(rec)
    if len(layers[0][0][0]) != 2:
        return f"no picture: candidate {_num(rec['index'])} has input dimension {len(layers[0][0][0])} (pictures need 2)"
    action = hyperplane_action(layers, spec)
    action["spec"] = spec
    title = f"candidate {_num(rec['index'])} ({rec.get('status')}): first-layer hyperplanes and {spec}"
    path = Path(path)
    if path.suffix.lower() != ".svg":
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            path = path.with_suffix(".svg")
            path.write_text(_svg(action, title))
            return f"matplotlib is missing (pip install 'symeq[plot]'): wrote {path} instead"
        fig, ax = plt.subplots(figsize=(5, 5))
        G = resolve_group(spec)
        for gi, (name, img) in enumerate(action["images"].items()):
            Ai = G.generators[gi][0].inv()
            for j, (w, beta) in enumerate(action["keys"]):
                if img[j] is None:
                    w2 = [sum((w[q] * Ai[q, c] for q in range(2)), fmpq(0)) for c in range(2)]
                    seg = _clip_line(w2, beta, 3.0)
                    if seg:
                        ax.plot(*zip(*seg), "--", color=_COLOURS[(gi + 1) % len(_COLOURS)], label=f"{name}(H) not in f")
        for j, (w, beta) in enumerate(action["keys"]):
            seg = _clip_line(w, beta, 3.0)
            if seg:
                ax.plot(*zip(*seg), color=_COLOURS[0], lw=2.5)
                ax.annotate(f"H{j + 1}", seg[1])
        ax.set_xlim(-3, 3)
        ax.set_ylim(-3, 3)
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=8)
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        if uniq:
            ax.legend(uniq.values(), uniq.keys(), fontsize=7)
        fig.savefig(path)
        plt.close(fig)
    else:
        path.write_text(_svg(action, title))
    moved = "; ".join(f"{g}: " + ", ".join(f"H{j + 1}->" + (f"H{t + 1}" if t is not None else "new")
                                             for j, t in enumerate(img)) for g, img in action["images"].items())
    return f"picture of candidate {_num(rec['index'])}: {path} ({len(action['keys'])} hyperplanes; {moved})"


def _one_layer_lines(recs) -> list:
    """The one-hidden-layer details (minimised finds, smallest equivariant width, realisation)."""
    lines = []
    finds = [r for r in recs if r.get("status") == "counterexample"]
    if not finds:
        return ["    no counterexample"]
    kinds = Counter(r.get("kind") for r in finds)
    lines.append(f"    counterexamples: {len(finds)} (by generator: "
                 f"{', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})")
    distinct: dict = {}
    for r in finds:
        mm = r.get("minimised", {}).get("model") or r["model"]
        distinct.setdefault(json.dumps(mm, sort_keys=True), r)
    lines.append(f"    distinct minimised networks: {len(distinct)}")
    ws = Counter((r.get("certificate", {}).get("fibre", {}).get("smallest_equivariant_width")) for r in finds)
    lines.append("    smallest equivariant width: " + ", ".join(f"{k}: {v}" for k, v in sorted(ws.items(), key=str)))
    return lines


def _fdim_lines(recs) -> list:
    """The functional dimension of the finds: exact (a proven lower bound, rank mod p; the value
    itself when every region was sampled) and, for files of older hunters, the float estimate,
    labelled as evidence."""
    lines = []
    ex = [r["functional_dimension"] for r in recs if "rank" in r.get("functional_dimension", {})]
    if ex:
        li = sum(1 for e in ex if e.get("locally_identifiable"))
        short = [e for e in ex if e["rank"] < e["bound"]]
        exact_short = sum(1 for e in short if e.get("exact"))
        lines.append(f"    functional dimension (exact lower bound: Jacobian rank mod p at rational points off every "
                     f"bent hyperplane): {len(ex)} finds")
        lines.append(f"      locally identifiable (rank = #params - dim T, proven): {li}")
        if short:
            full = sum(1 for e in short if e.get("shortfall", {}).get("fully_explained"))
            lines.append(f"      short of #params - dim T: {len(short)} ({exact_short} with the exact functional "
                         f"dimension from every linear region: proven hidden symmetries or degenerate neurons; "
                         f"{full} fully explained by exact kernel directions: inactive neurons, linear groups, "
                         f"clones, cancelled pairs)")
        other = len(ex) - li - len(short)
        if other:
            lines.append(f"      rank = bound after removing neurons with zero weights and bias (no local claim): {other}")
    und = sum(1 for r in recs if "undetermined" in r.get("functional_dimension", {}))
    if und:
        lines.append(f"      functional dimension not computed (size or region limit, or not differentiable): {und}")
    ev = [r["evidence"]["functional_dimension"] for r in recs
          if "rank" in r.get("evidence", {}).get("functional_dimension", {})]
    if ev:
        lines.append(f"    evidence (older hunt file, float rank): {sum(e['hidden_symmetry_evidence'] for e in ev)} of "
                     f"{len(ev)} finds have functional dimension < #params - dim K (numeric evidence of hidden "
                     f"symmetries, not a proof)")
    return lines


def _best(finds):
    return min(finds, key=lambda r: (_size(find_layers(r)), r["index"]))


def report(paths, picture=None) -> str:
    """The catalogue of one or more hunt files (text); writes a picture of the smallest proven
    find when ``picture`` is a path (the message about it ends the text)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    groups: dict = {}
    for p in paths:
        if not Path(p).exists():
            raise InputError(f"{p}: no such hunt file")
        header, recs = read_records(p)
        if header is None:
            raise InputError(f"{p}: not a hunt file (no header line)")
        act = header.get("activation")
        act = f"leaky_relu {act.get('slope')}" if isinstance(act, dict) and act.get("type") == "leaky_relu" else "relu"
        key = (tuple(header["arch"]), header["group"], act)
        g = groups.setdefault(key, {})
        for r in recs:
            g.setdefault((header["seed"], r["index"]), r)
    lines = []
    pic_candidate = None
    for depth in sorted({len(a) - 2 for a, _, _ in groups}):
        lines.append(f"depth {depth} ({depth} hidden layer{'s' if depth > 1 else ''})")
        for (arch, spec, act), g in sorted(groups.items()):
            if len(arch) - 2 != depth:
                continue
            recs = list(g.values())
            st = Counter(r.get("status") for r in recs)
            lines.append(f"  architecture {','.join(map(str, arch))}, group {spec}"
                         + ("" if act == "relu" else f", activation {act}") + f": {len(recs)} candidates")
            for s, v in sorted(st.items(), key=lambda kv: (list(PROVEN).index(kv[0]) if kv[0] in PROVEN else 99)):
                lines.append(f"    {s:<22} {v:>6}  ({PROVEN.get(s, '')})")
            lines += _fdim_lines(recs)
            if depth == 1:
                lines += _one_layer_lines(recs)
            proven = [r for r in recs if r.get("status") == "counterexample" and "model" in r]
            if not proven:
                cands = [r for r in recs if r.get("status") in FIND_STATUSES and "model" in r]
                if cands:
                    b = _best(cands)
                    lines.append(f"    no proven find; smallest candidate: {_num(b['index'])} ({b['kind']}, {b['status']})")
                continue
            best = _best(proven)
            lay = find_layers(best)
            lines.append(f"    smallest proven find: candidate {_num(best['index'])} ({best['kind']}), "
                         f"{_size(lay)[0]} active hidden neurons")
            fd = best.get("functional_dimension", {})
            if "summary" in fd:
                lines.append(f"      functional dimension: {fd['summary']}")
            for i, (W, b, relu) in enumerate(lay):
                lines.append(f"      layer {i + 1}{f' ({act})' if relu else ''}: W = {[[str(x) for x in r] for r in W]}, "
                             f"b = {[str(x) for x in b]}")
            if depth == 1:
                cert = best.get("certificate", {})
                fib = cert.get("fibre", {})
                lines.append(f"      proof: {cert.get('verdict')}; smallest layerwise-equivariant width "
                             f"{fib.get('smallest_equivariant_width')} > {fib.get('width')}")
            else:
                fb = best.get("first_layer_bound", {})
                lines.append(f"      proof: first-layer orbit bound (k = {fb.get('k')}, h1 = {fb.get('h1')}): the "
                             f"recession function has rank >= {fb.get('min_rank')} > {fb.get('rank_bound')} on all "
                             f"{fb.get('regions')} regions")
            if pic_candidate is None or (depth > 1 and len(arch) == 4):
                if arch[0] == 2:
                    pic_candidate = (best, spec)
    if picture is not None:
        if pic_candidate is None:
            lines.append("no picture: no proven find with input dimension 2")
        else:
            lines.append(write_picture(pic_candidate[0], pic_candidate[1], picture))
    lines.append("(candidates are numbered from 1 here; the JSONL's \"index\" counts from 0)")
    return "\n".join(lines)
