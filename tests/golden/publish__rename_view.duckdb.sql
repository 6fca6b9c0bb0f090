ALTER VIEW "g"."main"."sqlanon_stage_000000000000" RENAME TO "patients_anon"
