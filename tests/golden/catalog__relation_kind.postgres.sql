SELECT table_type FROM information_schema.tables WHERE table_name = 'patients_anon' AND table_schema = 'main'
