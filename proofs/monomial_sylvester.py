"""A monomial network: fibre = orbit after gauge fixing (Sylvester), and Theorem 4.1.

Claim: the bias-free (2,2,1) network with sigma = t^3 and hidden rows (1, 3), (3, 1) and equal
outgoing weights is invariant under the swap of its two inputs.  After fixing one incoming entry
per neuron (the continuous scalings of t^3), its fibre is finite of degree 2 and equals the orbit
of S_2 (Sylvester: a binary cubic is a sum of two cubes in essentially one way), so theta is
identifiable (symeq proves it by the tensor method: Kruskal's uniqueness of the
rank-one terms, or by a Groebner basis of the gauge-fixed fibre), and the swap acts on the hidden layer by a monomial matrix.  Scrambling by random
scalings and a permutation hides the structure; symeq derives the action with the scalings.
"""

import argparse
from pathlib import Path

import symeq
from symeq.groups import FiniteGroup, permutation_matrix
from symeq.models import scramble
from symeq.numbers import identity, matrix

from _common import print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-monomial-sylvester")
    args = ap.parse_args(argv)
    G = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"], label="swap, invariant output")
    theta = symeq.Model(2, [symeq.DenseLayer(matrix([[1, 3], [3, 1]]), None, symeq.monomial(3)),
                            symeq.DenseLayer(matrix([[2, 2]]), None, None)], G, "cubes (2,2,1)")
    model, _ = scramble(theta, rng=7)
    print("# Monomial activation: Sylvester and Theorem 4.1\n")
    print("f(x, y) = 2 (x + 3y)^3 + 2 (3x + y)^3, hidden by random scalings of the neurons.\n")
    v = symeq.verify(model, identifiability=True)
    print_verification(v, "Verification with the fibre")
    ident = v.identifiability
    # the tensor method (Kruskal on the top-degree tensor: Sylvester's uniqueness for binary cubics)
    # decides it first; the Groebner fallback counts the gauge-fixed fibre: 2 points = |S_2|
    ok = v.verdict == "layerwise-equivariant" and ident["status"] == "identifiable" \
        and (ident.get("method") == "tensor" or ident["fibre_degree"] == ident["orbit_size"] == 2)
    write(Path(args.out), model, v)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
