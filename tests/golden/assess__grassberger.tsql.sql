SELECT MIN(CASE WHEN POWER(2, entropy_g) < distinct_values THEN POWER(2, entropy_g) ELSE distinct_values END) AS l_max FROM [sqlanon_sens_00000000_2]
