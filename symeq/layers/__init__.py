"""Layer kinds: dense layers (``symeq.models.DenseLayer``), lightning attention
(:mod:`symeq.layers.attention`) and 2-d convolutions as dense layers with shared weights
(:mod:`symeq.layers.conv`).  See ``docs/architecture.md`` for the levels and how to add a kind."""
