"""Candidates for the audit example: six real people from photographs that ship inside packages.

``write_candidates(listing)`` writes images and a CSV listing next to ``listing`` (a build passes
``OUT/.fairsets/prepared/example-audit-candidates/candidates.csv``; nothing is written beside the
recipe). Six people, two per state, so the identity-disjoint 50/50 split puts one person of every
state in ``train`` and the other in ``test``, and both splits hold three groups with images:

* NASA's portrait of Eileen Collins (``skimage.data.astronaut``, public domain) and the US Navy's
  portrait of Grace Hopper (matplotlib's ``grace_hopper.jpg``, public domain), as in the first
  example;
* four men cut out of the two sample photographs that ship in the ``ultralytics`` wheel
  (``ultralytics/assets/zidane.jpg``: the two men, one crop each; ``assets/bus.jpg``: the two
  passengers on the left, one crop each). The crop boxes are fixed below; each crop holds one
  face that the paper's res10 detector finds with confidence >= 0.98.

Licences, as they are known: Ultralytics distributes the two photographs in its package under
the package's licence, AGPL-3.0, and names no photographer. That is not a licence fairsets'
policy publishes, so the recipe has no ``license`` step and its card says the build is a local
demonstration that must not be published. The ``ultralytics`` package is only read as files
(never imported); the ``persons`` extra brings it (``ultralytics-opencv-headless``, the same
``ultralytics`` package with the headless OpenCV).

The ``state`` values are assigned for the demonstration; they say nothing about the people.
The ``gender`` column records the gender of each portrait as presented in its source's caption
(NASA, the US Navy) or as it appears (the four men), for an audit by ``--attribute gender``.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path


def _example():
    """The example's builder beside this file (its listing writer is shared)."""
    spec = importlib.util.spec_from_file_location(
        "fairsets_example_builder", Path(__file__).with_name("example.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ULTRALYTICS = "https://github.com/ultralytics/ultralytics/tree/main/ultralytics/assets"
# (file in ultralytics/assets, crop box (left, top, right, bottom), identity, state)
CROPS = (
    ("zidane.jpg", (640, 0, 1280, 720), "ultralytics-zidane-right", "Kerala"),
    ("zidane.jpg", (300, 100, 800, 720), "ultralytics-zidane-left", "Assam"),
    ("bus.jpg", (4, 327, 257, 618), "ultralytics-bus-1", "Goa"),
    ("bus.jpg", (176, 345, 381, 606), "ultralytics-bus-2", "Goa"),
)


def _assets() -> Path:
    spec = importlib.util.find_spec("ultralytics")  # finds the folder; does not import the package
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the audit example needs the sample photos of the ultralytics package: "
            "pip install 'fairsets[persons]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "assets"


def _jpeg(img, quality: int = 95) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def write_candidates(listing: Path) -> None:
    """Write the audit example's candidate images and their CSV listing (idempotent)."""
    from matplotlib import cbook
    from PIL import Image
    from skimage import data as skdata

    folder = listing.parent / "images"
    folder.mkdir(parents=True, exist_ok=True)
    astronaut = Image.fromarray(skdata.astronaut())
    buf = io.BytesIO()
    astronaut.save(buf, format="PNG")
    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = fh.read()
    files = [
        (
            "astronaut.png",
            buf.getvalue(),
            "Kerala",
            "female",
            "eileen-collins",
            "public-domain",
            "NASA",
            "https://commons.wikimedia.org/wiki/File:Eileen_Collins.jpg",
            "Eileen Collins",
        ),
        (
            "grace_hopper.jpg",
            hopper,
            "Assam",
            "female",
            "grace-hopper",
            "public-domain",
            "James S. Davis, US Navy",
            "https://commons.wikimedia.org/wiki/File:Commodore_Grace_M._Hopper,_USN_(covered).jpg",
            "Grace Hopper",
        ),
    ]
    assets = _assets()
    for source, box, ident, state in CROPS:
        with Image.open(assets / source) as im:
            crop = im.convert("RGB").crop(box)
        files.append(
            (
                f"{ident}.jpg",
                _jpeg(crop),
                state,
                "male",
                ident,
                "AGPL-3.0 (as distributed in the ultralytics package)",
                "unknown (sample photo of the ultralytics package)",
                f"{ULTRALYTICS}/{source}",
                f"Crop {box} of ultralytics/assets/{source}",
            )
        )
    _example().write_listing(listing, folder, files)
