SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'patients' AND table_schema = 'main' ORDER BY ordinal_position
