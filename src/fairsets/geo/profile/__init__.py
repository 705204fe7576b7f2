"""Profile captions: one country (ISO alpha-3 or empty) per caption, in input order.

Two modes:

* **one file** (:func:`profile_file`): a text file with one caption a line (every line is an
  input, empty lines included), or CSV/TSV/Parquet/JSONL with a caption column. The file is
  *streamed*: read, profiled and written ``batch_size`` rows at a time (text formats line by
  line, Parquet by record batches), so memory stays flat however long the file is. The output
  goes to a temporary file beside ``out`` and is renamed onto it only when every row is written
  (a bad line half-way leaves no partial output). Columns: ``caption``, ``country``,
  ``confidence`` (4 decimals in CSV/TSV, a float in Parquet/JSONL, empty where the method gives
  none), ``evidence`` (+ ``error`` when a method failed on some captions), then the input's other
  columns. CSV output needs its columns before the first row, so a ``.jsonl`` input (whose
  objects may carry different keys) is read twice: once for the keys, then for the rows.
* **shards** (:func:`profile_shards`): LAION-style Parquet metadata shards, one pipeline task per
  shard on the local or the Ray executor. A shard's output is the shard plus ``country``,
  ``country_confidence``, ``country_evidence`` (+ ``geo_error``). Each task writes
  ``OUT/<shard>.parquet`` atomically and then a completion marker, so an interrupted run resumes
  where it stopped; an LLM method's disk cache is shared by all tasks and runs. A run removes
  what a killed one left (temporary files) and ends byte-identical to an uninterrupted run. In a
  folder ``fairsets download`` wrote, its ``status.parquet`` is not a shard.

Methods travel as *specs* (``{"method": name, **options}``, :func:`method_spec`), never as
instances: the driver checks a spec against the method's constructor signature without building
anything (a gazetteer, a model, a server check), and each worker process builds the method once,
on its first task, and keeps it for the next tasks of the same spec (:func:`release_methods`
frees it). Output is deterministic: a re-run writes byte-identical files. A method whose data
packages (the geo extra's gazetteer and word lists) are missing is refused by
:func:`check_data_packages` unless a reduced gazetteer is allowed.

Modules: ``specs`` (method specs and the methods a process built), ``streams`` (caption files
read and outputs written batch by batch), ``files`` (one-file mode) and ``shards`` (shard mode:
the pipeline task :func:`run_profile_task` lives in :mod:`fairsets.geo.profile.shards`).
"""

from __future__ import annotations

from .files import CONFIDENCE_DECIMALS as CONFIDENCE_DECIMALS
from .files import profile_captions, profile_file
from .shards import SCHEMA as SCHEMA
from .shards import check_shard_out as check_shard_out
from .shards import profile_shards, run_profile_task
from .shards import shard_inputs as shard_inputs
from .specs import GEO_EXTRA as GEO_EXTRA
from .specs import check_data_packages, method_spec, missing_data_packages, release_methods, takes_option
from .streams import BATCH_ROWS as BATCH_ROWS
from .streams import CAPTION_COLUMNS as CAPTION_COLUMNS
from .streams import CAPTION_FORMATS, ProfileError, read_table, write_table
from .streams import OUTPUT_FORMATS as OUTPUT_FORMATS
from .streams import caption_column as caption_column

__all__ = [
    "CAPTION_FORMATS",
    "ProfileError",
    "check_data_packages",
    "method_spec",
    "missing_data_packages",
    "profile_captions",
    "profile_file",
    "profile_shards",
    "read_table",
    "release_methods",
    "run_profile_task",
    "takes_option",
    "write_table",
]
