"""streamcov: learning from covariance descriptors at any scale.

The curated API (names resolve lazily, so ``import streamcov`` stays cheap):

* stores and ingestion: :func:`open_reader`, :func:`ingest`, :func:`ingest_images`,
  :class:`SequenceStore`, :class:`ImageStore`, :class:`SyntheticSkeletons`;
* descriptors as scikit-learn transformers: :class:`LogCovariance` (ragged
  skeleton sequences), :class:`CovarianceOperator` and :class:`RegionCovariance` (images);
* explicit feature maps of the Gaussian kernel: :class:`RGWSampler` (paper 000,
  eq. (3)), :class:`GaussianNystroem` (Nystroem features of a Gaussian kernel or of a
  sum of them over a temporal pyramid's windows) and the others of
  :mod:`streamcov.features`; :class:`GlobalCenterScaler`;
* pipelines out of core, locally or on a Dask cluster: :func:`run` (a pipeline
  file or dict), :func:`load_config`, :func:`predict`, :class:`FittedPipeline`;
* linear learners: :class:`LBFGSClassifier` (full-batch L-BFGS; in memory, or
  over a feature store on a cluster with :func:`train_lbfgs`);
* errors: :class:`StreamcovError` and its subclasses.
"""
from __future__ import annotations

import importlib

__version__ = "0.2.0"

_API = {
    "open_reader": "streamcov.data.readers",
    "ingest": "streamcov.data.skeletons",
    "ingest_images": "streamcov.data.images",
    "SequenceStore": "streamcov.data.skeletons",
    "ImageStore": "streamcov.data.images",
    "open_store": "streamcov.data.skeletons",
    "open_image_store": "streamcov.data.images",
    "SyntheticSkeletons": "streamcov.data.synth",
    "LogCovariance": "streamcov.descriptors.transformers",
    "CovarianceOperator": "streamcov.descriptors.transformers",
    "RegionCovariance": "streamcov.descriptors.transformers",
    "RGWSampler": "streamcov.features",
    "OrthogonalRBFSampler": "streamcov.features",
    "QuasiRandomRBFSampler": "streamcov.features",
    "RandomMaclaurinSampler": "streamcov.features",
    "FastfoodSampler": "streamcov.features",
    "GaussianRandomFeatures": "streamcov.features",
    "GaussianNystroem": "streamcov.features",
    "make_feature_map": "streamcov.features.registry",
    "GlobalCenterScaler": "streamcov.preprocessing",
    "GaussianKernelSVC": "streamcov.stream.exact",
    "LBFGSClassifier": "streamcov.stream.lbfgs",
    "train_lbfgs": "streamcov.stream.lbfgs",
    "run": "streamcov.tasks",
    "load_config": "streamcov.tasks.config",
    "predict": "streamcov.stream.predict",
    "FittedPipeline": "streamcov.stream.model",
    "StreamcovError": "streamcov.errors",
    "ConfigError": "streamcov.errors",
    "FormatError": "streamcov.errors",
    "MissingInputError": "streamcov.errors",
    "StoreError": "streamcov.errors",
    "IncompleteStoreError": "streamcov.errors",
    "NotSPDError": "streamcov.errors",
    "ModelError": "streamcov.errors",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'streamcov' has no attribute {name!r}")


def __dir__():
    return __all__
