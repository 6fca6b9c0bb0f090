SELECT COUNT(*) - COUNT("__sqlanon_p_key") AS nulls, COUNT("__sqlanon_p_key") - COUNT(DISTINCT "__sqlanon_p_key") AS repeats FROM "sqlanon_perturbed_00000000_0"
