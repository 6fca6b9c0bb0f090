SELECT COUNT_BIG(*) AS n FROM information_schema.schemata WHERE LOWER(schema_name) = LOWER('main')
