/* A small SPIR-V reader: just enough of the module to learn a compute
 * kernel's binding layout (storage buffers of set 0, which of them are
 * NonWritable, and the capabilities that need a device feature), and for
 * the build's check against ops.def its push-constant
 * size and local size. The build runs it over every built-in kernel to
 * generate their layout table; the runtime runs it over every kernel it
 * registers. It reads capabilities, ids, decorations, scalar, vector,
 * pointer and struct types, variables and execution modes, and skips every
 * other instruction by its word count. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

enum {
    SPV_MAGIC = 0x07230203u,
    OP_EXECUTION_MODE = 16,
    OP_CAPABILITY = 17,
    OP_TYPE_INT = 21,
    OP_TYPE_FLOAT = 22,
    OP_TYPE_VECTOR = 23,
    OP_TYPE_MATRIX = 24,
    OP_TYPE_ARRAY = 28,
    OP_TYPE_RUNTIME_ARRAY = 29,
    OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32,
    OP_CONSTANT = 43,
    OP_SPEC_CONSTANT = 50,
    OP_VARIABLE = 59,
    OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72,
    DEC_BLOCK = 2,
    DEC_BUFFER_BLOCK = 3,
    DEC_NON_WRITABLE = 24,
    DEC_BINDING = 33,
    DEC_DESCRIPTOR_SET = 34,
    DEC_OFFSET = 35,
    MODE_LOCAL_SIZE = 17,
    SC_UNIFORM_CONSTANT = 0,
    SC_UNIFORM = 2,
    SC_WORKGROUP = 4,
    SC_PUSH_CONSTANT = 9,
    SC_STORAGE_BUFFER = 12,
    CAP_STORAGE_BUFFER_16BIT = 4433,
    CAP_COOPERATIVE_MATRIX_NV = 5357,
};

/* Per id: what the module says about it. Ids are bounded by the header. */
typedef struct spv_id {
    uint32_t set, binding;      /* UINT32_MAX: not decorated */
    uint32_t pointee;           /* pointer type: pointee type; array: element type */
    uint32_t storage;           /* variable: storage class; pointer: storage class */
    uint32_t type;              /* variable: its pointer type */
    uint32_t members;           /* struct: member count */
    uint32_t ro_members;        /* struct: members decorated NonWritable */
    uint32_t def;               /* struct: word index of its OpTypeStruct */
    uint32_t bytes;             /* scalar, vector or matrix type: its size */
    uint32_t length;            /* array type: the id of its length constant */
    uint32_t value;             /* 32-bit integer constant: its value (a spec constant's default) */
    uint8_t op;                 /* the instruction that defined the id */
    bool non_writable, block, buffer_block;
} spv_id;

static loom_result bad(loom_result rc, const char *what, uint32_t word)
{
    return loom_fail(rc, "SPIR-V: %s (word %u)", what, word);
}

/* The struct behind a variable's pointer type, through descriptor arrays. */
static const spv_id *block_of(const spv_id *ids, uint32_t bound, const spv_id *var)
{
    uint32_t t = var->type < bound && ids[var->type].op == OP_TYPE_POINTER ? ids[var->type].pointee : 0;
    for (int depth = 0; t && t < bound && depth < 4; depth++) {
        if (ids[t].op == OP_TYPE_STRUCT)
            return &ids[t];
        if (ids[t].op != OP_TYPE_ARRAY && ids[t].op != OP_TYPE_RUNTIME_ARRAY)
            return NULL;
        t = ids[t].pointee;
    }
    return NULL;
}

