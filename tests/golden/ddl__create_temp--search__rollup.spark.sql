CREATE TEMPORARY VIEW `sqlanon_rollup_00000000_3` AS SELECT `c_0_1`, `c_0_2`, `c_1_1`, `sid_0`, SUM(cnt) AS cnt FROM `sqlanon_coded_00000000_1` GROUP BY `c_0_1`, `c_0_2`, `c_1_1`, `sid_0`
