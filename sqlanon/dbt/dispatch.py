"""Which adapters' macros the dbt package needs, given that dbt's dispatch falls back to ``default__``.

``adapter.dispatch('x', 'sqlanon')`` (dbt-core's ``BaseDatabaseWrapper.dispatch``) looks in the package
for ``<adapter>__x``, then for each parent adapter's ``<parent>__x``, then ``default__x``. A macro whose
text is ``default__x``'s is then dead weight: PostgreSQL's SQL is the default's, and the generated
``postgres__`` copies were 60 KB of the 241 KB ``sqlanon_sql.sql``. Leaving one out changes nothing
only because no adapter of :data:`sqlanon.dbt.macros.ADAPTERS` is another's parent (dbt-duckdb,
dbt-postgres, dbt-spark and dbt-sqlserver declare none of the others): a left-out child would
otherwise reach its parent's macro before ``default__``.
"""

from __future__ import annotations

DEFAULT = "default"


def needed(bodies: dict[str, str]) -> dict[str, str]:
    """``bodies`` (adapter -> one macro's text for it, ``default`` among them) without the adapters
    whose text is ``default``'s, which dbt's dispatch reaches anyway.

    >>> needed({"default": "a", "postgres": "a", "duckdb": "b"})
    {'default': 'a', 'duckdb': 'b'}
    """
    return {
        adapter: body for adapter, body in bodies.items() if adapter == DEFAULT or body != bodies[DEFAULT]
    }
