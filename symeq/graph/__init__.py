"""Graph models (docs/graphs.md): the model type (:mod:`.model`), the join op units (:mod:`.ops`), the
derivation of actions along a graph (:mod:`.derive`, level 4) and its verification (:mod:`.verify`,
level 6).  This package's own level is 3 (models); the higher modules are imported by name where needed.
"""

from .model import INPUT, GraphModel, Node, Space

__all__ = ["INPUT", "GraphModel", "Node", "Space"]
