SELECT pid, dim, med, med_text, r FROM "sqlanon_mcuts_00000000_3" ORDER BY r
