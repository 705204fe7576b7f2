"""``fairsets annotate``: person boxes, perceived-attribute heads and their verification.

:data:`annotate_app` is the group :mod:`fairsets.cli` adds as ``annotate``; each module registers
its commands on it, in this order:

* :mod:`.persons` — ``persons``;
* :mod:`.heads` — ``train``;
* :mod:`.classify` — ``classify``;
* :mod:`.verify` — ``verify``;
* :mod:`.vote` — ``vote`` (consensus labels from chat-model annotators);
* :mod:`.caption` — ``caption`` (red-box person captions);
* :mod:`.compare` — ``compare-captioners`` (pairwise win rate with a judge model);
* :mod:`.probe` — ``probe`` (what each chat server of an annotators.toml can do).
"""

from __future__ import annotations

import typer

from . import caption, classify, compare, heads, persons, probe, verify, vote

annotate_app = typer.Typer(
    help="Annotate people in image–text shards: person boxes, perceived-attribute heads, verification.",
    no_args_is_help=True,
)

for _module in (persons, heads, classify, verify, vote, caption, compare, probe):
    _module.register(annotate_app)
