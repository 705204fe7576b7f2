"""Person detection with an ultralytics YOLO model.

``load_person_detector("path/to/best.pt")`` returns a :class:`PersonDetector` whose
:meth:`~PersonDetector.detect` takes RGB ``uint8`` arrays and gives, per image, the boxes of the
person classes as :class:`Box` (corners in the image's own pixels). Detection, preprocessing and
non-maximum suppression are ultralytics' own; this module only loads, picks classes and converts.

Which classes are persons is read from the model's ``names``: by default every class named
``person`` (any case, as in COCO models); ``person_classes`` names them otherwise (e.g. a fall
detector's ``Normal`` and ``Fall``, both persons).

Weights: a local ``.pt`` file, a Hugging Face hub file ``hf:org/repo/path/in/repo.pt``
(``@revision`` after the repository allowed; cached files load offline), or a file name already in
the fairsets cache folder (``<cache>/ultralytics/weights/NAME``). Anything else raises
:class:`~fairsets.models.base.ModelUnavailable` whose message says how to provide the file:
ultralytics' own downloads are switched off.

Ultralytics is imported only when a detector loads, with these environment variables set unless
the caller set them: ``YOLO_OFFLINE=1`` (no connectivity check, analytics or downloads),
``YOLO_AUTOINSTALL=0`` (no ``pip install`` at run time), ``YOLO_VERBOSE=False`` and
``YOLO_CONFIG_DIR=<cache>/ultralytics`` (where it writes ``settings.json``, instead of
``~/.config/Ultralytics``). ``<cache>`` is ``$XDG_CACHE_HOME/fairsets``, by default
``~/.cache/fairsets``. Importing ultralytics replaces ``PIL.Image.open`` and ``torch.save`` for the
whole process (a HEIF retry, save retries): both are put back, so that decoding elsewhere in the
process (the safe opener's format allow-list) is unchanged. It also sets ``OMP_NUM_THREADS=1``
and its CPU device selection lowers torch's thread count; both are put back (the thread count
halves the time per image on a small machine).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import ModelUnavailable, check_device, package_version

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Box", "PersonDetector", "load_person_detector", "ultralytics_cache_dir"]

#: The ultralytics release fairsets is tested with (docs/install.md), from the `persons` extra's
#: ultralytics-opencv-headless (the same package with the headless OpenCV).
ULTRALYTICS_PIN = "ultralytics-opencv-headless==8.4.190"
_INSTALL = "pip install 'fairsets[persons]'"
_HUB_PREFIX = "hf:"
_lock = threading.Lock()
_imported = False


@dataclass(frozen=True)
class Box:
    """One detected person: corners in the original image's pixels, score and class."""

    x1: float
    y1: float
    x2: float
    y2: float
    conf: float
    class_id: int
    class_name: str

    @property
    def xyxy(self) -> tuple[float, float, float, float]:
        return (self.x1, self.y1, self.x2, self.y2)


def ultralytics_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/fairsets/ultralytics`` (default ``~/.cache/fairsets/ultralytics``)."""
    root = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(root) if root else Path.home() / ".cache"
    return base / "fairsets" / "ultralytics"


def _import_ultralytics() -> Any:
    """Import ultralytics offline and quiet, with torchvision's nms working; restore OMP_NUM_THREADS."""
    global _imported
    with _lock:
        if not _imported:
            if importlib.util.find_spec("ultralytics") is None:
                raise ModelUnavailable(
                    f"person detection needs ultralytics, which is not installed: {_INSTALL}"
                )
            os.environ.setdefault("YOLO_OFFLINE", "1")
            os.environ.setdefault("YOLO_AUTOINSTALL", "0")
            os.environ.setdefault("YOLO_VERBOSE", "False")
            os.environ.setdefault("YOLO_CONFIG_DIR", str(ultralytics_cache_dir()))
            from .compat import ensure_torchvision, pure_torchvision_nms

            ensure_torchvision()
            import PIL.Image
            import torch

            omp = os.environ.get("OMP_NUM_THREADS")
            # ultralytics replaces PIL.Image.open (retrying unidentified files with a HEIF plugin it
            # would import or install) and torch.save for the whole process when imported; fairsets'
            # safe image opener must keep Pillow's own behaviour, so both are put back.
            image_open, torch_save = PIL.Image.open, torch.save
            try:
                import ultralytics
                from ultralytics.utils.nms import TorchNMS
            finally:
                PIL.Image.open, torch.save = image_open, torch_save
                if omp is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
            pure_torchvision_nms(TorchNMS.nms)
            _imported = True
    import ultralytics

    return ultralytics


