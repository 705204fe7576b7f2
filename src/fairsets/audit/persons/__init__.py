"""Audits of person annotations (``fairsets annotate``): composition, harmful associations, themes,
and data → model bias transfer, after the LAION-400M person-centric annotation study.

Every aggregation is DuckDB over the annotation folder's Parquet tables, streamed: nothing loads
a whole table into memory. :mod:`.tables` defines the views every audit reads (and the
image-level group rules); each audit is one module returning a JSON-ready dict.
"""
