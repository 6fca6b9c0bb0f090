SELECT n AS size, COUNT(*) AS n_classes FROM "sqlanon_cls_00000000_1" GROUP BY n ORDER BY n
