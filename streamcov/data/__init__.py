"""Stores and readers.

Ragged zarr v3 stores of skeleton sequences (:mod:`.skeletons`) and images
(:mod:`.images`), both written by the one resumable writer of
:mod:`.ragged`; the readers of raw archives (:mod:`.readers`, one module per
format), image folders (:mod:`.imageio`) and the built-in generator of
skeleton actions (:mod:`.synth`).
"""
from .images import ImageStore, ImageStoreWriter, ingest_images, open_image_store
from .ragged import store_status
from .skeletons import SequenceStore, SequenceStoreWriter, ingest, open_store

__all__ = ["ImageStore", "ImageStoreWriter", "SequenceStore", "SequenceStoreWriter", "ingest",
           "ingest_images", "open_image_store", "open_store", "store_status"]
