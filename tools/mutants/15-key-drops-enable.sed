#file compiler/compile.c
# The plan key leaves out the enabled forms: a plan made with half shares
# would be handed to a caller that did not ask for them.
s/(uint32_t)(o->max_binding_range >> 32), o->enable, o->wave_groups,/(uint32_t)(o->max_binding_range >> 32), 0, o->wave_groups,/
