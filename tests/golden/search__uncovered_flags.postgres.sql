SELECT uncovered FROM "sqlanon_coded_00000000_14" GROUP BY uncovered
