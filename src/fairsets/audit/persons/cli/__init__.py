"""The commands of the audits of annotation folders: ``fairsets audit persons`` (:mod:`.persons`)
and ``fairsets audit transfer`` (:mod:`.transfer`). :mod:`fairsets.cli` adds them to the ``audit``
group."""

from .persons import audit_persons_cmd
from .transfer import audit_transfer_cmd

__all__ = ["audit_persons_cmd", "audit_transfer_cmd"]
