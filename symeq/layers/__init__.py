"""Layer kinds behind one protocol (:mod:`symeq.layers.base`): dense layers
(:mod:`symeq.layers.dense`, re-exported as ``symeq.models.DenseLayer``), lightning attention and its
heads (:mod:`symeq.layers.attention`) and 2-d convolutions kept as kernels, with actions that are a
channel action times a pixel permutation (:mod:`symeq.layers.conv`; escnn-style networks in
:mod:`symeq.layers.conv.nets`; docs/conv.md).  See ``docs/architecture.md`` for the levels and how to
add a kind."""
