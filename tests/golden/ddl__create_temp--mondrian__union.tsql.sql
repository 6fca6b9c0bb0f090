SELECT * INTO [#sqlanon_mondrian_00000000_33] FROM (SELECT * FROM [sqlanon_mdone_00000000_30] UNION ALL SELECT * FROM [sqlanon_mondrian_00000000_31]) AS temp
