SELECT pid, dim, med, med_text, nch, kid0 FROM [sqlanon_mcuts_00000000_5] ORDER BY CASE WHEN r IS NULL THEN 1 ELSE 0 END, r
