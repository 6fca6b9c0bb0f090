SELECT COUNT(*) AS n_classes, SUM(CASE WHEN CAST(`q_0` AS STRING) = '*' OR CAST(`q_1` AS STRING) = '*' THEN 1 ELSE 0 END) AS n_wild FROM `sqlanon_cls_00000000_1`
