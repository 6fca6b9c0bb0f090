SELECT * INTO [#sqlanon_mvalues_00000000_1] FROM (SELECT ROW_NUMBER() OVER () AS rid, b.* FROM [sqlanon_freq_00000000_0] AS b) AS temp
