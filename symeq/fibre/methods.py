"""The identifiability methods' names, in the order ``auto`` tries them (:mod:`.decide` runs them).

A module of its own, with no imports, so that the command line can list the choices without
loading the methods."""

#: the methods in the order ``auto`` tries them
METHODS = ("classical", "tensor", "jacobian-factors", "jacobian-rank", "groebner")
