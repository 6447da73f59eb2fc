#file compiler/compile.c
# The plan key leaves out the argmax forms' workgroup cap: a plan made for
# one device's wave would be handed to a caller compiling for another.
s/(uint32_t)(o->max_binding_range >> 32), o->enable, o->wave_groups,/(uint32_t)(o->max_binding_range >> 32), o->enable, 0,/
