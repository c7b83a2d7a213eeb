"""Reading labelled image collections: a folder per class, nested folders allowed.

Layout ``root/<class>/[<sub>/...]<file>``: the first folder level under
``root`` is the class; ``group_level = k`` makes the first k folder levels
the group (e.g. ``2`` for ETH-80's ``<category>/<object>``, used by
leave-objects-out protocols). Files with the extensions in
:data:`IMAGE_EXTENSIONS` are read (Pillow); others are ignored, and folders
named in ``exclude`` are skipped (ETH-80's ``maps``).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._config import progress_bar
from ..errors import (ConfigError, FormatError, case_twins, check_utf8_name, ingest_option, not_the_file,
                      unlistable_folder)

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".bmp", ".tif", ".tiff", ".gif", ".webp", ".pbm",
                    ".pgm", ".ppm", ".pnm", ".tga")
# image files Pillow cannot decode here: refused rather than skipped, so that a class does not quietly lose them
UNREAD_IMAGE_EXTENSIONS = (".heic", ".heif", ".avif", ".jxl", ".svg", ".dng", ".cr2", ".cr3", ".nef", ".arw",
                           ".raw")


@dataclass
class ImageEntry:
    path: Path
    id: str          # path relative to the root, with "/" separators
    label: str
    group: str


@dataclass
class ImageSet:
    """Images in memory with integer labels and groups (codes into the name lists)."""

    images: list
    labels: np.ndarray
    label_names: list[str]
    groups: np.ndarray
    group_names: list[str]
    ids: list[str]
    split: np.ndarray | None = None
    split_names: list[str] = field(default_factory=list)
    source: str = ""

    def __len__(self):
        return len(self.images)


def _natural_key(s: str):
    import re
    # the runs of digits are the odd entries of the split (isdigit() is also true of '²', which int() refuses)
    return [int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", s))]


UNLABELLED = ""   # the label of images found directly under the root when unlabelled ones are allowed
# smaller images are skipped (the derivative filters and a covariance need 2 x 2 pixels): recorded in a store's
# attrs["skipped"] at ingestion, warned about by the in-memory tasks
MIN_SIDE = 2


# the first bytes of the formats streamcov reads (IMAGE_EXTENSIONS)
MAGIC = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"),
         (b"BM", "BMP"), (b"GIF87a", "GIF"), (b"GIF89a", "GIF"))


def _magic(path) -> str | None:
    """The image format whose signature ``path`` starts with, or None (WebP: RIFF....WEBP)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    return next((name for sig, name in MAGIC if head.startswith(sig)), None)


def excluded_images(root, exclude=("maps",)) -> int:
    """How many image files lie under the folders of ``root`` that ``exclude`` names (what
    :func:`scan_folders` leaves out), for the summaries of ``ingest images`` and ``predict``."""
    exclude = set(exclude or ())
    n, seen = 0, set()
    # os.walk's default: a folder it cannot list is passed over (scan_folders, run first, refused those it reads;
    # an excluded one, another user's, is why it was excluded)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:   # a folder reached twice through links (scan_folders refuses it): counted once
            dirnames[:] = []
            continue
        seen.add(real)
        inside = exclude & set(Path(dirpath).relative_to(root).parts)
        if inside:
            n += sum(1 for f in filenames if not f.startswith(".") and Path(f).suffix.lower() in IMAGE_EXTENSIONS)
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return n


# folders an archive tool leaves beside the images, never a class: macOS's resource forks of a zip archive
IGNORED = frozenset({"__MACOSX"})


