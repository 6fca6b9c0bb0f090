ALTER VIEW "main"."patients_anon__sqlanon_00000000" RENAME TO "patients_anon"
