#file ir/forms.c
# The block-typed matvec forms are taken to run with subgroups of 64: a
# device with them would add two rows' sums together, unrefused.
s/return subgroup_size <= MATVEC_Q_ROW_GROUP \&\&/return subgroup_size <= 2 * MATVEC_Q_ROW_GROUP \&\&/
