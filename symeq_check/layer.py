"""What the checker asks of a layer kind (the table: ``symeq_check.model.KINDS``): ``read(spec, r)``, the layer
or None, updating the :class:`Reading` ``r``; ``canonical(spec, shape, normal)``, (its digest form 2 or None, the
shape after it) from ``normal(spec)`` (symeq_check.digest).  And of a read layer: ``forward(x)`` on a tuple of
Fractions, ``degree()``, the capabilities of :class:`Layer`."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Reading:
    """Between layers: the width, (C, H, W) after a conv2d or pooling, the tokens after attention; the layer
    read: its name, JSON path, whether last (None: a graph segment's, free)."""

    width: int
    shape: tuple | None = None
    tokens: int | None = None
    name: str = ""
    at: str = ""
    last: bool | None = False
    pending: object = None   # an average pooling waiting for the next layer (symeq_check.avgpool)
    spec: dict | None = None  # the layer as read, for the digest: the file's, folded, or None


class Kind:
    """The base of the kinds: what a kind declares unless it says otherwise."""

    first_only = False   # only as a model's first layer (attention); elsewhere an unsupported type
    makes_layer = True   # False: read, but no layer (flatten)
    folds_pool = False   # True: a pending average pooling folds into it (conv2d, dense)
    reads_image = False  # True: reads a (C, H, W) image (input_shape inherited from an image node of a graph)
    in_graph, reshape_only = True, False  # attention: not in a graph's segment; flatten: moves no number


class Layer:
    """The base of the read layers' dataclasses: their capabilities, False unless their kind declares them."""

    LEGACY_FIELDS = None     # the field names of digest form 1 (None: its str; symeq_check.digest._legacy)
    token_mixing = False     # attention and its heads: the first layer, cubic
    splits_in_chain = False  # attention: heads and output projection in the theorem's chain (model._chain)
    head_blocks = False      # attention heads: actions in d_v x d_v blocks (block-monomial)
    image = False            # a (C, H, W) output (out_shape): conv2d and pooling
    kernels = False          # conv2d: kernel rows of taps (sources()), checked on them
    pools = False            # maximum over windows (windows)
    dense_matrix = False     # weight, bias: a dense matrix (token-wise included)

    @property
    def out_dim(self) -> int:
        return len(self.weight)

    def degree(self) -> int:
        """Its factor in symeq_check.evaluate._degree: 3 token-mixing (cubic), 1 affine, else len(act) - 1 (a
        polynomial's degree; for "relu" and pooling's "max" the count the checker always made)."""
        return 3 if self.token_mixing else 1 if self.act is None else len(self.act) - 1
