SELECT c.`q_0`, c.`q_1`, c.n, s.kl AS i1, s.h_w - s.entropy AS i2 FROM `sqlanon_sens_00000000_2` AS s JOIN `sqlanon_cls_00000000_1` AS c ON c.cid = s.cid ORDER BY s.kl DESC, c.cid NULLS LAST LIMIT 5
