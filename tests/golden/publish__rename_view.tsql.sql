EXEC sp_rename '[g].[main].[sqlanon_stage_000000000000]', 'patients_anon'
