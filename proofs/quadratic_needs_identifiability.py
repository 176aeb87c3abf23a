"""The identifiability hypothesis is needed: x^2 + y^2 as a sum of two squares.

Claim: with sigma = t^2 (bias-free), theta = (W1 = [[3/5, 4/5], [4/5, -3/5]], W2 = [1, 1])
computes x^2 + y^2, which is swap-invariant; theta is not identifiable (its gauge-fixed fibre is
positive dimensional: x^2 + y^2 = (cx + sy)^2 + (-sx + cy)^2 for every c^2 + s^2 = 1), and at
theta no latent action exists, so the conclusion of Theorem 4.1 fails at theta.  The fibre-wide
search finds theta' in the same fibre (e.g. W1 = I) that is layerwise equivariant.
"""

import argparse
from pathlib import Path

import symeq
from symeq.groups import FiniteGroup, permutation_matrix
from symeq.numbers import identity, matrix

from _common import print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-quadratic")
    args = ap.parse_args(argv)
    G = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"], label="swap, invariant output")
    theta = symeq.Model(2, [symeq.DenseLayer(matrix([["3/5", "4/5"], ["4/5", "-3/5"]]), None, symeq.monomial(2)),
                            symeq.DenseLayer(matrix([[1, 1]]), None, None)], G, "x^2 + y^2")
    print("# The identifiability hypothesis is needed\n")
    at_theta = symeq.verify(theta, fibre_search=False, identifiability=True)
    print_verification(at_theta, "At theta")
    v = symeq.verify(theta)
    print_verification(v, "Searching the fibre")
    ok = (at_theta.verdict == "undetermined" and at_theta.identifiability["status"] == "not-identifiable"
          and v.verdict == "layerwise-equivariant" and v.reparametrized
          and v.model.polynomial_map() == theta.polynomial_map())
    write(Path(args.out), theta, v)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
