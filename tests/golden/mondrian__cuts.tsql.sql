SELECT pid, dim, med, med_text, nch, k, kid FROM [sqlanon_mcuts_00000000_6] ORDER BY CASE WHEN kid IS NULL THEN 1 ELSE 0 END, kid
