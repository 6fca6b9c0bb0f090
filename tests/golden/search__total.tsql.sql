SELECT SUM(cnt) FROM [sqlanon_freq_00000000_3]