static loom_result collect(const uint32_t *w, size_t n, spv_id *ids, uint32_t bound, uint32_t *local,
                           uint32_t *needs)
{
    for (size_t i = 5; i < n;) {
        uint32_t count = w[i] >> 16, op = w[i] & 0xffffu;
        if (count == 0 || count > n - i)
            return bad(LOOM_PARSE, "instruction runs past the end", (uint32_t)i);
        const uint32_t *a = w + i + 1;   /* operands */
        uint32_t na = count - 1;
        uint32_t id = 0;
        switch (op) {
        case OP_DECORATE:
            if (na < 2 || (id = a[0]) >= bound)
                return bad(LOOM_PARSE, "bad OpDecorate", (uint32_t)i);
            if (a[1] == DEC_DESCRIPTOR_SET && na >= 3)
                ids[id].set = a[2];
            else if (a[1] == DEC_BINDING && na >= 3)
                ids[id].binding = a[2];
            else if (a[1] == DEC_NON_WRITABLE)
                ids[id].non_writable = true;
            else if (a[1] == DEC_BLOCK)
                ids[id].block = true;
            else if (a[1] == DEC_BUFFER_BLOCK)
                ids[id].buffer_block = true;
            break;
        case OP_MEMBER_DECORATE:
            if (na < 3 || (id = a[0]) >= bound)
                return bad(LOOM_PARSE, "bad OpMemberDecorate", (uint32_t)i);
            /* Counted once per member: glslang never repeats a decoration. */
            if (a[2] == DEC_NON_WRITABLE)
                ids[id].ro_members++;
            break;
        case OP_TYPE_STRUCT:
            if (na < 1 || (id = a[0]) >= bound)
                return bad(LOOM_PARSE, "bad OpTypeStruct", (uint32_t)i);
            ids[id].op = (uint8_t)op;
            ids[id].members = na - 1;
            ids[id].def = (uint32_t)i;
            break;
        case OP_TYPE_INT:
        case OP_TYPE_FLOAT:
            if (na < 2 || (id = a[0]) >= bound)
                return bad(LOOM_PARSE, "bad scalar type", (uint32_t)i);
            ids[id].bytes = a[1] / 8;
            break;
        case OP_TYPE_VECTOR:
        case OP_TYPE_MATRIX:
            if (na < 3 || (id = a[0]) >= bound || a[1] >= bound)
                return bad(LOOM_PARSE, "bad vector or matrix type", (uint32_t)i);
            ids[id].bytes = ids[a[1]].bytes * a[2];
            break;
        case OP_CONSTANT:
        case OP_SPEC_CONSTANT:
            if (na >= 3 && (id = a[1]) < bound)
                ids[id].value = a[2];
            break;
        case OP_EXECUTION_MODE:
            if (na >= 5 && a[1] == MODE_LOCAL_SIZE)
                memcpy(local, a + 2, 3 * sizeof *local);
            break;
        case OP_CAPABILITY:
            if (na >= 1 && a[0] == CAP_STORAGE_BUFFER_16BIT)
                *needs |= LOOM_KERNEL_NEEDS_STORAGE16;
            if (na >= 1 && a[0] == CAP_COOPERATIVE_MATRIX_NV)
                *needs |= LOOM_KERNEL_NEEDS_COOPMAT;
            break;
        case OP_TYPE_ARRAY:
        case OP_TYPE_RUNTIME_ARRAY:
            if (na < 2 || (id = a[0]) >= bound)
                return bad(LOOM_PARSE, "bad array type", (uint32_t)i);
            ids[id].op = (uint8_t)op;
            ids[id].pointee = a[1];
            ids[id].length = op == OP_TYPE_ARRAY && na >= 3 ? a[2] : 0;
            break;
        case OP_TYPE_POINTER:
            if (na < 3 || (id = a[0]) >= bound)
                return bad(LOOM_PARSE, "bad OpTypePointer", (uint32_t)i);
            ids[id].op = (uint8_t)op;
            ids[id].storage = a[1];
            ids[id].pointee = a[2];
            break;
        case OP_VARIABLE:
            if (na < 3 || (id = a[1]) >= bound)
                return bad(LOOM_PARSE, "bad OpVariable", (uint32_t)i);
            ids[id].op = (uint8_t)op;
            ids[id].type = a[0];
            ids[id].storage = a[2];
            break;
        default:
            break;
        }
        i += count;
    }
    return LOOM_OK;
}

