"""symeq: exact verification of layerwise equivariance."""
