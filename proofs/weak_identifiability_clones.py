"""Weak identifiability: clones and inactive neurons, and the re-parametrization theta'.

Claim: a tanh-series network whose hidden layer has a cloned neuron (split outgoing weight) and
an inactive neuron (zero outgoing weight) is swap-invariant but has no latent action at theta
(the clone multiplicities do not match under the swap); its reduced submodel is layerwise
equivariant, and lifting back gives theta' with the same widths and the same function whose
layers are equivariant (Theorem 4.1 under weak identifiability).
"""

import argparse
from pathlib import Path

import symeq
from symeq.groups import FiniteGroup, permutation_matrix
from symeq.numbers import identity, matrix
from symeq.submodels import find_submodel_structure

from _common import print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-weak-identifiability")
    args = ap.parse_args(argv)
    G = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"])
    model = symeq.Model(2, [
        symeq.DenseLayer(matrix([[1, 2], [1, 2], [2, 1], [5, -3]]), [1, 1, 1, 4], symeq.tanh_series(3)),
        symeq.DenseLayer(matrix([[1, 2, 3, 0]]), [0], None)], G, "clone + inactive neuron")
    print("# Weak identifiability: clones and inactive neurons\n")
    s = find_submodel_structure(model)
    print(f"Clone classes (layer, neurons): {s['clones']}; inactive neurons: {s['inactive']}\n")
    v = symeq.verify(model)
    print_verification(v, "Verification")
    same = all(v.model(x) == model(x) for x in ([symeq.fmpq(1, 3), symeq.fmpq(-2)], [symeq.fmpq(5), symeq.fmpq(7, 2)]))
    print(f"theta' has the original widths {v.model.widths == model.widths} and the same values at test points: {same}")
    write(Path(args.out), model, v)
    ok = v.verdict == "layerwise-equivariant" and v.reparametrized and same
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