/* Bytes of type t as shared memory holds it (no padding: the driver's
 * count may be a little more); 0 for a type it cannot size. */
static uint64_t type_bytes(const uint32_t *w, const spv_id *ids, uint32_t bound, uint32_t t, int depth)
{
    if (!t || t >= bound || depth > 8)
        return 0;
    const spv_id *d = &ids[t];
    if (d->bytes)
        return d->bytes;
    if (d->op == OP_TYPE_ARRAY)
        return d->length < bound ? (uint64_t)ids[d->length].value * type_bytes(w, ids, bound, d->pointee, depth + 1)
                                 : 0;
    if (d->op == OP_TYPE_STRUCT) {
        uint64_t sum = 0;
        for (uint32_t m = 0; m < d->members; m++)
            sum += type_bytes(w, ids, bound, w[d->def + 2 + m], depth + 1);
        return sum;
    }
    return 0;
}

/* The workgroup (shared) variables' bytes. */
static uint64_t shared_bytes_of(const uint32_t *w, const spv_id *ids, uint32_t bound)
{
    uint64_t sum = 0;
    for (uint32_t id = 1; id < bound; id++)
        if (ids[id].op == OP_VARIABLE && ids[id].storage == SC_WORKGROUP && ids[id].type < bound)
            sum += type_bytes(w, ids, bound, ids[ids[id].type].pointee, 0);
    return sum;
}

static loom_result layout_of(const spv_id *ids, uint32_t bound, loom_kernel_layout *out)
{
    for (uint32_t id = 1; id < bound; id++) {
        const spv_id *v = &ids[id];
        if (v->op != OP_VARIABLE || v->binding == UINT32_MAX)
            continue;
        const spv_id *blk = block_of(ids, bound, v);
        bool ssbo = blk && (v->storage == SC_STORAGE_BUFFER || (v->storage == SC_UNIFORM && blk->buffer_block));
        if (!ssbo)
            return loom_fail(LOOM_UNSUPPORTED, "SPIR-V: binding %u is not a storage buffer (storage class %u); "
                             "loom binds storage buffers only", v->binding, v->storage);
        uint32_t set = v->set == UINT32_MAX ? 0 : v->set;
        if (set != 0)
            return loom_fail(LOOM_UNSUPPORTED, "SPIR-V: binding %u is in descriptor set %u; loom binds set 0 only",
                             v->binding, set);
        if (v->binding >= LOOM_MAX_SLOTS)
            return loom_fail(LOOM_UNSUPPORTED, "SPIR-V: binding %u is not below %u", v->binding, LOOM_MAX_SLOTS);
        uint32_t bit = 1u << v->binding;
        bool ro = v->non_writable || (blk->members && blk->ro_members >= blk->members);
        out->slots |= bit;
        /* Variables may alias one binding (e.g. vec4 and scalar views of a
         * weight): the slot is writable when any of them is. */
        if (!ro)
            out->writable |= bit;
    }
    return LOOM_OK;
}

/* The push-constant block's size: the end of its furthest member. Only
 * scalar and vector members are understood: all that loom's kernels use.
 * Instruction word counts were checked by collect. */
static loom_result push_size_of(const uint32_t *w, size_t n, const spv_id *ids, uint32_t bound, uint32_t *out)
{
    const spv_id *blk = NULL;
    for (uint32_t id = 1; id < bound && !blk; id++)
        if (ids[id].op == OP_VARIABLE && ids[id].storage == SC_PUSH_CONSTANT)
            blk = block_of(ids, bound, &ids[id]);
    if (!blk)
        return LOOM_OK;
    uint32_t blk_id = (uint32_t)(blk - ids);
    for (size_t i = 5; i < n; i += w[i] >> 16) {
        const uint32_t *a = w + i + 1;
        if ((w[i] & 0xffffu) != OP_MEMBER_DECORATE || (w[i] >> 16) < 5 || a[0] != blk_id || a[2] != DEC_OFFSET)
            continue;
        if (a[1] >= blk->members)
            return bad(LOOM_PARSE, "push-constant member past its struct", (uint32_t)i);
        uint32_t type = w[blk->def + 2 + a[1]];
        uint32_t bytes = type < bound ? ids[type].bytes : 0;
        if (bytes == 0)
            return loom_fail(LOOM_UNSUPPORTED, "SPIR-V: push-constant member %u is not a scalar or vector", a[1]);
        if (a[3] + bytes > *out)
            *out = a[3] + bytes;
    }
    return LOOM_OK;
}

