"""Theorem 4.1 on a tanh-series MLP under the horizontal mirror of 2 x 3 images.

Claim: the scrambled network below is mirror-equivariant end to end, and the mirror acts on
each hidden layer through a *signed* permutation (tanh is odd, so its latent group is
{+-1}^n x S_n): self-symmetric neurons, mirrored pairs, negated neurons and negated pairs.

Prints a Markdown transcript and writes model.json and certificate.json to --out.
"""

import argparse
from pathlib import Path

import symeq
from symeq.io import model_to_json, write_json
from symeq.numbers import mat_rows


def latex_matrix(M) -> str:
    return r"\begin{pmatrix}" + r" \\ ".join(" & ".join(str(x) for x in r) for r in mat_rows(M)) + r"\end{pmatrix}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="proof-theorem41-tanh-mirror")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    model = symeq.builtin_example()
    v = symeq.verify(model)
    print(f"# Theorem 4.1: {model.name}\n")
    print(f"Widths {model.widths}; activation $\\sigma(t) = {model.layers[0].activation.latex()}$; "
          f"latent group $K_i$: {model.layers[0].activation.latent_group}.\n")
    print("## Premise\n")
    print(f"End-to-end equivariance: **{'holds' if v.equivariance.holds else 'fails'}** "
          f"({v.equivariance.method}): {v.equivariance.detail}.\n")
    print("## Conclusion\n")
    for i, per_g in enumerate(v.actions or []):
        for gname, M in zip(v.group.names, per_g):
            print(f"$$\\rho_{{{i + 1}}}(\\mathrm{{{gname}}}) = {latex_matrix(M)}$$\n")
    for c in (v.derivation.layer_checks if v.derivation else []):
        print(f"- layer {c.layer}, {c.generator}: {'ok' if c.holds else 'FAILED'} ({c.detail})")
    print(f"- homomorphism: {v.derivation.homomorphism if v.derivation else None}\n")
    print(f"**Verdict: {v.verdict}**")
    write_json(model_to_json(model), out / "model.json")
    write_json(v.certificate(), out / "certificate.json")
    return v.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
