#file passes/coopmat.c
# Every f16 MATMUL on the multi-column form takes the 2-rows-a-subgroup
# layout, whatever its rows (a matrix of 128 such workgroups took twice
# the time in it).
s/pc.rows < LOOM_MATMUL_SMALL_R2_ROWS)/false)/
