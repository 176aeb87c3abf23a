"""Theorem 4.1 for lightning attention: heads swap under the mirror.

Claim: a 4-head lightning attention layer on the 4 patches (1x2) of a 2x4 image, built so that
the mirror swaps heads 0 and 1 and fixes heads 2 and 3, then hidden by a random head permutation
and random GL(d_v) and query/key matrices, is layerwise equivariant: symeq derives a head
permutation with one 2-cycle and two fixed points, and invertible per-head blocks, exactly.
"""

import argparse
from pathlib import Path

import symeq
from symeq.attention import factor_kron, block_monomial_parts, patch_mirror, random_equivariant_attention, scramble_attention

from _common import latex_matrix, print_verification, write


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-attention-heads-swap")
    args = ap.parse_args(argv)
    G = patch_mirror(2, 4, 1, 2)
    model = scramble_attention(random_equivariant_attention(G, tokens=4, head_perms=[[1, 0, 2, 3]], rng=11), rng=12)
    print("# Heads swapping under the mirror (lightning attention)\n")
    v = symeq.verify(model)
    print_verification(v, "Verification")
    (M,) = v.actions[0]
    P, R = factor_kron(M, 4, 8)
    parts = block_monomial_parts(R, 4, 2)
    perm = [k for k, _ in parts]
    print(f"Head permutation under the mirror: {perm}\n")
    for h, (k, B) in enumerate(parts):
        print(f"$$B_{{{h}}} = {latex_matrix(B)}\\quad(\\text{{head }} {h} \\leftarrow \\text{{head }} {k})$$\n")
    swaps = sum(1 for h in range(4) if perm[h] != h) // 2
    fixed = sum(1 for h in range(4) if perm[h] == h)
    print(f"**Verdict:** {v.verdict}; {swaps} swap, {fixed} fixed heads")
    write(Path(args.out), model, v)
    ok = v.verdict == "layerwise-equivariant" and swaps == 1 and fixed == 2
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
