"""A real-sigmoid network whose latent actions are affine sign flips.

Claim: sigma(t) = 1 / (1 + exp(-t)) satisfies sigma(-t) = 1 - sigma(t), and (with sigma(t) itself)
nothing else of the form sigma(alpha t + beta) = q sigma(t) + c (docs/theory.md, "Real
activations").  Flipping a neuron (negating its incoming row and bias) turns its output y into
1 - y; the next layer absorbs the constant 1 in its bias.  A mirror-equivariant network scrambled
by such flips is therefore layerwise equivariant under *affine* actions y -> P y + c, and
symeq verify finds them: a signed permutation P with the offset c_j = 1 on each flipped
neuron, proved by the identity table and re-verified by `symeq check`.

Prints a Markdown transcript and writes model.json and certificate.json to --out.
"""

import argparse
from pathlib import Path

from _common import print_verification, write
from symeq import verify
from symeq.activations import real
from symeq.groups import builtin_group
from symeq.models import random_equivariant_model, scramble


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-sigmoid-real-affine-flips")
    args = ap.parse_args(argv)
    out = Path(args.out)

    group = builtin_group("mirror:2x2")
    m = random_equivariant_model(group, ["regular*2", "regular"], real("sigmoid"), rng=5)
    for seed in range(6, 60):  # the first scramble that flips a neuron
        model, k = scramble(m, rng=seed)
        if any(a == -1 for layer in k.alphas for a in layer):
            break
    else:
        raise AssertionError("no scramble with a sign flip")
    print(f"# Affine sign flips of the real sigmoid: {model.name}\n")
    print(f"$\\sigma(t) = {model.layers[0].activation.latex()}$; $K_i$: {model.layers[0].activation.latent_group}.\n")
    v = verify(model)
    print_verification(v, "Layers first: rows equal up to sigma(-t) = 1 - sigma(t)")
    offsets = v.derivation.offsets if v.derivation is not None else None
    if offsets is not None:
        for i, per_g in enumerate(offsets):
            for gname, c in zip(v.group.names, per_g):
                if c is not None:
                    print(f"- offset of $\\rho_{{{i + 1}}}(\\mathrm{{{gname}}})$: ({', '.join(str(x) for x in c)})")
    print(f"\n**Verdict: {v.verdict}**")
    write(out, model, v)
    return 0 if v.verdict == "layerwise-equivariant" and offsets is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
