SELECT COUNT(*) AS n_classes, SUM(CASE WHEN CAST("q_0" AS TEXT) = '*' OR CAST("q_1" AS TEXT) = '*' THEN 1 ELSE 0 END) AS n_wild FROM "sqlanon_cls_00000000_1"
