SELECT pid, dim, med, med_text, nch, k, kid FROM "sqlanon_mcuts_00000000_7" ORDER BY kid
