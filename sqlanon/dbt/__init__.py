"""sqlanon inside dbt: the shipped dbt package's generated SQL (:mod:`sqlanon.dbt.macros`) and
``sqlanon dbt``, which writes a release model, its tests and the macros into a project
(:mod:`sqlanon.dbt.project`)."""
