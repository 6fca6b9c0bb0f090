CREATE TEMPORARY VIEW `sqlanon_mdone_00000000_33` AS SELECT w.* FROM `sqlanon_mondrian_00000000_31` AS w LEFT JOIN `sqlanon_mcuts_00000000_32` AS c ON c.pid = w.pid WHERE c.pid IS NULL
