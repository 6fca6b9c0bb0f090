DROP TABLE IF EXISTS `g`.`main`.`sqlanon_old_000000000000`
