SELECT MAX(emd_hier) AS max_emd_hier FROM [sqlanon_sens_00000000_44]
