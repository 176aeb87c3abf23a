"""The one dispatch: a certificate's ``format`` (and, for identifiability, its ``method`` and verdict) names
the function that checks it.

Every checker has the signature ``(cert, model, *, max_group_size) -> CheckReport``; ``max_group_size``
caps the group the homomorphism check enumerates (only the layerwise checker enumerates one).  A new
certificate kind adds its checker to :data:`CERTIFICATE_CHECKERS` and nothing else.
"""
from __future__ import annotations

from ._numbers import CheckError, _dict, _short
from .graph import check_graph_certificate
from .identifiability.classical import check_classical
from .identifiability.deep import DEEP_METHOD, check_deep
from .identifiability.family import check_jacobian_family
from .identifiability.graph_rank import check_graph_jacobian_rank, is_graph_rank
from .identifiability.rank import JACOBIAN_METHOD, check_jacobian_rank
from .identifiability.tensor import check_tensor
from .layerwise import check_theorem_certificate
from .report import CheckReport
from .schema import CERT_FORMAT, CERT_FORMAT_DENSE, IDENTIFIABILITY_FORMAT

#: the ``method`` slot of a certificate of a graph model (docs/graphs.md): it is keyed on the model file's
#: (or the certificate's parameters') ``"graph"``, since such a certificate has no method of its own
GRAPH = "graph"
#: the ``method`` slot of a graph model's ``jacobian-rank`` certificate (keyed on its ``graph_sha256``)
GRAPH_JACOBIAN = "graph jacobian-rank"

#: (format, method, verdict) -> checker.  ``method`` is None for a certificate without one (the
#: equivariance certificates, Kruskal's tensor method); ``verdict`` None matches every verdict, a named
#: verdict is looked up first.
CERTIFICATE_CHECKERS = {
    (CERT_FORMAT, GRAPH, None): check_graph_certificate,          # a graph model's, either verdict
    (CERT_FORMAT, None, None): check_theorem_certificate,         # layerwise-equivariant, not-equivariant
    (CERT_FORMAT_DENSE, None, None): check_theorem_certificate,   # the same, dense actions
    (IDENTIFIABILITY_FORMAT, None, None): check_tensor,           # one hidden layer, Kruskal
    (IDENTIFIABILITY_FORMAT, DEEP_METHOD, None): check_deep,      # two or three hidden layers
    (IDENTIFIABILITY_FORMAT, "sussmann", None): check_classical,  # real tanh / sigmoid networks
    (IDENTIFIABILITY_FORMAT, "fefferman", None): check_classical,
    (IDENTIFIABILITY_FORMAT, JACOBIAN_METHOD, None): check_jacobian_rank,  # local identifiability
    (IDENTIFIABILITY_FORMAT, JACOBIAN_METHOD, "not-identifiable"): check_jacobian_family,
    (IDENTIFIABILITY_FORMAT, GRAPH_JACOBIAN, None): check_graph_jacobian_rank,  # local, along a graph
}
FORMATS = tuple(dict.fromkeys(fmt for fmt, _, _ in CERTIFICATE_CHECKERS))


def _is_graph(cert: dict, model) -> bool:
    """A certificate of a graph model, or one checked against a graph model file (docs/graphs.md)."""
    params = cert.get("parameters")
    return (isinstance(model, dict) and "graph" in model) or (
        isinstance(params, dict) and ("graph_sha256" in params or "graph" in params))


def checker_for(cert: dict, model=None):
    """The checker of ``cert`` (against ``model``) from :data:`CERTIFICATE_CHECKERS`, or a :class:`CheckError`
    naming what is known."""
    fmt = _dict(cert, "certificate").get("format")
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise CheckError(f"certificate: format must be one of {', '.join(map(repr, FORMATS))}, got {_short(fmt)}")
    method, verdict = cert.get("method"), cert.get("verdict")
    method = method if isinstance(method, str) else None
    if fmt == CERT_FORMAT and _is_graph(cert, model):
        if not (isinstance(model, dict) and "graph" in model):
            raise CheckError("the certificate is about a graph model (its parameters have \"graph_sha256\"), the "
                             "model file is a chain: give the graph model it was written for")
        method = GRAPH
    if fmt == IDENTIFIABILITY_FORMAT and method == JACOBIAN_METHOD and is_graph_rank(cert):
        method = GRAPH_JACOBIAN
    verdict = verdict if isinstance(verdict, str) else None
    for key in ((fmt, method, verdict), (fmt, method, None)):
        if key in CERTIFICATE_CHECKERS:
            return CERTIFICATE_CHECKERS[key]
    # a method outside the table: the format's own checker reads the certificate and refuses the key by name
    return CERTIFICATE_CHECKERS[(fmt, None, None)]


def check_certificate(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a certificate against a model, exactly.

    The certificate's ``format`` (and ``method``) chooses the checker (see ``CERTIFICATE_CHECKERS``).

    Parameters
    ----------
    cert : dict
        A parsed certificate: ``symeq-certificate/2`` (sparse actions), ``symeq-certificate/1``
        (dense actions) or ``symeq-identifiability/1``.
    model : dict
        A parsed ``symeq-model/1`` document.
    max_group_size : int, optional
        Cap on the size of the group enumerated by the homomorphism check.

    Returns
    -------
    CheckReport
        ``accepted`` is True, False, or None when the verdict claims nothing verifiable.

    Raises
    ------
    CheckError
        If either document is malformed (bad number, wrong shape, unknown kind or verdict).
    """
    return checker_for(cert, model)(cert, model, max_group_size=max_group_size)
