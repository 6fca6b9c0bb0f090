CREATE TEMPORARY VIEW `sqlanon_cls_00000000_1` AS SELECT cid, `q_0`, `q_1`, SUM(cnt) AS n FROM `sqlanon_freq_00000000_0` GROUP BY cid, `q_0`, `q_1`
