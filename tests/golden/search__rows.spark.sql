SELECT `c_0_0`, `c_0_1`, `c_0_2`, `c_0_3`, `c_0_4`, `c_1_0`, `c_1_1`, `sid_0`, `cnt` FROM `sqlanon_coded_00000000_1`
