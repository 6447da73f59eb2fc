#file passes/waves.c
# A kernel of exactly one wave of workgroups (as many as fit the device at
# once) takes the form that fits more too: the rule off by one.
s/if (groups <= (uint64_t)FORMS\[f\].per_sm \* sms)/if (groups < (uint64_t)FORMS[f].per_sm * sms)/
