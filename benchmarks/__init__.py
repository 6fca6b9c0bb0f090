"""Benchmarks for sqlanon: ``python -m benchmarks.run --help`` (see benchmarks/README.md)."""
