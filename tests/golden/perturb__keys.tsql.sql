SELECT COUNT_BIG(*) - COUNT_BIG([__sqlanon_p_key]) AS nulls, COUNT_BIG([__sqlanon_p_key]) - COUNT_BIG(DISTINCT [__sqlanon_p_key]) AS repeats FROM [sqlanon_perturbed_00000000_0]
