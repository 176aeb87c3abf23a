"""Activation functions (being split into one module per family; see base.py)."""
from .base import *  # noqa: F401,F403
from .base import ALIASES, LATENT_GROUPS, __all__, __doc__  # noqa: F401