def scan_folders(root, group_level: int = 1, exclude=("maps",), unlabelled: bool = False,
                 exclude_absent_ok: bool = False, exclude_typed: bool = False) -> list[ImageEntry]:
    """List the images under ``root`` with their class and group, in a stable order.

    With ``unlabelled=True`` images directly under ``root`` are accepted
    with the label :data:`UNLABELLED` (images to predict). Links to folders
    are followed (a link back to a folder already read is refused); hidden
    files and folders (names starting with ``.``: ``.git``, thumbnails) are
    not images of the set, nor are ``__MACOSX`` folders (:data:`IGNORED`) and
    zarr stores (a store ingested into its own image folder).
    ``exclude``: folder names (not paths) skipped at any depth; a name other
    than the default ``maps`` that names no folder is refused (a typo would
    keep what it meant to leave out), unless ``exclude_absent_ok``; ``maps`` too
    when ``exclude_typed`` (typed on the command line, ``--exclude maps``: the
    default's exemption, for ETH-80's segmentation maps, is not for a name the
    user typed there; the ETH-80 pipeline files name it and run on other
    folders too). A class folder without images is
    refused; class names that differ only in case are warned of.
    """
    import unicodedata

    root = Path(root)
    if not root.is_dir():
        if root.exists():
            raise ConfigError(f"{root}: a file, not a folder; give the folder that holds the images"
                              f"{'' if unlabelled else ' (a folder per class)'}")
        raise ConfigError(f"{root}: image folder not found")
    if int(group_level) != group_level or group_level < 1:
        raise ValueError(f"group_level must be an integer >= 1, got {group_level!r}")
    exclude = set(exclude or ())
    for name in exclude:
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ConfigError(f"{ingest_option('exclude', name)}: a folder name to skip (e.g. maps), not a path or "
                              f"an empty name")
    found, seen, excluded, classes, held_excluded, files_seen = [], {}, set(), None, set(), {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=unlistable_folder(root)):
        real = os.path.realpath(dirpath)
        if real in seen:
            parent = os.path.realpath(os.path.dirname(dirpath))
            if parent == real or parent.startswith(real + os.sep):
                raise FormatError(dirpath, "a folder link that leads back to a folder it lies in (a cycle); "
                                           "remove the link")
            raise FormatError(dirpath, f"the same folder as {seen[real]} (one of them is a link): its images "
                                       f"would be read twice; remove one of them")
        seen[real] = dirpath
        left = exclude & set(dirnames)
        excluded |= left
        if left and classes is not None:   # a class that held excluded folders (said if it holds nothing else)
            held_excluded.add(Path(dirpath).relative_to(root).parts[0])
        # a zarr store (a folder holding zarr.json: one written inside the image folder) holds no images and
        # names no class: an image store ingested into its own folder is read again, resumed and reused
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in exclude and d not in IGNORED
                             and not _is_store(dirpath, d))
        if classes is None:   # the first folder walked is the root: its folders are the classes
            classes = list(dirnames)
        for name in filenames:
            p = Path(dirpath) / name
            if name.startswith("."):
                continue
            if p.suffix.lower() in UNREAD_IMAGE_EXTENSIONS:
                raise FormatError(p, f"{p.suffix} images are not read (Pillow has no decoder for them); convert "
                                     f"them to PNG or JPEG, or move them out of the image folder")
            if p.suffix.lower() not in IMAGE_EXTENSIONS:
                continue
            if p.is_symlink() and not p.exists():
                raise FormatError(p, "a broken link (its target does not exist); remove it or restore the target")
            if not p.is_file():
                continue
            real = os.path.realpath(p)
            if real in files_seen:   # a link to an image read elsewhere: one image in two places (two classes)
                raise FormatError(p, f"the same image as {files_seen[real]} (one of them is a link): it would be "
                                     f"read twice, perhaps under two classes; remove one of them")
            files_seen[real] = p
            found.append(p)
    unused = sorted(exclude - excluded - (set() if exclude_typed else {"maps"}))
    if unused and not exclude_absent_ok:
        raise ConfigError(f"{ingest_option('exclude', unused[0])}: no folder of that name under {root}; check the "
                          f"name (folder names are case-sensitive)")
    entries = []
    for p in found:
        rel = p.relative_to(root)
        check_utf8_name(p, rel)   # before anything is read: the in-memory task and predict too
        folders = rel.parts[:-1]
        if not folders and not unlabelled:
            raise FormatError(p, "image directly under the root folder; put each class in "
                                 "its own folder (root/<class>/<file>)")
        # names in one Unicode form: "café" written by macOS (NFD) and by Linux (NFC) is one class
        folders = tuple(unicodedata.normalize("NFC", f) for f in folders)
        label = folders[0] if folders else UNLABELLED
        if folders and len(folders) < group_level:
            raise FormatError(p, f"lies {len(folders)} folder level(s) deep but the group level "
                                 f"({ingest_option('group_level')}) is {group_level}: the group would be "
                                 f"the class; use the level of the folders that name the groups (1: class)")
        group = "/".join(folders[:group_level])
        entries.append(ImageEntry(path=p, id=rel.as_posix(), label=label, group=group))
    if not entries:
        where = "here or in class folders" if unlabelled else "in class folders"
        why = (f"; folders named {', '.join(map(repr, sorted(excluded)))} were left out ({ingest_option('exclude')}; "
               f"by default maps): leave out fewer" if excluded and not found else "")
        raise ConfigError(f"{root}: no images ({', '.join(IMAGE_EXTENSIONS)}) {where}{why}")
    entries.sort(key=lambda e: _natural_key(e.id))
    if not unlabelled:
        _check_classes(root, classes, entries, held_excluded)
    return entries


