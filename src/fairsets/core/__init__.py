"""The ground floor every other package stands on; it imports nothing else from fairsets.

Samples and keys (:mod:`~fairsets.core.data`), registries (:mod:`~fairsets.core.registry`), the Step
contract and optional-dependency checks (:mod:`~fairsets.core.step`), atomic file writes
(:mod:`~fairsets.core.atomic`), Parquet tables (:mod:`~fairsets.core.tables`), checked ``.npz``
files (:mod:`~fairsets.core.checked_npz`), licence recognition (:mod:`~fairsets.core.licenses`),
progress (:mod:`~fairsets.core.progress`), data and install hints printed as text, never Rich
markup (:mod:`~fairsets.core.console`), worker processes (:mod:`~fairsets.core.processes`),
text from outside (:mod:`~fairsets.core.short_text`, :mod:`~fairsets.core.textfile`), shipped data
files (:mod:`~fairsets.core.datafiles`), versions (:mod:`~fairsets.core.version`), package attributes
imported on first use (:mod:`~fairsets.core.lazy`) and third-party submodules loaded without their
heavy package ``__init__`` (:mod:`~fairsets.core.light_import`).

Importing this package imports none of its modules: each is imported where it is used.
"""
