SELECT pid, dim, med, med_text, nch, k, kid FROM "sqlanon_mcuts_00000000_6" ORDER BY kid
