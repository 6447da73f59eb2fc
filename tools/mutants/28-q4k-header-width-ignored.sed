#file ir/forms.c
# Q4_K's forms are taken to run with subgroups of 4: a block's header words
# would be gathered from lanes of another subgroup's block, unrefused.
s/(!q4k || subgroup_size >= 8u)/(!q4k || subgroup_size >= 4u)/
