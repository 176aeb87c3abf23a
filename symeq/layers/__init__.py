"""Layer kinds behind one protocol (:mod:`symeq.layers.base`): dense layers
(:mod:`symeq.layers.dense`, re-exported as ``symeq.models.DenseLayer``), lightning attention and its
heads (:mod:`symeq.layers.attention`) and 2-d convolutions as dense layers with shared weights
(:mod:`symeq.layers.conv`).  See ``docs/architecture.md`` for the levels and how to add a kind."""
