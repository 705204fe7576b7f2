"""The audit commands: ``fairsets audit`` on a published dataset (``vlm``, ``utility``:
:mod:`.models`), ``fairsets card`` (:mod:`.card`) and ``fairsets debias`` (:mod:`.debias`), with the
checks they share before any work (:mod:`.checks`). The audits of annotation folders, ``persons``
and ``transfer``, are in :mod:`fairsets.audit.persons.cli`.

:mod:`fairsets.cli` adds :data:`audit_app`, :data:`card_app` and :data:`debias_app` as groups.
"""

from .card import card_app
from .checks import MODEL_HELP, PRETRAINED_HELP, check_dataset, check_out, load_vlm_or_die
from .debias import debias_app
from .models import audit_app

__all__ = [
    "MODEL_HELP",
    "PRETRAINED_HELP",
    "audit_app",
    "card_app",
    "check_dataset",
    "check_out",
    "debias_app",
    "load_vlm_or_die",
]
