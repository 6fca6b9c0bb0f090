SELECT dim, lvl, code, label, is_null FROM [sqlanon_mcovers_00000000_4]
