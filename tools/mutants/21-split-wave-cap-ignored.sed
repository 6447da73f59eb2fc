#file passes/split.c
# The split pass leaves the argmax forms' workgroups uncapped.
s/n->groups\[0\] = wave;/n->groups[0] = n->groups[0];/
