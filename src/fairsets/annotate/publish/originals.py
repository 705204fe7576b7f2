"""Boxes back on the original images: the card's re-download instructions and the conversion.

The boxes are pixels of the image as stored in the shard (``image_w`` x ``image_h``). A shard
``fairsets download`` stored unresized (``resize_mode`` ``no``) holds the original: no conversion.
A resized shard holds img2dataset's resized copy (its ``Resizer`` with ``resize_only_if_bigger``
false, albumentations >= 2), made from the original as OpenCV decodes it without EXIF orientation
(``cv2.IMREAD_UNCHANGED``: the size img2dataset records as ``original_width`` x
``original_height``):

* ``keep_ratio``: the whole image scaled so its shorter side is ``S`` = ``resize_size``
  (albumentations' ``SmallestMaxSize``: ``s = S / min(W, H)``, new size ``round(W s)`` x
  ``round(H s)``, Python's rounding, at least 1). A stored point ``(x, y)`` (pixel edges, as the
  boxes are) is the original's ``(x W / image_w, y H / image_h)``: OpenCV's resize maps the
  image's extent onto the new one.
* ``center_crop``: as ``keep_ratio`` to ``rw`` x ``rh`` = ``round(W s)`` x ``round(H s)``, then the
  centre ``S`` x ``S`` square from ``(ox, oy)`` = ``(floor((rw - S) / 2), floor((rh - S) / 2))``
  (albumentations' ``CenterCrop``): ``(x, y)`` is ``((x + ox) W / rw, (y + oy) H / rh)``. What lay
  outside the square was never seen; a box on its edge may cut its person off there.
* img2dataset's other modes (``border``, ``keep_ratio_largest``) are not offered by fairsets and
  not converted; a shard without a download record is converted only where its stored size equals
  the recorded original size (nothing was resized), else :class:`NotConvertible`.

:func:`to_original` does this for one box; :func:`redownload_lines` writes the card's paragraph
from the release manifest's ``originals`` (per shard: mode, size, which hash the download kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fairsets.publish.card import md_code

__all__ = ["NotConvertible", "redownload_lines", "resized_size", "to_original"]

#: Modes whose geometry :func:`to_original` inverts.
CONVERTIBLE = ("no", "keep_ratio", "center_crop")
_NAMES_SHOWN = 8


class NotConvertible(ValueError):
    """A box cannot be mapped to its original: the message says why."""


def resized_size(width: int, height: int, size: int) -> tuple[int, int]:
    """``(rw, rh)``: the size albumentations' ``SmallestMaxSize(size)`` gives a ``width`` x ``height``
    image (``s = size / min(width, height)``; each side ``max(1, round(side * s))`` with Python's
    ``round``, halves to even, as its ``apply`` computes it)."""
    s = size / min(width, height)
    return max(1, round(width * s)), max(1, round(height * s))


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NotConvertible(f"{name} is not recorded ({value!r})")
    return value


def to_original(
    box: Sequence[float],
    *,
    resize_mode: str | None,
    resize_size: int | None,
    image_w: int,
    image_h: int,
    original_width: int | None,
    original_height: int | None,
) -> tuple[float, float, float, float]:
    """``(x1, y1, x2, y2)`` of a stored box in pixels of the original (see the module docstring).

    The arguments are the box's columns and its image row's (``resize_mode``, ``resize_size``,
    ``image_w``, ``image_h``, ``original_width``, ``original_height``). For ``no`` the box is
    returned as it is (pixels of the original decoded with its EXIF orientation applied); for the
    resizing modes the result is in the original's pixels as decoded without EXIF orientation.

    Raises:
        NotConvertible: the mode is not invertible or unknown with a resized image, a size is not
            recorded, or the recorded sizes do not fit the mode's geometry.
    """
    x1, y1, x2, y2 = (float(v) for v in box)
    if resize_mode == "no":
        return x1, y1, x2, y2
    w, h = _positive("image_w", image_w), _positive("image_h", image_h)
    ow = _positive("original_width", original_width)
    oh = _positive("original_height", original_height)
    if resize_mode is None:
        if (w, h) == (ow, oh):
            return x1, y1, x2, y2
        raise NotConvertible(
            f"the shard's resize is not recorded and the stored image ({w}x{h}) is not the original "
            f"({ow}x{oh})"
        )
    if resize_mode not in CONVERTIBLE:
        raise NotConvertible(
            f"resize mode {resize_mode!r} is not one fairsets converts ({', '.join(CONVERTIBLE)})"
        )
    size = _positive("resize_size", resize_size)
    rw, rh = resized_size(ow, oh, size)
    if resize_mode == "keep_ratio":
        if (rw, rh) != (w, h):
            raise NotConvertible(
                f"keep_ratio to {size} gives {rw}x{rh} for {ow}x{oh}, not the stored {w}x{h}"
            )
        return x1 * ow / w, y1 * oh / h, x2 * ow / w, y2 * oh / h
    if (w, h) != (size, size):
        raise NotConvertible(f"center_crop to {size} gives {size}x{size}, not the stored {w}x{h}")
    ox, oy = (rw - size) // 2, (rh - size) // 2
    return (x1 + ox) * ow / rw, (y1 + oy) * oh / rh, (x2 + ox) * ow / rw, (y2 + oy) * oh / rh


def _shards(names: list[str]) -> str:
    shown = ", ".join(md_code(n) for n in names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return ("shard " if len(names) == 1 else "shards ") + shown + (f" and {more} more" if more > 0 else "")


def _upper(text: str) -> str:
    return text[:1].upper() + text[1:]


def _group_key(origin: Any) -> tuple[str | None, int | None, str | None]:
    o = origin if isinstance(origin, Mapping) else {}
    mode = o.get("resize_mode") if o.get("resize_mode") in CONVERTIBLE else None
    size = o.get("image_size")
    size = size if mode in ("keep_ratio", "center_crop") and isinstance(size, int) and size > 0 else None
    if mode in ("keep_ratio", "center_crop") and size is None:
        mode = None
    hashed = o.get("original_hash") if o.get("original_hash") == "sha256" else None
    return mode, size, hashed


_UNRESIZED_CHECK = (
    "its decoded size, EXIF orientation applied, equals `image_w` × `image_h`; the boxes are pixels "
    "of that image and need no conversion."
)
_RESIZED_CHECK = (
    "decoded without applying its EXIF orientation (as img2dataset decodes: OpenCV "
    "`cv2.IMREAD_UNCHANGED`, or Pillow without `ImageOps.exif_transpose`), its size equals "
    "`original_width` × `original_height`."
)


def _group_line(names: list[str], mode: str | None, size: int | None, hashed: str | None) -> str:
    where = _shards(names)
    served = (
        "the sha256 of the bytes the URL serves equals `original_sha256` (recorded when the image was "
        "downloaded, before any resizing) and "
        if hashed
        else ""
    )
    if mode == "no":
        stored = (
            ""
            if hashed
            else "its bytes' sha256 equals `sha256` (a JPEG is stored unchanged; other formats "
            "were re-encoded, so for them only the size can be checked) and "
        )
        keep = f"keep a re-downloaded image only if {served}{stored}{_UNRESIZED_CHECK}"
        return f"- {_upper(where)}, stored as downloaded: {keep}"
    if mode is None:
        return (
            f"- {_upper(where)}: how the stored images were made from their originals was not recorded "
            "(no fairsets download record), so `sha256` and `image_w` × `image_h` describe the stored "
            "bytes only. A box maps to the original only where `original_width` × `original_height` "
            "(when the shard's sidecar gave them) equals `image_w` × `image_h`: nothing was resized and no "
            "conversion is needed; elsewhere the boxes are not convertible."
        )
    no_hash = "" if hashed else " No hash of the original was recorded: only its size can be checked."
    head = (
        f"- {_upper(where)}, resized by img2dataset (`{mode}`, shorter side {size} px): `sha256` and "
        "`image_w` × `image_h` are of the resized copy the boxes were computed on, not of the original. "
        f"Keep a re-downloaded image only if {served}{_RESIZED_CHECK}{no_hash}"
    )
    if mode == "keep_ratio":
        how = (
            " Convert a box to that image's pixels: multiply `x1` and `x2` by `original_width / image_w`, "
            "`y1` and `y2` by `original_height / image_h`."
        )
    else:
        how = (
            f" The shorter side was scaled to {size} px (`s = {size} / min(original_width, "
            "original_height)`, resized size `rw = round(original_width × s)`, `rh = round(original_height "
            f"× s)`, Python's `round`), then the centre {size} × {size} square kept from "
            f"`ox = floor((rw − {size}) / 2)`, `oy = floor((rh − {size}) / 2)`. Convert a box: "
            "`x → (x + ox) × original_width / rw` for `x1`, "
            "`x2`, `y → (y + oy) × original_height / rh` for `y1`, `y2`. People outside that square were "
            "never seen, and a box on its edge may cut its person off there."
        )
    return head + how


def redownload_lines(manifest: Mapping[str, Any]) -> list[str]:
    """The card's paragraph on getting the images back and putting the boxes on them (Markdown lines).

    Made from what ``manifest`` recorded (``originals``: per shard its ``resize_mode``,
    ``image_size`` and ``original_hash``; the shards are those of ``inputs``): one item per kind of
    shard, with the checks a re-downloaded image must pass and the conversion of its boxes.
    """
    originals = manifest.get("originals") if isinstance(manifest.get("originals"), Mapping) else {}
    names = [str(r.get("name")) for r in manifest.get("inputs") or [] if isinstance(r, Mapping)]
    names = names or sorted(str(n) for n in originals)
    groups: dict[tuple[str | None, int | None, str | None], list[str]] = {}
    for name in names:
        groups.setdefault(_group_key(originals.get(name)), []).append(name)
    lines = [
        "**The images are not in this repository.** They belong to their owners and stay where the "
        "original shards got them: the `images` config gives, for every sample, its `url` (where the "
        "shard's downloader fetched it), its caption, the `sha256` and size (`image_w` × `image_h`) of "
        "the image bytes the boxes were computed on, the shard's `resize_mode` and `resize_size`, and, "
        "where the download recorded them, the original's size (`original_width` × `original_height`) "
        "and `original_sha256` (of the bytes the URL served). Re-download the images from those URLs "
        "(for example with img2dataset), then:",
        "",
    ]
    order = sorted(groups, key=lambda k: (k[0] is None, str(k[0]), k[1] or 0, k[2] or ""))
    lines += [_group_line(groups[k], *k) for k in order]
    if any(k[0] in ("keep_ratio", "center_crop") for k in groups):
        lines += [
            "",
            "`fairsets.annotate.publish.originals.to_original(box, **image_row)` does the conversion for a "
            "box joined to its image row (it refuses what cannot be converted).",
        ]
    return lines
