"""``fairsets geo``: geo-profile captions (caption → country), evaluate methods, the
entity-presence filter and the paper's analyses.

:data:`geo_app` is the group :mod:`fairsets.cli` adds as ``geo``; each module registers one
family of commands on it, in this order:

* :mod:`.profile` — ``profile``, ``explain``, ``methods``;
* :mod:`.evaluate` — ``evaluate``;
* :mod:`.entity` — ``entity-train``, ``entity-filter``;
* :mod:`.analyze` — ``analyze``, ``reference``.
"""

from __future__ import annotations

import typer

from . import analyze, entity, evaluate, profile

geo_app = typer.Typer(
    help="Geo-profile captions: caption → country, evaluation, entity filter, analyses.", no_args_is_help=True
)

for _module in (profile, evaluate, entity, analyze):
    _module.register(geo_app)
