#file compiler/compile.c
# The plan key leaves out awaited edges: a plan whose readers poll in the
# shader would be handed to a caller compiling for a device that needs
# every barrier.
s/(uint32_t)o->coopmat, (uint32_t)o->awaits };/(uint32_t)o->coopmat, 0 };/
