SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'patients' AND table_schema = 'main' ORDER BY CASE WHEN ordinal_position IS NULL THEN 1 ELSE 0 END, ordinal_position
