"""The feature store's chunks: checksummed, not compressed; stores written with zstd still read."""
import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from streamcov.data import integrity
from streamcov.errors import StoreError
from streamcov.stream.featurestore import FeatureStore


def codecs(array) -> list[str]:
    return [type(c).__name__ for c in array.compressors]


def filled(path, rows: np.ndarray, block: int = 4) -> FeatureStore:
    n, dim = rows.shape
    bounds = np.arange(0, n + block, block).clip(max=n)
    fs = FeatureStore.open_or_create(path, n, dim, bounds, str(rows.dtype), {"test": 1})
    fs.group["X"][:] = rows
    return fs


def test_features_are_checksummed_and_not_compressed(tmp_path, rng):
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    assert codecs(fs.group["X"]) == ["Crc32cCodec"]
    np.testing.assert_array_equal(fs.read_blocks(0, fs.n_blocks), rows)
    np.testing.assert_array_equal(fs.read_block(1), rows[4:8])
    # the options of every other store keep zstd before the checksum
    assert [type(c).__name__ for c in integrity.array_options()["compressors"]] == ["ZstdCodec", "Crc32cCodec"]


def test_a_flipped_byte_in_an_uncompressed_chunk_is_refused(tmp_path, rng):
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    chunk = tmp_path / "f.zarr" / "X" / "c" / "1" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[5] ^= 0x40                        # a value's bits, not the checksum's
    chunk.write_bytes(bytes(raw))
    np.testing.assert_array_equal(fs.read_block(0), rows[:4])     # other chunks still read
    with pytest.raises(StoreError, match=r"chunk 1/0"):
        fs.read_block(1)


def test_a_store_written_with_zstd_still_reads(tmp_path, rng):
    """Feature stores created before the change (zstd, then the checksum) are read as they are."""
    rows = rng.standard_normal((10, 7))
    path = tmp_path / "old.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.create_array("X", shape=rows.shape, chunks=(4, 7), dtype="float64", fill_value=0,
                   compressors=[ZstdCodec(), Crc32cCodec()], config={"write_empty_chunks": True})
    g.create_array("done", shape=(3,), chunks=(1,), dtype="uint8", fill_value=0)
    g["X"][:] = rows
    g.attrs.update({"bounds": [0, 4, 8, 10], "fingerprint": "{}"})
    fs = FeatureStore(path)
    assert codecs(fs.group["X"]) == ["ZstdCodec", "Crc32cCodec"]
    np.testing.assert_array_equal(fs.read_blocks(0, 3), rows)
