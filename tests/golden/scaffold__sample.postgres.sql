SELECT CAST("Disease" AS TEXT) AS v FROM "main"."patients" WHERE NOT "Disease" IS NULL LIMIT 200
