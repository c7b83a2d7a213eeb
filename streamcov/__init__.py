"""streamcov: learning from covariance descriptors at any scale."""
__version__ = "0.1.0"
