"""Generic polynomial activations: identifiable exactly when not a subnetwork (KMMM), both ways.

Claim (Kohn, Marchetti, Massarenti, Mella 2026, on small instances): for the bias-free
activation sigma = t^3 + t^2, the (2,2,1) network with rows (1, 3), (3, 1) has a fibre of 2 points,
the orbit of S_2: identifiable, and the swap acts on its hidden layer by a permutation.  Adding a
third neuron with zero outgoing weight makes it a subnetwork: the fibre becomes positive
dimensional (not identifiable), while the reduced parameter is identifiable again (weakly
identifiable), and the conclusion of Theorem 4.1 still holds.
"""

import argparse
from pathlib import Path

import symeq
from symeq.groups import FiniteGroup, permutation_matrix
from symeq.numbers import identity, matrix

from _common import print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-generic-polynomial")
    args = ap.parse_args(argv)
    G = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"], label="swap, invariant output")
    sigma = symeq.polynomial([0, 0, 1, 1])
    full = symeq.Model(2, [symeq.DenseLayer(matrix([[1, 3], [3, 1]]), None, sigma),
                           symeq.DenseLayer(matrix([[2, 2]]), None, None)], G, "not a subnetwork")
    sub = symeq.Model(2, [symeq.DenseLayer(matrix([[1, 3], [3, 1], [1, 1]]), None, sigma),
                          symeq.DenseLayer(matrix([[2, 2, 0]]), None, None)], G, "a subnetwork (inactive neuron)")
    print("# Generic polynomial activation: identifiable iff not a subnetwork\n")
    v1 = symeq.verify(full, identifiability=True)
    print_verification(v1, "Width 2: not a subnetwork")
    v2 = symeq.verify(sub, identifiability=True)
    print_verification(v2, "Width 3 with an inactive neuron: a subnetwork")
    ok = (v1.verdict == "layerwise-equivariant" and v1.identifiability["status"] == "identifiable"
          and v2.verdict == "layerwise-equivariant" and v2.identifiability["status"] == "weakly-identifiable")
    write(Path(args.out), full, v1)
    write(Path(args.out), sub, v2, "-subnetwork")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
