SELECT COUNT(*) FROM `sqlanon_rollup_00000000_3`
