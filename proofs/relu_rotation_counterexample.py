"""ReLU: the identity on R^2 under the order-3 rotation (Bokman-Kahl-style counterexample).

Claim: W1 = [A; -A], W2 = [A^-1, -A^-1] (width 4) realises the identity, which commutes with
R = [[0, -1], [1, -1]] (order 3): the premise holds, there is no positive monomial action at
theta, and (exactly, one hidden layer) no parameter of width 4 with the same function is
layerwise equivariant; the smallest layerwise-equivariant width is 6, and symeq gives a width-6
realisation, verified layerwise equivariant.  Writes the width-6 model and certificate as
model.json / certificate.json and the width-4 ones with the suffix -width4.
"""

import argparse
from pathlib import Path

import symeq
from symeq.groups import FiniteGroup
from symeq.numbers import matrix

from _common import print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-relu-rotation")
    args = ap.parse_args(argv)
    R = matrix([[0, -1], [1, -1]])
    G = FiniteGroup([(R, R)], ["rot3"], label="order-3 rotation")
    A = matrix([[2, 1], [1, 1]])
    Ai = A.inv()
    W1 = matrix([[A[0, 0], A[0, 1]], [A[1, 0], A[1, 1]], [-A[0, 0], -A[0, 1]], [-A[1, 0], -A[1, 1]]])
    W2 = matrix([[Ai[0, 0], Ai[0, 1], -Ai[0, 0], -Ai[0, 1]], [Ai[1, 0], Ai[1, 1], -Ai[1, 0], -Ai[1, 1]]])
    model = symeq.Model(2, [symeq.DenseLayer(W1, None, symeq.relu()), symeq.DenseLayer(W2, None, None)], G,
                        "identity through width 4")
    print("# ReLU: the identity under the order-3 rotation\n")
    v4 = symeq.verify(model)
    print_verification(v4, "Width 4")
    real = v4.fibre.realisation if v4.fibre is not None else None
    ok = v4.verdict == "no-layerwise-parameter" and real is not None
    if real is not None:
        v6 = symeq.verify(real)
        print_verification(v6, f"Width {real.widths[1]}: the realisation found by symeq")
        ok = ok and v6.verdict == "layerwise-equivariant" and real.widths[1] == 6
        write(Path(args.out), real, v6)
    write(Path(args.out), model, v4, "-width4")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
