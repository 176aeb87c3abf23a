"""Shared printing helpers of the proofs/ scripts (Markdown with LaTeX)."""

from pathlib import Path

from symeq.io import model_to_json, write_json
from symeq.numbers import mat_rows


def latex_matrix(M) -> str:
    return r"\begin{pmatrix}" + r" \\ ".join(" & ".join(str(x) for x in r) for r in mat_rows(M)) + r"\end{pmatrix}"


def print_verification(v, title: str) -> None:
    print(f"## {title}\n")
    print(f"Premise (end-to-end equivariance): **{'holds' if v.equivariance.holds else 'fails'}** "
          f"({v.equivariance.method}): {v.equivariance.detail}.\n")
    if v.derivation is not None and v.derivation.found:
        for i, per_g in enumerate(v.actions):
            for gname, M in zip(v.group.names, per_g):
                if M.nrows() <= 12:
                    print(f"$$\\rho_{{{i + 1}}}(\\mathrm{{{gname}}}) = {latex_matrix(M)}$$\n")
                else:
                    print(f"$\\rho_{{{i + 1}}}(\\mathrm{{{gname}}})$: a {M.nrows()}x{M.ncols()} matrix (see the certificate)\n")
        for c in v.derivation.layer_checks:
            print(f"- layer {c.layer}, {c.generator}: {'ok' if c.holds else 'FAILED'} ({c.detail})")
        print(f"- homomorphism: {v.derivation.homomorphism}\n")
    elif v.derivation is not None:
        print(f"No action at theta: {v.derivation.failure}\n")
    print(f"Identifiability: {v.identifiability['status']} ({v.identifiability['detail']})\n")
    for n in v.notes:
        print(f"- {n}")
    print(f"\n**Verdict: {v.verdict}**\n")


def write(out: Path, model, v, stem: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(model_to_json(model), out / f"model{stem}.json")
    write_json(v.certificate(), out / f"certificate{stem}.json")
