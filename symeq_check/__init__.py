"""Independent certificate checker: ``python -m symeq_check CERT MODEL``.

It re-verifies a certificate written by symeq (``symeq-certificate/2``, the older ``/1``, or
``symeq-identifiability/1``) against a ``symeq-model/1`` file and trusts nothing but the Python standard
library: numbers are :class:`fractions.Fraction`, files are read with :mod:`json`, and it imports nothing of
symeq and no sympy or numpy, so that a bug in the prover (or in a Groebner engine) cannot make it
accept a wrong certificate (one optional step, the rank mod p of a ``jacobian-rank`` certificate, may be
handed to an accelerator installed through the hook ``accel``, outside the trusted core: ``symeq check``
installs python-flint's; ``SYMEQ_CHECK_STDLIB=1`` turns it off).  Its axioms (the real activations' identity table) are its own copy.  It runs
as a copied directory or as one zipapp file: ``python -m symeq_check --zipapp symeq_check.pyz`` writes the
file, ``python3 -I symeq_check.pyz CERT MODEL`` runs it.  Exit 0 accepted, 1 rejected, 2 malformed input or
a certificate of another model, 3 nothing verifiable.  Text output numbers layers, generators, rows,
neurons, heads and outputs from 1; JSON paths in messages keep the arrays' 0-based indices.

The map (one subject per module; the lower ones first, each imports only those above it):

==============================  ==========================================================================
``_numbers``                    exact numbers: Fractions from JSON, vectors, matrices, :class:`CheckError`
``schema``                      format names, allowed/required keys, :func:`check_keys`
``report``                      :class:`CheckReport`, the outcome and its exit code
``real``                        real activations: the identity table (the axioms), reading, exact values
``activations``                 ReLU and polynomial activations, exact evaluation, the one-neuron identity
``algebra``                     dense and sparse exact matrices, group closure, homomorphism, minors
``layer``                       what a layer kind declares (reading, digest form 2) and what a read layer answers
``attention``                   lightning attention: its kind, heads, forward, block-monomial actions
``pooling``                     maxpool2d and group_pool: their kinds, windows, forward, max(P x) = Q max(x)
``conv``                        conv2d on its kernels, flatten: their kinds, geometry, forward, channel-pixel actions
``avgpool``                     avgpool2d and global_avgpool: kinds that fold into the next conv2d or dense layer
``model``                       a model file: the table of layer kinds ``KINDS`` (dense declared here), the layers
                                (kept with their JSON), group, the theorem's chain
``digest``                      ``layers_sha256``: the canonical form of the declared layers (form 2), form 1
``evaluate``                    exact evaluation (each layer's ``forward``), the same function (lattices, forms)
``intervals``                   interval arithmetic, enclosures, the witnesses of ``not-equivariant``
``layerwise``                   ``symeq-certificate/1``, ``/2``: Theorem 4.1 at theta
``graph``                       graph models: strict reading, ``graph_sha256``, forward passes, their certificates
``identifiability.tensor``      one hidden layer, Kruskal (no ``method``)
``identifiability.deep``        ``jacobian-factors``: two or three hidden layers
``identifiability.classical``   ``sussmann``, ``fefferman``: real tanh and sigmoid networks
``identifiability.rank``        ``jacobian-rank``, ``locally-identifiable``: Jacobian rows mod p
``identifiability.family``      ``jacobian-rank``, ``not-identifiable``: an exact family in the fibre
``identifiability.graph_rank``  ``jacobian-rank`` of a graph model (``graph_sha256``): rows along the graph
``accel``                       the hook for an optional rank mod p in ``rank``, outside the trusted core
``selftest``                    the self-test of the axioms (``python -m symeq_check --self-test``)
``dispatch``                    the table of checkers: (format, method, verdict) -> checker
``command``                     files, argument order, ``main``
==============================  ==========================================================================

The kernel a ``layerwise-equivariant`` verdict rests on is ``layerwise`` and the modules its check of that
verdict runs: ``_numbers``, ``schema``, ``report``, ``real``, ``activations``, ``algebra``, ``layer``,
``attention``, ``pooling``, ``conv``, ``avgpool``, ``model``, ``digest``, ``evaluate``, plus ``dispatch`` and
``command``, and for a graph model ``graph`` (:data:`KERNEL`) -- about 3 480 lines with their docstrings and
comments (about 2 520 lines of code), of which ``conv``, ``pooling``, ``avgpool`` and ``attention`` are 930 that a
dense model never reaches (but their kinds' declarations) and ``graph`` 560 that a chain never reaches;
tests/test_architecture.py keeps it under 3 500.  ``intervals`` (imported by ``layerwise`` and ``graph`` for ``not-equivariant`` witnesses) and
the identifiability modules are not part of it.
"""
from ._numbers import CheckError, parse_number
from .command import check_files, main
from .digest import layers_digest
from .graph import graph_digest, read_graph_model
from .dispatch import CERTIFICATE_CHECKERS, check_certificate
from .report import CheckReport
from .schema import (CERT_FORMAT, CERT_FORMAT_DENSE, IDENTIFIABILITY_FORMAT, MODEL_FORMAT, check_keys,
                     close_names)

#: the modules a ``layerwise-equivariant`` verdict rests on (the audited kernel, see above)
KERNEL = ("_numbers", "schema", "report", "real", "activations", "algebra", "layer", "attention", "pooling", "conv",
          "avgpool",
          "model", "digest", "evaluate", "layerwise", "graph", "dispatch", "command")

__all__ = ["CERTIFICATE_CHECKERS", "CERT_FORMAT", "CERT_FORMAT_DENSE", "CheckError", "CheckReport",
           "IDENTIFIABILITY_FORMAT", "MODEL_FORMAT", "check_certificate", "check_files", "check_keys",
           "close_names", "graph_digest", "layers_digest", "main", "parse_number", "read_graph_model"]
