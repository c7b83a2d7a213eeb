"""Image classification with covariance operators (paper 004).

* :mod:`.features`: per-pixel features of eq. (38) (numba kernels) and region covariances;
* :mod:`.distances`: approximate (random / quasi-random Fourier) and exact covariance
  operators, Log-HS, HS, Log-Euclidean, Euclidean and Stein distances, kernel K2;
* :mod:`.estimators`: random features of K2 for the scalable (SGD) path;
* :mod:`.evaluation`: protocols and model selection; :mod:`.io`, :mod:`.store`: image
  folders and zarr image stores.
"""
from .distances import (approx_covariance_operator, approx_covariance_operators, approx_log_hs_distance,
                        euclidean_distances, fourier_features, fourier_frequencies, gaussian_gram,
                        gaussian_kernel, hs_distance, log_euclidean_distances, log_hs_distance,
                        log_vectors, pairwise_hs, pairwise_log_hs, pairwise_vector_distances,
                        regularized_log, stein_divergences)
from .estimators import GaussianRandomFeatures
from .features import (PRESETS, FeatureSpec, gabor_bank, get_spec, image_covariances, pixel_features,
                       region_covariance)
from .io import ImageFormatError, ImageSet, load_folders, read_image, scan_folders
from .store import ImageStore, ingest_images, open_image_store

__all__ = [
    "PRESETS", "FeatureSpec", "GaussianRandomFeatures", "ImageFormatError", "ImageSet", "ImageStore",
    "approx_covariance_operator", "approx_covariance_operators", "approx_log_hs_distance",
    "euclidean_distances", "fourier_features", "fourier_frequencies", "gabor_bank", "gaussian_gram",
    "gaussian_kernel", "get_spec", "hs_distance", "image_covariances", "ingest_images",
    "load_folders", "log_euclidean_distances", "log_hs_distance", "log_vectors", "open_image_store",
    "pairwise_hs", "pairwise_log_hs", "pairwise_vector_distances", "pixel_features", "read_image",
    "region_covariance", "regularized_log", "scan_folders", "stein_divergences",
]
