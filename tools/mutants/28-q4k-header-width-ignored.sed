#file ir/forms.c
# The block-typed forms are taken to run with subgroups of 4: Q4_K's
# header words would be gathered from lanes of another subgroup's block,
# and 512 invocations of 4-wide subgroups would overrun the slots matvec.glsl
# keeps (WG / 8), unrefused.
s/return subgroup_size <= MATVEC_Q_ROW_GROUP \&\& subgroup_size >= 8u;/return subgroup_size <= MATVEC_Q_ROW_GROUP \&\& subgroup_size >= 4u;/
