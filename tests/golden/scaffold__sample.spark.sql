SELECT CAST(`Disease` AS STRING) AS v FROM `main`.`patients` WHERE NOT `Disease` IS NULL LIMIT 200
