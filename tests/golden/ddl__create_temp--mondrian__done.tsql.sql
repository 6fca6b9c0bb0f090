SELECT * INTO [#sqlanon_mdone_00000000_30] FROM (SELECT w.* FROM [sqlanon_mondrian_00000000_28] AS w LEFT JOIN [sqlanon_mcuts_00000000_29] AS c ON c.pid = w.pid WHERE c.pid IS NULL) AS temp
