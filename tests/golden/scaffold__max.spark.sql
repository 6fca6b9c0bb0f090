SELECT MAX(`Age`) AS hi FROM `main`.`patients`
