SELECT COUNT(*) AS n FROM information_schema.schemata WHERE LOWER(schema_name) = LOWER('main')
