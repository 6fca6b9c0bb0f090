SELECT COUNT(*) - COUNT(`Age`) AS nulls FROM `main`.`patients`
