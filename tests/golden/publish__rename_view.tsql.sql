EXEC sp_rename '[main].[patients_anon__sqlanon_00000000]', 'patients_anon'
