SELECT database_name AS db, schema_name AS sch, view_name AS rel, sql FROM DUCKDB_VIEWS() WHERE NOT internal
