#!/bin/sh
# The shared library exports its public API and nothing else: every defined
# dynamic symbol starts with loom_, and no internal name (rt_, pass_, the
# plan_/jp_ helpers, or the loom_ internals listed below) is among them.
# usage: symbols.sh LIBLOOM.so
set -eu
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{ print $3 }')
[ -n "$syms" ] || { echo "$lib exports nothing" >&2; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^loom_' || true)
internal=$(printf '%s\n' "$syms" | grep -E '^(rt_|pass_|plan_)|^loom_(grow|alloc|free|enc_|dump_json|builtin_|graph_intern|graph_add_dispatch_lit|kernel_lookup)' || true)
if [ -n "$bad$internal" ]; then
    echo "$lib exports non-public symbols:" >&2
    printf '%s\n' $bad $internal >&2
    exit 1
fi
# And the API is there: one entry point of each module.
for want in loom_graph_create loom_op_matvec loom_pass_fuse loom_compile loom_rt_create loom_fail_wrap; do
    printf '%s\n' "$syms" | grep -qx "$want" || { echo "$lib does not export $want" >&2; exit 1; }
done
echo "$(printf '%s\n' "$syms" | wc -l) public symbols, all loom_"
