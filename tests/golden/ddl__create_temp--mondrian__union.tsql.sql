SELECT * INTO [#sqlanon_mondrian_00000000_36] FROM (SELECT * FROM [sqlanon_mdone_00000000_33] UNION ALL SELECT * FROM [sqlanon_mondrian_00000000_34]) AS temp
