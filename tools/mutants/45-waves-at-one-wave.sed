#file passes/waves.c
# A kernel of exactly one wave of workgroups (as many as fit the device at
# once) takes the form that fits more too: the rule off by one.
s/if (groups <= fit(f, wave))/if (groups < fit(f, wave))/
