#file compiler/compile.c
# The plan key leaves out the cooperative-matrix forms: a plan naming
# coopmat kernels would be handed to a caller compiling for a device
# without them.
s/(uint32_t)o->coopmat, (uint32_t)o->awaits };/0, (uint32_t)o->awaits };/
