"""symeq: exact verification of layerwise equivariance."""

__version__ = "0.1.0"
