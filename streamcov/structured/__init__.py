"""Structured prediction with learned polynomial kernel transformations (paper 003).

:class:`HSICKernelTransform` learns monomial or Gegenbauer expansions of input
and output Gaussian kernels that maximize HSIC; :class:`TwinGaussianProcess`
predicts structured outputs with the KL or HSIC twin-GP criterion, optionally
on the learned kernels (HOTGP / HOHSIC).
"""
from __future__ import annotations

from .hsic import (HSICKernelTransform, PolynomialKernelMap, basis_derivatives,
                   basis_polynomials, center_kernel, empirical_hsic, hsic_matrix,
                   kernel_alignment, median_heuristic_gamma, rbf_kernel, top_singular_pair)
from .tgp import TwinGaussianProcess, hsic_objective, kl_objective

__all__ = ["HSICKernelTransform", "PolynomialKernelMap", "TwinGaussianProcess",
           "basis_derivatives", "basis_polynomials", "center_kernel", "empirical_hsic",
           "hsic_matrix", "hsic_objective", "kernel_alignment", "kl_objective",
           "median_heuristic_gamma", "rbf_kernel", "top_singular_pair"]
