"""Sigmoid series: sign flips act affinely, sigma(-t) = 1 - sigma(t).

Claim: a layerwise-equivariant network with the Taylor polynomial of the logistic sigmoid,
scrambled by a random permutation and random sign flips of its hidden neurons (each flip
z -> -z turns the neuron's output y into 1 - y, which the next layer's bias absorbs), is
layerwise equivariant with *affine* latent actions y -> rho(g) y + c(g); the certificate carries
the offsets c(g) and `symeq check` re-verifies them.
"""

import argparse
import random
from pathlib import Path

import symeq
from symeq.models import random_equivariant_model, scramble

from _common import print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-sigmoid-affine")
    args = ap.parse_args(argv)
    act = symeq.sigmoid_series(5)
    print("# Sigmoid series: sign flips act affinely\n")
    print(f"$\\sigma(t) = {act.latex()}$; $\\sigma(-t) = 1 - \\sigma(t)$ holds exactly: "
          f"{act.affine_admissible(-1) == (-1, 1)}\n")
    m = random_equivariant_model(symeq.mirror(2, 2), ["regular*2", "regular"], act, rng=5)
    rng = random.Random(6)
    while True:
        s, k = scramble(m, rng)
        if any(a == -1 for layer in k.alphas for a in layer):
            break
    v = symeq.verify(s)
    print_verification(v, "Verification")
    offsets = v.certificate()["latent_offsets"]
    print(f"offsets c_i(g) per hidden layer: {offsets}")
    write(Path(args.out), s, v)
    return 0 if v.verdict == "layerwise-equivariant" and offsets is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
