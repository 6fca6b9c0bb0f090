SELECT * INTO [#sqlanon_mondrian_00000000_31] FROM (SELECT * FROM [sqlanon_mdone_00000000_28] UNION ALL SELECT * FROM [sqlanon_mondrian_00000000_29]) AS temp
