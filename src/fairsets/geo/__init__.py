"""Geo-profiling of image–caption datasets (GeoProfiler): caption → country, evaluation, analyses."""
