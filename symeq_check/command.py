"""The checker's command: read a certificate and a model file, check them, print the report.

``python -m symeq_check CERT MODEL`` (or the zipapp, ``python3 -I symeq_check.pyz CERT MODEL``): exit 0
accepted, 1 rejected, 2 malformed input or a certificate of another model, 3 nothing verifiable.
"""
from __future__ import annotations

import json
import sys

from ._numbers import CheckError
from .dispatch import check_certificate
from .report import CheckReport
from .schema import MODEL_FORMAT



def _load(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise CheckError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CheckError(f"{what} file {path} is not valid JSON: {exc}") from None


def _argument_order(cert, model, cert_path: str, model_path: str, usage: str) -> None:
    """Refuse a model given as CERT or a certificate given as MODEL, naming the mistake (exit 2)."""
    def fmt(doc):
        return doc.get("format") if isinstance(doc, dict) else None

    # every symeq document but a model is taken for a certificate here (new kinds included)
    is_cert = isinstance(fmt(model), str) and fmt(model).startswith("symeq-") and fmt(model) != MODEL_FORMAT
    if fmt(cert) == MODEL_FORMAT and is_cert:
        raise CheckError(f"{cert_path} is a model ({MODEL_FORMAT}) and {model_path} a certificate "
                         f"({fmt(model)}): did you swap the arguments? {usage}")
    if fmt(cert) == MODEL_FORMAT:
        raise CheckError(f"{cert_path} is a model ({MODEL_FORMAT}), not a certificate: the certificate comes "
                         f"first. {usage}")
    if is_cert:
        raise CheckError(f"{model_path} is a certificate ({fmt(model)}), not a model: the model comes second. "
                         f"{usage}")


def check_files(cert_path: str, model_path: str, usage: str = "usage: symeq check CERT MODEL",
                before_check=None, model_doc=None) -> CheckReport:
    """Read a certificate and a model from JSON files and check them (see `check_certificate`).

    Swapped arguments (a model as ``cert_path``, a certificate as ``model_path``) are a
    :class:`CheckError` that says so and ends with ``usage``.  ``before_check`` (no arguments) is
    called once both files are read and in order, before the check itself (symeq prints its
    budget line there).  ``model_doc``, when given, is the model document already read (a JSON
    object, e.g. symeq's reading of an ONNX file), named ``model_path`` in messages; the checker
    then reads no model file.
    """
    cert = _load(cert_path, "certificate")
    model = _load(model_path, "model") if model_doc is None else model_doc
    _argument_order(cert, model, cert_path, model_path, usage)
    if before_check is not None:
        before_check()
    return check_certificate(cert, model)


def write_zipapp(path: str) -> None:
    """Write this package as one executable zip file (``python3 -I PATH CERT MODEL``), standard library only.

    The archive holds the package's ``.py`` files under ``symeq_check/`` and a ``__main__.py`` that runs
    :func:`main`; nothing else is needed to run it (no symeq, no installed package).
    """
    import zipfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    if not (here / "__init__.py").is_file():
        raise OSError(f"--zipapp copies the package directory; {here} is not one (run it from the package)")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("__main__.py", "import sys\n\nfrom symeq_check.command import main\n\n"
                                  "sys.exit(main(prog='python3 -I ' + sys.argv[0]))\n")
        for f in sorted(here.rglob("*.py")):
            z.write(f, "symeq_check/" + f.relative_to(here).as_posix())


def main(argv=None, prog: str = "python -m symeq_check") -> int:
    """Command line entry point: ``python -m symeq_check CERT MODEL``; returns the exit code.

    ``prog`` is the command named in the usage line (``python -m symeq.check``, ``python3 -I
    symeq_check.pyz``).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    usage = f"usage: {prog} CERT MODEL"
    if args == ["--self-test"]:
        from .selftest import main as self_test

        return self_test()
    if len(args) == 2 and args[0] == "--zipapp":
        try:
            write_zipapp(args[1])
        except OSError as exc:
            print(f"error: cannot write {args[1]}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"wrote {args[1]}: run it with python3 -I {args[1]} CERT MODEL")
        return 0
    if args in (["-h"], ["--help"]):
        print(usage + f"\n       {prog} --self-test         re-prove the identity table at rational points"
              f"\n       {prog} --zipapp FILE.pyz   write the checker as one file (python3 -I FILE.pyz CERT MODEL)"
              "\nexit codes: 0 accepted, 1 rejected, 2 malformed input or a certificate of another model "
              "(input size, group or theta differ), 3 nothing verifiable")
        return 0
    if len(args) != 2:
        print(f"{usage}\nerror: expected a certificate file and a model file", file=sys.stderr)
        return 2
    try:
        report = check_files(*args, usage=usage)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # never a traceback; a checker bug must not look like acceptance
        print(f"error: internal checker failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return report.exit_code
