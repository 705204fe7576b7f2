"""Publishing a build: the output layout under ``OUT/``.

::

    OUT/shards/{variant}/{split}-{NNNNN}.tar   WebDataset: {key}.jpg + {key}.json   (shards.py)
    OUT/metadata/{variant}/{split}.parquet     one row per published sample         (core/tables.py)
    OUT/rejects.parquet                        one row per candidate not published   (core/tables.py)
    OUT/README.md                              Hugging Face dataset card             (card/)
    OUT/croissant.json                         Croissant 1.0 with checksums          (croissant.py)
    OUT/ATTRIBUTION.md                         credit lines for CC BY / BY-SA images (attribution.py)
    OUT/manifest.json                          recipe, versions, counts, file hashes (manifest.py)

Variants are ``imbalanced``, ``balanced`` and ``augmented``; splits are ``train`` and ``test``.
Every file is written atomically (``core/atomic.py``) and deterministically: the same inputs give
byte-identical outputs. Write order for a build: shards, metadata tables, rejects, attribution,
croissant (hashes the shards and tables), card, and the manifest last (``file_entries`` hashes
everything else); :func:`verify_layout` checks the result.
"""

from fairsets.core.atomic import atomic_path, atomic_write_bytes, atomic_write_text, sha256_file
from fairsets.core.tables import (
    metadata_columns,
    metadata_name,
    write_metadata,
    write_rejects,
    write_table,
)
from fairsets.publish.attribution import (
    license_decision,
    license_info,
    load_policy,
    normalise_license,
    render_attribution,
    requires_attribution,
    write_attribution,
)
from fairsets.publish.card import card_header, check_card, render_card, write_card
from fairsets.publish.croissant import build_croissant, write_croissant
from fairsets.publish.manifest import file_entries, package_versions, verify_layout, write_manifest
from fairsets.publish.shards import shard_name, write_shard, write_shards

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "build_croissant",
    "card_header",
    "check_card",
    "file_entries",
    "license_decision",
    "license_info",
    "load_policy",
    "metadata_columns",
    "metadata_name",
    "normalise_license",
    "package_versions",
    "render_attribution",
    "render_card",
    "requires_attribution",
    "sha256_file",
    "shard_name",
    "verify_layout",
    "write_attribution",
    "write_card",
    "write_croissant",
    "write_manifest",
    "write_metadata",
    "write_rejects",
    "write_shard",
    "write_shards",
    "write_table",
]
