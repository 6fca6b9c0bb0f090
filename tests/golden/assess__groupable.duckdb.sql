SELECT "Postcode", "Age", "Disease" FROM "main"."patients" WHERE 1 = 0 GROUP BY "Postcode", "Age", "Disease"
