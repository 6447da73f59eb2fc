#file passes/waves.c
# A residual projection of exactly one wave of workgroups (one an SM) takes
# the 256-invocation form too: the rule off by one.
s/n->groups\[2\] <= wave)/n->groups[2] < wave)/
