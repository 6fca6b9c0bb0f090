"""Relation names as the user wrote them, kept as parts so they are always quoted, never spliced."""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from sqlanon.errors import SqlanonError


@dataclass(frozen=True)
class Relation:
    """A possibly schema-qualified relation name (``catalog.schema.name``), stored unquoted."""

    name: str
    schema: str | None = None
    catalog: str | None = None

    def __post_init__(self) -> None:
        # sqlglot prints a table with a catalog and no schema as "catalog"."name", which every
        # engine reads as schema.name: another relation than the one meant.
        if self.catalog and not self.schema:
            raise SqlanonError(f"relation {self.name!r}: a catalog needs a schema (catalog.schema.name)")

    @classmethod
    def parse(cls, text: str, *, what: str = "relation") -> Relation:
        """Parse ``main.patients`` or ``"my schema"."odd;name"`` (DuckDB quoting rules), or a name
        in Spark's backtick quoting (``parquet.`/data/x.parquet```, a file as Spark reads it), which
        DuckDB's rules would split at the backticks.

        >>> Relation.parse('main."pa tients"')
        Relation(name='pa tients', schema='main', catalog=None)
        >>> Relation.parse('parquet.`/data/x.parquet`')
        Relation(name='/data/x.parquet', schema='parquet', catalog=None)
        """
        if not isinstance(text, str) or not text.strip():
            raise SqlanonError(f"{what}: expected a relation name, got {text!r}")
        # A backtick inside "..." is a character of the name (DuckDB's rules); without any double
        # quote, backticks quote (Spark's rules, doubled inside).
        dialect = "spark" if "`" in text and '"' not in text else "duckdb"
        try:
            table = exp.to_table(text, dialect=dialect)
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
            table = None
        if table is None or not isinstance(table, exp.Table) or not table.name:
            raise SqlanonError(
                f"{what}: cannot read {text!r} as a relation name; quote odd parts with double quotes"
            )
        return cls(name=table.name, schema=table.db or None, catalog=table.catalog or None)

    @classmethod
    def from_parts(cls, parts: dict, *, what: str = "relation") -> Relation:
        if "name" not in parts:
            raise SqlanonError(f"{what}: a relation mapping needs a 'name' key")
        try:
            return cls(name=str(parts["name"]), schema=parts.get("schema"), catalog=parts.get("catalog"))
        except SqlanonError as e:  # __post_init__'s refusal, with the key it came from
            raise SqlanonError(f"{what}: {e}") from None

    def table(self) -> exp.Table:
        return exp.table_(
            exp.to_identifier(self.name, quoted=True),
            db=exp.to_identifier(self.schema, quoted=True) if self.schema else None,
            catalog=exp.to_identifier(self.catalog, quoted=True) if self.catalog else None,
        )

    def with_name(self, name: str) -> Relation:
        return Relation(name=name, schema=self.schema, catalog=self.catalog)

    def __str__(self) -> str:
        return ".".join(p for p in (self.catalog, self.schema, self.name) if p)