/* The layout, and with `push` the push-constant size too (which may fail
 * on member types the runtime never needs to understand). */
static loom_result reflect(const uint32_t *code, size_t size_bytes, bool push, loom_spirv_info *out)
{
    if (size_bytes % 4 || size_bytes < 20 || code[0] != SPV_MAGIC)
        return loom_fail(LOOM_PARSE, "SPIR-V: %zu bytes do not start a SPIR-V module", size_bytes);
    size_t n = size_bytes / 4;
    uint32_t bound = code[3];
    /* Every id is below the bound, and each needs at least one word to be
     * defined, so a bound far above the module's size is malformed. */
    if (bound == 0 || bound > n * 4 + 16)
        return loom_fail(LOOM_PARSE, "SPIR-V: id bound %u does not fit a module of %zu words", bound, n);
    /* libc, not a loom_allocator: the build's layout generator links this
     * file alone. */
    spv_id *ids = malloc((size_t)bound * sizeof *ids);
    if (!ids)
        return loom_fail(LOOM_OUT_OF_MEMORY, "SPIR-V: out of memory");
    for (uint32_t i = 0; i < bound; i++)
        ids[i] = (spv_id){ .set = UINT32_MAX, .binding = UINT32_MAX };
    loom_spirv_info r = { { 0, 0, 0 }, 0, { 0, 0, 0 }, 0 };
    loom_result rc = collect(code, n, ids, bound, r.local_size, &r.layout.needs);
    if (!rc)
        rc = layout_of(ids, bound, &r.layout);
    if (!rc && push)
        rc = push_size_of(code, n, ids, bound, &r.push_size);
    if (!rc)
        r.shared_bytes = shared_bytes_of(code, ids, bound);
    free(ids);
    if (!rc)
        *out = r;
    return rc;
}

loom_result loom_kernel_layout_from_spirv(const uint32_t *code, size_t size_bytes, loom_kernel_layout *out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_kernel_layout_from_spirv: out is NULL");
    *out = (loom_kernel_layout){ 0, 0, 0 };
    if (!code)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_kernel_layout_from_spirv: code is NULL");
    loom_spirv_info r;
    loom_result rc = reflect(code, size_bytes, false, &r);
    if (!rc)
        *out = r.layout;
    return rc;
}

loom_result loom_spirv_reflect(const uint32_t *code, size_t size_bytes, loom_spirv_info *out)
{
    *out = (loom_spirv_info){ { 0, 0, 0 }, 0, { 0, 0, 0 }, 0 };
    return code ? reflect(code, size_bytes, true, out)
                : loom_fail(LOOM_INVALID_ARGUMENT, "loom_spirv_reflect: code is NULL");
}

loom_result loom_kernel_reflect(const uint32_t *code, size_t size_bytes, loom_kernel_layout *layout,
                                uint64_t *shared_bytes)
{
    if (!layout || !shared_bytes || !code)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_kernel_reflect: NULL argument");
    *layout = (loom_kernel_layout){ 0, 0, 0 };
    *shared_bytes = 0;
    loom_spirv_info r;
    loom_result rc = reflect(code, size_bytes, false, &r);
    if (!rc) {
        *layout = r.layout;
        *shared_bytes = r.shared_bytes;
    }
    return rc;
}
