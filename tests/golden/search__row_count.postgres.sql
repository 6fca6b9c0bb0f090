SELECT COUNT(*) FROM "sqlanon_coded_00000000_4"
