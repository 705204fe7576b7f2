"""Work around a torchvision whose compiled operators do not load.

A torchvision wheel built for another torch or CUDA (e.g. a CUDA build next to a CPU torch) fails
at import with ``RuntimeError: operator torchvision::nms does not exist``: its C++ extension does
not load, and the import then registers a fake kernel for ``torchvision::nms``, which was never
defined. open_clip imports torchvision for its image transforms, and transformers imports it once
it is installed, so neither loads.

:func:`ensure_torchvision` defines ``torchvision::nms`` and ``torchvision::qnms`` in pure PyTorch
and imports torchvision again. Image transforms then work; any other compiled operator
(``roi_align``, ``deform_conv2d``, …) still raises when called. Set
``FAIRSETS_TORCHVISION_FALLBACK=0`` to get an error instead of the fallback.

The fallback is logged at DEBUG level only, not as a warning: it is the expected
state of the CPU test environment (``tests/constraints-cpu.txt`` pins PyPI's torchvision 0.28.0,
whose compiled operators are linked against the CUDA torch), nothing fairsets does needs the other
operators, and a warning on every model command would teach users to ignore warnings. Installing
the matching ``+cpu`` torchvision (docs/install.md) removes the fallback altogether.

The registered ``torchvision::nms`` does not make ``torchvision.ops.nms`` work: that function checks
first that the compiled operators loaded and raises "Couldn't load custom C++ ops" otherwise.
:func:`pure_torchvision_nms` (called by the YOLO adapter, whose ultralytics calls
``torchvision.ops.nms``) replaces it with a given pure-PyTorch nms, only when the compiled
operators are missing.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from .base import ModelUnavailable

__all__ = ["FALLBACK_ENV", "ensure_torchvision", "pure_torchvision_nms"]

log = logging.getLogger(__name__)

FALLBACK_ENV = "FAIRSETS_TORCHVISION_FALLBACK"

_lock = threading.Lock()
_done = False
# The library that holds the pure-PyTorch operators: the definitions live as long as this object.
_lib: Any = None


def ensure_torchvision() -> None:
    """Make ``import torchvision`` work, or raise :class:`ModelUnavailable`.

    Returns at once if torchvision imports (or is not installed: transformers works without it).
    If its compiled operators are missing, registers pure-PyTorch ``nms``/``qnms`` and imports it
    again, logging one DEBUG message (no warning: see the module docstring); with
    ``FAIRSETS_TORCHVISION_FALLBACK=0`` raises instead. Cheap after the first successful call.

    Raises:
        ModelUnavailable: torchvision's operators are missing and the fallback is switched off.
    """
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        try:
            import torchvision  # noqa: F401
        except ModuleNotFoundError as e:
            if e.name != "torchvision":
                raise
        except RuntimeError as e:
            if "torchvision::" not in str(e):
                raise
            _fallback(e)
        _done = True


def pure_torchvision_nms(impl: Any) -> bool:
    """Make ``torchvision.ops.nms`` call ``impl`` when torchvision's compiled operators are missing.

    Call after :func:`ensure_torchvision`. ``impl(boxes, scores, iou_threshold)`` must behave as
    ``torchvision.ops.nms`` (e.g. ultralytics' ``TorchNMS.nms``, which gives the same indices).
    Nothing changes when torchvision is not installed or its operators loaded.

    Returns:
        Whether ``torchvision.ops.nms`` (and ``torchvision.ops.boxes.nms``) now call ``impl``.
    """
    try:
        import torchvision
        import torchvision.ops.boxes
        from torchvision.extension import _has_ops
    except ModuleNotFoundError as e:
        if e.name != "torchvision":
            raise
        return False
    if _has_ops():
        return False
    torchvision.ops.nms = torchvision.ops.boxes.nms = impl
    log.debug("torchvision's compiled operators are missing: torchvision.ops.nms calls %r", impl)
    return True


def _fallback(error: RuntimeError) -> None:
    import torch

    if os.environ.get(FALLBACK_ENV, "").strip() == "0":
        _forget_torchvision()
        raise ModelUnavailable(
            f"torchvision's compiled operators are missing ({error}): the installed torchvision was "
            f"built for another torch/CUDA. Install a torchvision build matching torch {torch.__version__}, "
            f"or unset {FALLBACK_ENV} to let fairsets register a pure-PyTorch nms (docs/install.md)."
        ) from error
    _forget_torchvision()
    try:
        _register_ops()
        import torchvision  # noqa: F401
    except RuntimeError as e:
        _forget_torchvision()
        raise ModelUnavailable(
            f"torchvision does not import even with fairsets' pure-PyTorch nms ({e}). "
            f"Install a torchvision build matching torch {torch.__version__}."
        ) from e
    log.debug(
        "torchvision's compiled operators are unavailable (a build for another torch/CUDA); fairsets "
        "registered a pure-PyTorch nms so that image transforms work. Other compiled operators "
        "(roi_align, deform_conv2d, ...) raise when called. Install a torchvision matching torch %s "
        "to remove this (docs/install.md).",
        torch.__version__,
    )


def _forget_torchvision() -> None:
    """Drop the half-imported torchvision so that the next import starts afresh."""
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]


def nms(dets: Any, scores: Any, iou_threshold: float) -> Any:
    """Greedy non-maximum suppression, as ``torchvision.ops.nms``.

    Args:
        dets: Boxes ``(N, 4)`` as ``x1, y1, x2, y2``.
        scores: Scores ``(N,)``.
        iou_threshold: Boxes overlapping a kept box by more than this IoU are dropped.

    Returns:
        int64 indices of the kept boxes, by decreasing score.
    """
    import torch

    if dets.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=dets.device)
    boxes = dets.to(torch.float64) if not dets.is_floating_point() else dets
    x1, y1, x2, y2 = boxes.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = torch.argsort(scores, descending=True, stable=True)
    suppressed = torch.zeros(dets.shape[0], dtype=torch.bool, device=dets.device)
    keep: list[int] = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        inter = w * h
        iou = inter / (areas[i] + areas - inter)
        suppressed |= iou > iou_threshold
    return torch.tensor(keep, dtype=torch.int64, device=dets.device)


def _qnms(dets: Any, scores: Any, iou_threshold: float) -> Any:
    return nms(dets.dequantize(), scores.dequantize(), iou_threshold)


def _register_ops() -> None:
    global _lib
    if _lib is not None:
        return
    import torch

    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.impl("nms", nms, "CompositeExplicitAutograd")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.impl("qnms", _qnms, "CompositeExplicitAutograd")
    _lib = lib
