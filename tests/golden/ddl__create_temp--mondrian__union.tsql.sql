SELECT * INTO [#sqlanon_mondrian_00000000_35] FROM (SELECT * FROM [sqlanon_mdone_00000000_32] UNION ALL SELECT * FROM [sqlanon_mondrian_00000000_33]) AS temp