def _looks_like_path(name: str) -> bool:
    return os.path.isabs(name) or name.startswith((".", "~")) or "/" in name or os.sep in name


def _hub_file(spec: str) -> Path:
    """Download (or find in the cache) ``hf:org/repo[@rev]/path/file.pt``."""
    rest = spec[len(_HUB_PREFIX) :].strip()
    parts = rest.split("/", 2)
    if len(parts) < 3 or not all(parts):
        raise ValueError(f"hub weights {spec!r}: expected hf:org/repo/path/in/repo.pt (@revision after repo)")
    repo, revision = f"{parts[0]}/{parts[1]}", None
    if "@" in repo:
        repo, revision = repo.split("@", 1)
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as e:
        raise ModelUnavailable(
            f"hub weights {spec!r} need huggingface_hub: pip install huggingface_hub"
        ) from e
    from .hub import hub_access, hub_errors

    with hub_access() as offline:
        try:
            return Path(
                hf_hub_download(repo, parts[2], revision=revision, local_files_only=offline is not None)
            )
        except hub_errors() as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            why = f"{offline}, and it is not in the Hugging Face cache" if offline else first
            raise ModelUnavailable(
                f"cannot fetch YOLO weights {spec!r} ({why}): download the file on a networked machine "
                "and pass its local path"
            ) from e