def _is_store(dirpath, name: str) -> bool:
    """Whether the folder ``name`` of ``dirpath`` is a zarr store (it holds zarr.json): no images, no class."""
    return os.path.isfile(os.path.join(dirpath, name, "zarr.json"))


def _holds_only_stores(folder: Path) -> bool:
    """Whether ``folder`` holds zarr stores and nothing else but their lock files and hidden entries: a folder an
    ingestion made inside the image folder for its store (``src/new/x.zarr``), not a class without images."""
    stores = False
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True, onerror=unlistable_folder(folder)):
        inner = [d for d in dirnames if _is_store(dirpath, d)]
        stores = stores or bool(inner)
        dirnames[:] = [d for d in dirnames if d not in inner and not d.startswith(".")]
        if any(not f.startswith(".") and not f.endswith(".lock") for f in filenames):
            return False
    return stores


def _check_classes(root: Path, folders: list, entries: list, held_excluded: set) -> None:
    """Refuse a class folder without images (the class would vanish from the store and every model
    trained on it, as torchvision's ``ImageFolder`` refuses it; a folder holding only zarr stores is
    not a class: :func:`_holds_only_stores`); warn of class names that differ only in
    case (two classes here, one folder on a case-insensitive file system)."""
    import unicodedata

    held = {e.label for e in entries}
    for name in folders:
        if unicodedata.normalize("NFC", name) not in held and not _holds_only_stores(root / name):
            why = (f" (the folders it holds are left out: {ingest_option('exclude')}; by default maps)"
                   if name in held_excluded else "")
            raise FormatError(root / name, f"a class folder with no images ({', '.join(IMAGE_EXTENSIONS)}){why}: "
                                           f"its class cannot be learned; add its images or remove the folder")
    shown = case_twins(held)
    if shown:
        import warnings

        warnings.warn(f"class folders of {root} that differ only in case are different classes here: {shown}; "
                      f"on a case-insensitive file system (macOS, Windows) they would be one folder. Rename them if "
                      f"they mean one class", stacklevel=3)


ORIENTATION_TAG = 0x0112   # EXIF "Orientation": 1 upright, 2-8 mirrored and/or turned
ORIENTATION = "exif"       # how read_image orients images; image stores and models record it
BITS_PER_SAMPLE = 258      # TIFF tag: one value, or one per channel
PHOTOMETRIC = 262          # TIFF tag: 0 MinIsWhite, 1 MinIsBlack, 2 RGB, ...
SAMPLE_FORMAT = 339        # TIFF tag: 1 unsigned integer, 2 signed integer, 3 float


def _as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def exif_turned(paths) -> list:
    """The images among ``paths`` whose EXIF orientation turns or mirrors them (headers only; unreadable
    files are left to :func:`read_image`)."""
    from PIL import Image

    turned = []
    for p in paths:
        try:
            with Image.open(p) as im:
                if im.getexif().get(ORIENTATION_TAG, 1) != 1:
                    turned.append(p)
        except Exception:   # unreadable: read_image names it when the ingestion reaches it
            continue
    return turned


def _refuse_deep_colour_png(path: Path) -> None:
    """Pillow decodes a 16-bit RGB, RGBA or grey+alpha PNG to 8 bits without a word: refused, as a loss of
    depth (16-bit grey is read at 16 bits). The IHDR chunk gives the bit depth (byte 24) and the colour
    type (byte 25: 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA)."""
    with open(path, "rb") as fh:
        head = fh.read(26)
    if len(head) == 26 and head[12:16] == b"IHDR" and head[24] == 16 and head[25] in (2, 4, 6):
        kind = {2: "RGB", 4: "grey+alpha", 6: "RGBA"}[head[25]]
        raise FormatError(path, f"16-bit {kind} PNG: it would be read at 8 bits; save it as 8-bit RGB, or as "
                                f"16-bit grey if its depth matters")


