EXEC sp_rename '[main].[sqlanon_stage_000000000000]', 'patients_anon'
