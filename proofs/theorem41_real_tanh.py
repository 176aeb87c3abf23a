"""Theorem 4.1 on a real tanh MLP under the horizontal mirror of 4 x 4 images.

Claim: the scrambled network below (widths 16 -> 4 -> 2 -> 16, sigma = tanh itself, not a
Taylor polynomial) is layerwise equivariant: the mirror acts on each hidden layer by a signed
permutation, and each layer's check is an exact identity -- rows of W rho(g) equal rows of W up
to the sign flip that tanh(-t) = -tanh(t) allows (docs/theory.md, "Real activations": these are
*all* the symmetries of tanh).  Layerwise equivariance proves end-to-end equivariance, although
f(x) is never evaluated exactly (it is transcendental).

Second claim: one weight changed by 1/3 breaks equivariance, proved by an input x at which the
arb ball of some output of f(g x) - g f(x) excludes 0; `symeq check` re-proves it with its own
interval arithmetic on Fractions.

Prints a Markdown transcript and writes model.json, certificate.json (the proof) and
model_broken.json, certificate_broken.json (the refutation) to --out.
"""

import argparse
from pathlib import Path

from flint import fmpq

from _common import print_verification, write
from symeq import verify
from symeq.activations import real
from symeq_check import check_certificate
from symeq.groups import builtin_group
from symeq.io import model_from_json, model_to_json, write_json
from symeq.models import random_equivariant_model, scramble


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-theorem41-real-tanh")
    args = ap.parse_args(argv)
    out = Path(args.out)

    group = builtin_group("mirror:4x4")
    model, k = scramble(random_equivariant_model(group, ["regular*2", "regular"], real("tanh"), rng=8), rng=9)
    flips = sum(1 for layer in k.alphas for a in layer if a == -1)
    print(f"# Theorem 4.1 on a real tanh network: {model.name}\n")
    print(f"Widths {model.widths}; $\\sigma(t) = {model.layers[0].activation.latex()}$; "
          f"$K_i$: {model.layers[0].activation.latent_group}; the scramble flipped {flips} neuron(s).\n")
    v = verify(model)
    print_verification(v, "Layers first: every layer by the odd symmetry of tanh")
    write(out, model, v)

    data = model_to_json(model)
    w = data["layers"][0]["weight"]
    w[0][0] = str(fmpq(w[0][0]) + fmpq(1, 3))
    broken = model_from_json(data)
    vb = verify(broken)
    print("## One weight changed by 1/3\n")
    for line in vb.report().splitlines():
        if "witness" in line or "excludes" in line:
            print(f"    {line.strip()}")
    report = check_certificate(vb.certificate(), data)
    print(f"\nThe stdlib checker re-proves the witness: {report.checks[-2]}; accepted = {report.accepted}\n")
    write_json(data, out / "model_broken.json")
    write_json(vb.certificate(), out / "certificate_broken.json")
    print(f"**Verdict: {v.verdict}** (the changed network: {vb.verdict})")
    ok = v.verdict == "layerwise-equivariant" and vb.verdict == "not-equivariant" and report.accepted
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
