"""The schemas of the files the checker reads: the format names, the keys allowed and required in each
object of a model file and of an equivariance certificate, and :func:`check_keys` (unknown and missing keys,
with "did you mean").  symeq has its own copy of ``check_keys`` (``symeq/schema.py``); the prover and the
checker accept the same files (tests/checker/test_schema_agreement.py).
"""
from __future__ import annotations


from ._numbers import CheckError, _dict


MODEL_FORMAT = "symeq-model/1"
CERT_FORMAT = "symeq-certificate/2"       # sparse actions (written by symeq >= this version)
CERT_FORMAT_DENSE = "symeq-certificate/1"  # dense action matrices (still read)
VERIFIABLE = ("layerwise-equivariant", "not-equivariant")
UNVERIFIABLE = ("no-layerwise-parameter", "undetermined")
PARAMS_DIFFER = "parameters differ from the model"
MAX_DEGREE = 1000  # largest activation degree / Taylor order read (symeq's --max-degree default)


def close_names(name, known, n: int = 3) -> list[str]:
    """The names in ``known`` closest to ``name`` (difflib), for "did you mean" hints.

    >>> close_names("biases", ["weight", "bias", "activation"])
    ['bias']
    """
    import difflib

    return difflib.get_close_matches(str(name), [str(k) for k in known], n=n, cutoff=0.6)


def check_keys(obj: dict, where: str, allowed, required=(), error=None) -> None:
    """Refuse an object with an unknown or a missing key (the one schema check of every file).

    ``allowed`` lists every key that may appear (``required`` ones included); ``where`` is the
    object's JSON path (``model.layers[0]``).  The error names the key, the path, the keys allowed
    there and, when one is close, says "did you mean".  ``error`` is the exception class raised
    (:class:`CheckError` by default; symeq's readers pass their ``InputError``, exit 2).

    >>> check_keys({"weight": [[1]], "biases": [0]}, "layers[0]", ["type", "weight", "bias"], ["weight", "bias"])
    Traceback (most recent call last):
    ...
    symeq_check._numbers.CheckError: layers[0]: unknown key "biases" (did you mean "bias"?); allowed here: "type", "weight", "bias"
    """
    error = CheckError if error is None else error
    allowed = list(allowed)
    listed = ", ".join(f'"{k}"' for k in allowed)
    for key in obj:
        if key not in allowed:
            close = close_names(key, allowed, 1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise error(f'{where}: unknown key "{key}"{hint}; allowed here: {listed}')
    for key in required:
        if key not in obj:
            raise error(f'{where}: missing key "{key}"; required here: '
                        + ", ".join(f'"{k}"' for k in required))


# ----------------------------------------------------------------------------- schemas
# The keys allowed in each object of the files read here, and the required ones (``check_keys``).
# A model file as symeq.io reads it (conv2d layers: the conv section at the end); "bias" is required
# on dense layers (null: no bias), so that a misspelt key cannot turn into a zero bias.
MODEL_KEYS = (("format", "name", "input_dim", "layers", "graph", "output", "group"), ("format", "input_dim"))
# the nodes of a graph model (docs/graphs.md): a segment, an addition, a concatenation
NODE_KEYS = {"layers": (("name", "input", "layers"), ("name", "input", "layers")),
             "add": (("name", "add", "activation"), ("name", "add")),
             "concat": (("name", "concat", "activation"), ("name", "concat"))}
DENSE_KEYS = (("type", "weight", "bias", "activation"), ("type", "weight", "bias"))
ATTENTION_KEYS = (("type", "tokens", "heads", "scoring", "scale", "bias"), ("type", "tokens", "heads"))
HEAD_KEYS = (("query", "key", "value", "out", "score_bias"), ("query", "key", "value", "out"))
GROUP_KEYS = (("label", "generators"), ("generators",))
GENERATOR_KEYS = (("name", "input", "output"), ("input", "output"))


# A symeq-certificate/1 or /2 (symeq.theorem.Verification.certificate).  Every key the checker reads
# for the certificate's verdict is required (a deleted key is refused, never read as absent: a missing
# "latent_offsets" must not read as "no offsets"); "identifiability", "checks", "notes" and "versions"
# are reports for people, not read here, and "seconds"/"exit_code" are what ``symeq verify --json`` adds.
CERT_KEYS = ("format", "verdict", "theorem", "model_name", "equivariance", "identifiability", "input_dim",
             "group", "parameters", "latent_groups", "latent_actions", "latent_offsets", "checks", "notes",
             "versions", "seconds", "exit_code")
CERT_REQUIRED = {"layerwise-equivariant": ("format", "verdict", "input_dim", "group", "parameters",
                                           "latent_actions", "latent_offsets"),
                 "not-equivariant": ("format", "verdict", "input_dim", "group", "equivariance")}
EQUIVARIANCE_KEYS = ("holds", "method", "probabilistic", "error_bound", "points", "detail", "witness")
EQ_WITNESS_KEYS = (("generator", "generator_name", "x", "f_of_gx", "g_of_fx"), ("generator", "x"))
PARAMETER_KEYS = (("layers", "layers_sha256", "reparametrized"), ("reparametrized",))
GRAPH_PARAMETER_KEYS = (("graph_sha256", "graph", "output", "reparametrized"), ("graph_sha256", "reparametrized"))
GRAPH_CERT_KEYS = CERT_KEYS + ("spaces",)
GRAPH_CHECKS_KEYS = (("nodes", "homomorphism", "group_order", "candidates_per_generator", "derivation_method",
                      "failure"), ())
ACTION_KEYS = {"monomial": ("kind", "source", "factor"), "block-monomial": ("kind", "tokens", "heads", "blocks"),
               "dense": ("kind", "matrix")}
CHECKS_KEYS = (("layers", "homomorphism", "group_order", "candidates_per_generator", "derivation_method",
                "failure"), ())


def _path(where: str) -> str:
    """The JSON path of a reader's place name: "certificate parameters" -> "certificate.parameters"."""
    return where.replace(" ", ".")

IDENTIFIABILITY_FORMAT = "symeq-identifiability/1"


def _strict(obj, where: str, keys, optional=()) -> dict:
    """check_keys with every key of ``keys`` required (``optional`` ones allowed besides)."""
    check_keys(_dict(obj, where), where, tuple(keys) + tuple(optional), keys)
    return obj
