"""sqlanon: a SQL-pushdown anonymiser. Measure, search and publish anonymised releases in the database."""

__version__ = "0.1.0"
