SELECT v.x FROM (SELECT DISTINCT "s_0" AS x FROM "sqlanon_freq_00000000_42") AS v WHERE "x" IS NULL OR NOT (CAST("x" AS TEXT) IN ('Flu', 'Heart Disease', 'Cancer')) LIMIT 1
