"""Descriptors: one vector per sequence or per image, from the covariance of its features.

* :mod:`.skeleton`: the log-covariance descriptor of skeleton sequences
  (paper 000), :class:`LogCovariance`;
* :mod:`.pixels`: per-pixel image features (paper 004, eq. (38));
* :mod:`.operators`: covariance operators of images and their distances
  (approximate and exact Log-HS, HS, E, LogE, Stein);
* :mod:`.image`: image descriptors as vectors, :class:`CovarianceOperator`
  and :class:`RegionCovariance`.
"""
from .image import CovarianceOperator, ImageDescriptor, RegionCovariance
from .skeleton import JointSelection, LogCovariance, log_covariance_vectors

__all__ = ["CovarianceOperator", "ImageDescriptor", "JointSelection", "LogCovariance", "RegionCovariance",
           "log_covariance_vectors"]