def _resolve(weights: str | Path) -> tuple[Path, str]:
    """The local weights file and the model id for ``weights``."""
    if isinstance(weights, Path):
        spec = str(weights)
    else:
        spec = weights.strip()
        if not spec:
            raise ValueError("empty YOLO weights name")
    if spec.startswith(_HUB_PREFIX):
        return _hub_file(spec), spec
    path = Path(spec).expanduser()
    if path.is_file():
        return path, path.name
    if isinstance(weights, Path) or _looks_like_path(spec):
        e = ModelUnavailable(f"YOLO weights file {spec!r} does not exist: pass the path of a YOLO .pt file")
        e.local = True
        raise e
    cached = ultralytics_cache_dir() / "weights" / spec
    if cached.is_file():
        return cached, spec
    raise ModelUnavailable(
        f"YOLO weights {spec!r} are not a local file, not in {str(cached.parent)!r} and ultralytics' "
        f"downloads are off: download {spec!r} on a networked machine and pass its path "
        "(or hf:org/repo/file.pt for a Hugging Face hub file)"
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _person_ids(names: dict[int, str], person_classes: Iterable[str | int] | None) -> dict[int, str]:
    if person_classes is None:
        found = {i: n for i, n in names.items() if n.strip().lower() == "person"}
        if not found:
            raise ValueError(
                f"the model has no class named 'person' (its classes: {names}); "
                "name the person classes with person_classes"
            )
        return found
    by_name = {n: i for i, n in names.items()}
    found = {}
    for c in person_classes:
        i = c if isinstance(c, int) else by_name.get(c)
        if i is None or i not in names:
            raise ValueError(f"person class {c!r} is not one of the model's classes {names}")
        found[i] = names[i]
    if not found:
        raise ValueError("person_classes is empty")
    return dict(sorted(found.items()))


def _to_bgr(image: np.ndarray) -> np.ndarray:
    """An RGB/grayscale/RGBA ``uint8`` array as the contiguous BGR array ultralytics expects."""
    import numpy as np

    a = np.asarray(image)
    if a.dtype != np.uint8:
        raise ValueError(f"images must be uint8 arrays, got {a.dtype}")
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in (1, 3, 4):
        raise ValueError(f"images must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) arrays, got {a.shape}")
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    return np.ascontiguousarray(a[:, :, 2::-1])


@dataclass
class PersonDetector:
    """A loaded YOLO detection model and the classes that count as persons."""

    model: Any
    model_id: str
    weights: Path
    weights_sha256: str
    names: dict[int, str]
    person_classes: dict[int, str]
    device: str = "cpu"
    ultralytics_version: str = field(default="")

    def detect(self, images: Sequence[np.ndarray], conf: float = 0.25, imgsz: int = 640) -> list[list[Box]]:
        """The person boxes of each image, by decreasing confidence.

        Args:
            images: RGB ``uint8`` arrays ``(H, W, 3)``; grayscale ``(H, W)``/``(H, W, 1)`` and RGBA
                ``(H, W, 4)`` (alpha ignored) are accepted too.
            conf: Minimum confidence.
            imgsz: Inference size (ultralytics letterboxes to it).

        Returns:
            One list of :class:`Box` per image, in the input order.
        """
        if not images:
            return []
        import torch

        bgr = [_to_bgr(im) for im in images]
        # ultralytics letterboxes a batch of one shape with minimal padding and a mixed batch to a
        # square: one predict per shape keeps an image's boxes independent of its batch mates.
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, a in enumerate(bgr):
            groups.setdefault(a.shape, []).append(i)
        out: list[list[Box]] = [[] for _ in bgr]
        threads = torch.get_num_threads()
        try:
            for idx in groups.values():
                results = self.model.predict(
                    [bgr[i] for i in idx],
                    conf=conf,
                    imgsz=imgsz,
                    device=self.device,
                    classes=list(self.person_classes),
                    verbose=False,
                )
                for i, r in zip(idx, results, strict=True):
                    out[i] = self._boxes(r)
        finally:
            torch.set_num_threads(threads)
        return out

    def _boxes(self, result: Any) -> list[Box]:
        xyxy = result.boxes.xyxy.cpu().tolist()
        scores = result.boxes.conf.cpu().tolist()
        cls = result.boxes.cls.cpu().tolist()
        return [
            Box(*(float(v) for v in b), conf=float(s), class_id=int(c), class_name=self.names[int(c)])
            for b, s, c in zip(xyxy, scores, cls, strict=True)
            if int(c) in self.person_classes
        ]

    def provenance(self) -> dict[str, Any]:
        """What produced the boxes: model id, weights hash, classes and package versions."""
        return {
            "model_id": self.model_id,
            "weights_sha256": self.weights_sha256,
            "names": {str(i): n for i, n in self.names.items()},
            "person_classes": {str(i): n for i, n in self.person_classes.items()},
            "device": self.device,
            "ultralytics": self.ultralytics_version,
            "torch": package_version("torch"),
        }


def load_person_detector(
    weights: str | Path,
    *,
    device: str = "cpu",
    person_classes: Iterable[str | int] | None = None,
) -> PersonDetector:
    """Load a YOLO detection model for person boxes.

    Args:
        weights: A local ``.pt`` file, ``hf:org/repo/file.pt``, or a file name in the fairsets
            cache folder (see the module docstring).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.
        person_classes: Class names or ids that are persons; default: the classes named ``person``.

    Returns:
        The detector, on ``device``.

    Raises:
        ModelUnavailable: ultralytics is not installed, or the weights are missing here.
        ValueError: A bad device, a model that is not a detector, or unknown person classes.
    """
    path, model_id = _resolve(weights)
    ultralytics = _import_ultralytics()
    import torch

    device = check_device(device)
    threads = torch.get_num_threads()
    try:
        model = ultralytics.YOLO(str(path))
    finally:
        torch.set_num_threads(threads)
    if model.task != "detect":
        raise ValueError(f"YOLO weights {model_id!r} are a {model.task!r} model, not a detector")
    names = {int(i): str(n) for i, n in model.names.items()}
    return PersonDetector(
        model=model,
        model_id=f"ultralytics:{model_id}",
        weights=path,
        weights_sha256=_sha256(path),
        names=names,
        person_classes=_person_ids(names, person_classes),
        device=device,
        ultralytics_version=package_version("ultralytics"),
    )
