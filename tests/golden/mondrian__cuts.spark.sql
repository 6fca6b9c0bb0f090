SELECT pid, dim, med, med_text, nch, kid0 FROM `sqlanon_mcuts_00000000_5` ORDER BY r NULLS LAST
