"""Groups acting on attention inputs: T tokens of dimension d, flattened by rows (index t*d + c).

A token permutation P together with a channel matrix C acts by X -> P X C^T, which on the flattened
vector is the Kronecker product P (x) C.

>>> token_permutations(3, 2).order()
6
>>> patch_mirror(2, 4, 1, 2).input_dim
8
"""

from __future__ import annotations

from flint import fmpq_mat

from ..errors import InputError, ShapeError
from ..numbers import identity, kron, matrix
from .core import FiniteGroup, permutation_matrix

__all__ = ["attention_group", "token_permutations", "patch_mirror"]


def attention_group(tokens: int, generators, names=None, label: str = "tokens x channels") -> FiniteGroup:
    """A group acting on T x d inputs and T x d_out outputs by X -> P X C^T.

    ``generators``: list of (token permutation (list), C (d x d), C_out (d_out x d_out)).
    """
    gens = []
    for perm, C, Cout in generators:
        P = permutation_matrix(perm)
        if len(perm) != tokens:
            raise ShapeError(f"token permutation {perm} has length {len(perm)}, expected {tokens} tokens")
        C = C if isinstance(C, fmpq_mat) else matrix(C)
        Cout = Cout if isinstance(Cout, fmpq_mat) else matrix(Cout)
        gens.append((kron(P, C), kron(P, Cout)))
    return FiniteGroup(gens, list(names) if names else [], label=label)


def token_permutations(tokens: int, d: int, d_out: int | None = None) -> FiniteGroup:
    """S_T permuting the tokens (channels fixed): attention without positional encoding is
    equivariant under it by construction, f(P X) = P f(X)."""
    if tokens < 2:
        raise InputError("token_permutations needs at least 2 tokens")
    d_out = d if d_out is None else d_out
    gens = [([1, 0] + list(range(2, tokens)), identity(d), identity(d_out))]
    names = ["swap"]
    if tokens > 2:
        gens.append(([(t + 1) % tokens for t in range(tokens)], identity(d), identity(d_out)))
        names.append("cycle")
    return attention_group(tokens, gens, names, label=f"S{tokens} on tokens")


def patch_mirror(h: int = 2, w: int = 4, ph: int = 1, pw: int = 2, output: str = "same") -> FiniteGroup:
    """The horizontal mirror of an h x w image cut into ph x pw patches (tokens, row-major),
    acting on the patch order and on the pixels inside each patch (channels, row-major)."""
    if h % ph or w % pw:
        raise InputError(f"a {h}x{w} image does not split into {ph}x{pw} patches")
    rows, cols = h // ph, w // pw
    perm = [r * cols + (cols - 1 - c) for r in range(rows) for c in range(cols)]
    pix = [a * pw + (pw - 1 - b) for a in range(ph) for b in range(pw)]
    C = permutation_matrix(pix)
    Cout = C if output == "same" else identity(int(output))
    return attention_group(rows * cols, [(perm, C, Cout)], ["mirror"], label=f"patch mirror {h}x{w} ({ph}x{pw} patches)")