def _ppm_maxval(im) -> int:
    """The largest sample value of a PPM/PGM/PBM that Pillow opened (its header's maxval; 255 where Pillow
    reads it raw at 8 bits), from the decoder's arguments, before the pixels are loaded."""
    args = im.tile[0][3] if im.tile else None   # (decoder, extents, offset, args): a tuple in Pillow < 11
    if isinstance(args, tuple) and args and isinstance(args[-1], int) and args[-1] > 0:
        return args[-1]
    return 65535 if args == "I;16B" else 255


def _own(helper, *args):
    """``helper(*args)``, one of streamcov's own checks run inside :func:`_read_image`'s handling of Pillow's
    errors: an error of its own code (an IndexError, a TypeError) is raised as a RuntimeError, an internal
    error to report, where the handling would have called the image damaged. Its refusals (FormatError) and
    the system's errors as it reads the file (OSError) keep their meaning."""
    try:
        return helper(*args)
    except (FormatError, OSError):
        raise
    except Exception as exc:
        raise RuntimeError(f"streamcov's {helper.__name__} failed ({exc.__class__.__name__}: {exc})") from exc


def read_image(path) -> np.ndarray:
    """Read one image as uint8/uint16 (h, w) grey or (h, w, 3) RGB.

    Palette, grey+alpha, RGBA, CMYK and YCbCr images are converted; 16-bit
    grey stays uint16; 32-bit integer and float images are refused. An EXIF
    ``Orientation`` tag (cameras and phones store the sensor's rows and say how
    to turn them) is applied, so that images are read upright, as viewers show
    them and as they were labelled; training and ``predict`` share this route.
    Pillow's warnings about a file (``Corrupt EXIF data``) are given again with
    its path: alone they did not say which of thousands of images it was.
    """
    import warnings

    path = Path(path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            return _read_image(path)
    finally:   # outside the recording: the warnings given again are not caught again
        for w in caught:
            warnings.warn(f"{path}: {w.message}", w.category, stacklevel=3)


def _read_image(path: Path) -> np.ndarray:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            frames = getattr(im, "n_frames", 1)
            # a multi-picture JPEG (a phone's HDR gain map, a camera's preview) is one photo: its first picture
            if frames > 1 and im.format != "MPO":
                raise FormatError(path, f"{frames} frames (an animation or a multi-page file); streamcov "
                                        f"reads single-frame images: save the frame to use as its own file")
            if im.format == "PNG":
                _own(_refuse_deep_colour_png, path)
            elif im.format == "PPM" and im.mode == "RGB" and (maxval := _own(_ppm_maxval, im)) > 255:
                raise FormatError(path, f"16-bit colour PPM (maxval {maxval}): it would be read at 8 bits; "
                                        f"save it as 8-bit RGB, or as 16-bit grey if its depth matters")
            elif im.format == "TIFF" and im.mode == "L" and 2 in _as_tuple(im.tag_v2.get(SAMPLE_FORMAT, 1)):
                raise FormatError(path, "signed 8-bit TIFF: it would be read as unsigned (-100 as 156); save it as "
                                        "unsigned 8-bit or 16-bit grey, or as 32-bit float grey")
            elif im.format == "TIFF" and im.mode in ("RGB", "RGBA", "CMYK") and \
                    max(_as_tuple(im.tag_v2.get(BITS_PER_SAMPLE, 8))) > 8:
                raise FormatError(path, f"{max(_as_tuple(im.tag_v2.get(BITS_PER_SAMPLE)))}-bit colour TIFF: it "
                                        f"would be read at 8 bits; save it as 8-bit RGB, or as 16-bit grey if its "
                                        f"depth matters")
            im.load()
            if im.getexif().get(ORIENTATION_TAG, 1) != 1:
                im = ImageOps.exif_transpose(im)
            mode = im.mode
            if mode in ("1", "LA"):
                im = im.convert("L")
            elif mode in ("P", "PA", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"):
                im = im.convert("RGB")
            elif mode.startswith("I;16"):
                a = np.asarray(im, dtype=np.uint16).copy()
                if im.format == "TIFF" and im.tag_v2.get(PHOTOMETRIC) == 0:   # MinIsWhite: 0 is white
                    a = np.uint16(65535) - a   # as Pillow reads an 8-bit MinIsWhite TIFF (it gave 16-bit ones raw)
                return a
            elif mode == "I" and im.format == "PPM":   # a 16-bit PGM: Pillow gives 0..65535 as 32-bit integers
                return np.asarray(im).astype(np.uint16)
            elif mode == "F":   # 32-bit float grey (scientific TIFF): stored as float32
                a = np.asarray(im, dtype=np.float32).copy()
                if not np.isfinite(a).all():
                    raise FormatError(path, "float image with NaN or infinite pixels")
                return a
            elif mode not in ("L", "RGB"):
                raise FormatError(path, f"unsupported image mode {mode!r}; save it as 8/16-bit "
                                             f"grey, 8-bit RGB or 32-bit float grey")
            a = np.asarray(im)
    except FormatError:
        raise
    except FileNotFoundError:
        raise not_the_file(FormatError(path, "file not found")) from None
    except UnidentifiedImageError:
        if path.is_file() and path.stat().st_size == 0:
            raise FormatError(path, "cannot decode image: an empty file (0 bytes), an interrupted copy? "
                                    "copy it again or remove it") from None
        kind = _magic(path)
        if kind == "TIFF":   # a valid TIFF of a kind Pillow does not decode is as likely as a damaged one
            raise FormatError(path, "cannot decode image: it starts as a TIFF file but Pillow cannot read it: a "
                                    "TIFF variant it does not decode (64 or 16-bit float, float colour, extra "
                                    "channels) or a damaged file; save it as 8 or 16-bit integer, or 32-bit float "
                                    "grey TIFF, or copy it again") from None
        if kind is not None:   # the signature of an image format Pillow reads: the rest is damaged
            raise FormatError(path, f"cannot decode image: it starts as a {kind} file but cannot be read; the file "
                                    f"is damaged or cut short: copy it again, or remove it from the folder") from None
        raise FormatError(path, "cannot decode image: not an image file Pillow can read; save it as PNG, JPEG "
                                "or TIFF (8 or 16-bit, or 32-bit float grey)") from None
    except Image.DecompressionBombError as exc:
        raise FormatError(path, f"too large to decode safely ({exc}); cut it into tiles") from None
    except PermissionError:
        raise not_the_file(FormatError(path, "cannot read it (permission denied); make it readable, or remove it "
                                             "from the folder")) from None
    except (OSError, SyntaxError, ValueError, TypeError, IndexError, KeyError, EOFError, struct.error) as exc:
        # a codec this Pillow lacks, or a feature of the format it does not read: the file may be sound; anything
        # else (truncated data, a decoder error, a broken stream; Pillow's parsers of damaged TIFF and GIF files
        # raise TypeError, IndexError, ...) is a damaged file
        unread = any(w in str(exc).lower() for w in ("not available", "unsupported", "not supported", "unknown"))
        fix = ("a variant of the format this Pillow cannot read, or a damaged file: save it as PNG, JPEG or TIFF "
               "(8 or 16-bit, or 32-bit float grey), copy it again, or remove it from the folder" if unread else
               "the file is damaged or cut short: copy it again, or remove it from the folder")
        error = FormatError(path, f"cannot decode image ({exc.__class__.__name__}: {exc}); {fix}")
        # an OSError with an errno is the system's (an I/O error while Pillow read), not the file's contents
        raise (not_the_file(error) if isinstance(exc, OSError) and exc.errno is not None else error) from None
    if a.ndim not in (2, 3) or a.shape[0] == 0 or a.shape[1] == 0:
        raise FormatError(path, f"empty or malformed image of shape {a.shape}")
    return np.ascontiguousarray(a)


def _codes(values: list[str]):
    names = sorted(set(values), key=_natural_key)
    index = {n: i for i, n in enumerate(names)}
    return np.array([index[v] for v in values], dtype=np.int32), names


def check_float_scale(floats, integer_image) -> None:
    """Float images (``(path, pixels)`` pairs, pixels read as they are) among integer ones (``integer_image``,
    the path of one, or None), which are read as fractions of their range (0 to 1): a float image with values
    outside 0 to 1 would lie on another scale, and is refused (FormatError naming it). One rule for a store
    and for the in-memory task."""
    if integer_image is None:
        return
    for p, a in floats:
        if a.min() < 0 or a.max() > 1:
            raise FormatError(p, f"float pixels from {float(a.min()):.4g} to {float(a.max()):.4g}, but "
                                 f"{integer_image} (and maybe others) has integer pixels, stored as fractions of "
                                 f"their range (0 to 1): the two would lie on different scales; scale the float "
                                 f"images to 0 to 1, or convert them to integers")


def load_folders(root, group_level: int = 1, exclude=("maps",), progress: bool = False) -> ImageSet:
    """Read every image under ``root`` (see module docstring) into an :class:`ImageSet`."""
    entries = scan_folders(root, group_level=group_level, exclude=exclude)
    with progress_bar(entries, progress, desc=f"read {Path(root).name}", unit="img") as it:
        images = [read_image(e.path) for e in it]
    # as ingestion's pixel type: float images on another scale than the integer ones beside them are refused
    check_float_scale([(e.path, a) for e, a in zip(entries, images) if a.dtype.kind == "f"],
                      next((e.path for e, a in zip(entries, images) if a.dtype.kind != "f"), None))
    small = [i for i, img in enumerate(images) if min(img.shape[:2]) < MIN_SIDE]
    if small:   # as ingestion skips them: the same images in memory and in a store
        import warnings

        shown = "; ".join(f"{entries[i].id}: {images[i].shape[0]} x {images[i].shape[1]} pixels" for i in small[:3])
        warnings.warn(f"{len(small)} image(s) of {root} skipped, smaller than {MIN_SIDE} x {MIN_SIDE} pixels "
                      f"({shown}{' ...' if len(small) > 3 else ''})", stacklevel=2)
        gone = set(small)
        keep = [i for i in range(len(images)) if i not in gone]
        entries, images = [entries[i] for i in keep], [images[i] for i in keep]
        if not entries:
            raise FormatError(root, f"every image is smaller than {MIN_SIDE} x {MIN_SIDE} pixels, the least a "
                                    f"covariance of pixel features needs; give images of at least that size")
    labels, label_names = _codes([e.label for e in entries])
    groups, group_names = _codes([e.group for e in entries])
    return ImageSet(images=images, labels=labels, label_names=label_names, groups=groups,
                    group_names=group_names, ids=[e.id for e in entries], source=str(root))


def _skimage_image(data, name: str) -> np.ndarray:
    """scikit-image's bundled image ``name`` (a function of ``skimage.data``), refused in one line when there is
    none of that name, it is not an image (``data_dir``, ``lfw_subset``, ...) or it is not bundled (``eagle``,
    ``cells3d``, ...: downloaded on first use, which needs the optional ``pooch`` and a network; these were
    tracebacks)."""
    from ..errors import did_you_mean

    fix = "give names of images bundled with scikit-image (brick, grass, gravel, ...)"
    fn = getattr(data, name, None) if name in getattr(data, "__all__", ()) and name != "download_all" else None
    if not callable(fn):
        known = [n for n in getattr(data, "__all__", ()) if callable(getattr(data, n, None)) and n != name]
        raise ConfigError(f"data.textures: skimage.data has no image {name!r}{did_you_mean(name, known)}; {fix}")
    try:
        img = np.asarray(fn())
    except Exception as exc:   # noqa: BLE001 - a third party's loader: a download it cannot make, arguments
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"data.textures: skimage.data.{name} cannot be loaded here ({why[:160]}); {fix}") from None
    if img.dtype.kind not in "buif" or not (img.ndim == 2 or img.ndim == 3 and img.shape[2] in (3, 4)):
        raise ConfigError(f"data.textures: skimage.data.{name} is not an image (an array of shape {img.shape}, "
                          f"{img.dtype}); {fix}")
    return img


def skimage_textures(names=("brick", "grass", "gravel"), patch: int = 64, max_per_class=None) -> ImageSet:
    """scikit-image's bundled texture images cut into non-overlapping square patches (no download)."""
    import skimage.data

    images, labels, groups, ids = [], [], [], []
    for c, name in enumerate(names):
        img = _skimage_image(skimage.data, name)
        if patch > min(img.shape[:2]):
            raise ConfigError(f"data.patch = {patch}: larger than skimage.data.{name} ({img.shape[0]} x "
                              f"{img.shape[1]} pixels); choose a patch of at most {min(img.shape[:2])}")
        k = 0
        for y in range(0, img.shape[0] - patch + 1, patch):
            for x in range(0, img.shape[1] - patch + 1, patch):
                if max_per_class is not None and k >= max_per_class:
                    break
                images.append(np.ascontiguousarray(img[y:y + patch, x:x + patch]))
                labels.append(c)
                groups.append(c)
                ids.append(f"{name}/{y}_{x}")
                k += 1
    return ImageSet(images=images, labels=np.array(labels, dtype=np.int32), label_names=list(names),
                    groups=np.array(groups, dtype=np.int32), group_names=list(names), ids=ids,
                    source="skimage.data")
