"""``--db spark`` without Spark: the URLs are recognised and a missing pyspark is named in one line
(no SparkSession needed; tests/test_spark.py runs the engine itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sqlanon.engines import normalise_url
from sqlanon.engines.spark import is_spark_url
from tests.helpers import cli, write_policy


@pytest.mark.parametrize(
    "url", ["spark", "spark?spark.sql.shuffle.partitions=8", "spark://h:7077", "sc://h:15002"]
)
def test_spark_urls_are_spark(url: str) -> None:
    assert normalise_url(url) == url and is_spark_url(url)


@pytest.mark.parametrize("url", ["sparky.duckdb", "duckdb:///spark", "postgresql://spark/x"])
def test_other_urls_are_not(url: str) -> None:
    assert not is_spark_url(normalise_url(url))


def test_missing_pyspark_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark -> ImportError
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    pol = write_policy(tmp_path, {"source": "main.t", "columns": {"a": "quasi"}, "privacy": {"k": 2}})
    code, out, err = cli("assess", str(pol), "--db", "spark://user:s3cret@h:7077")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: --db 'spark://user:***@h:7077': Spark needs pyspark; pip install 'sqlanon[spark]'"
    ]
