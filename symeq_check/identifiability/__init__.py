"""The identifiability certificates (``symeq-identifiability/1``), one module per method; the dispatch
(:mod:`symeq_check.dispatch`) names them."""
