/* GGUF files: a strict reader, and a loader of llama-architecture models
 * into the example decoder's weights.
 *
 * The reader (gguf.c) validates the whole file when it opens it: header,
 * every metadata value (nested arrays included), every tensor info, and
 * every tensor's bytes against the end of the file, so nothing read later
 * can go out of bounds. Only little-endian GGUF versions 2 and 3 are read,
 * and only F32, F16, BF16 tensors and those of the block types loom's
 * kernels read (Q8_0, Q4_0, Q4_K, Q6_K), whose rows must be whole blocks.
 * Every count and length in the file is
 * checked against the bytes that are left before anything is allocated, so
 * allocations stay a small multiple of the file size.
 *
 * Failure codes: LOOM_PARSE for a malformed or truncated file (the message
 * names the field and its byte offset; a tensor's, the tensor), LOOM_
 * UNSUPPORTED for a version or tensor type this reader does not take (a
 * tensor's names it and the type, "q5_k"), LOOM_NOT_FOUND for a missing key
 * or tensor, LOOM_INVALID_ARGUMENT for a value of the wrong type, range or
 * shape, LOOM_IO for a file that cannot be read, LOOM_OUT_OF_MEMORY.
 * Out-parameters are NULL (or untouched, for getters) on failure.
 *
 * Ownership: a reader opened from memory borrows the bytes, which must
 * outlive it; one opened from a path maps the file and unmaps it on close.
 * Every pointer the reader returns (strings, tensor data) points into those
 * bytes and lives until loom_gguf_close. Strings are NOT NUL-terminated.
 * Threading: a reader is immutable after open; it may be read from many
 * threads. */
#ifndef LOOM_GGUF_H
#define LOOM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "loom_ir.h"
#include "loom_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types: X(NAME, code, element bytes (0: variable), name). */
#define LOOM_GGUF_VALUE_TYPES(X) \
    X(UINT8, 0, 1, "uint8")      \
    X(INT8, 1, 1, "int8")        \
    X(UINT16, 2, 2, "uint16")    \
    X(INT16, 3, 2, "int16")      \
    X(UINT32, 4, 4, "uint32")    \
    X(INT32, 5, 4, "int32")      \
    X(FLOAT32, 6, 4, "float32")  \
    X(BOOL, 7, 1, "bool")        \
    X(STRING, 8, 0, "string")    \
    X(ARRAY, 9, 0, "array")      \
    X(UINT64, 10, 8, "uint64")   \
    X(INT64, 11, 8, "int64")     \
    X(FLOAT64, 12, 8, "float64")

typedef enum loom_gguf_type {
#define X(name, code, bytes, str) LOOM_GGUF_##name = code,
    LOOM_GGUF_VALUE_TYPES(X)
#undef X
} loom_gguf_type;

/* Tensor types this reader takes (ggml's numbering): X(NAME, code, the loom
 * dtype stored byte for byte the same way, name). BF16 has none (-1): a row
 * of it is 2 bytes an element, and the loader widens it to f32. */
#define LOOM_GGUF_TENSOR_TYPES(X)  \
    X(F32, 0, LOOM_F32, "f32")     \
    X(F16, 1, LOOM_F16, "f16")     \
    X(Q4_0, 2, LOOM_Q4_0, "q4_0")  \
    X(Q8_0, 8, LOOM_Q8_0, "q8_0")  \
    X(Q4_K, 12, LOOM_Q4_K, "q4_k") \
    X(Q6_K, 14, LOOM_Q6_K, "q6_k") \
    X(BF16, 30, -1, "bf16")

typedef enum loom_gguf_tensor_type {
#define X(name, code, bytes, str) LOOM_GGUF_TENSOR_##name = code,
    LOOM_GGUF_TENSOR_TYPES(X)
#undef X
} loom_gguf_tensor_type;

#define LOOM_GGUF_MAX_DIMS 4
#define LOOM_GGUF_MAX_NAME 64          /* tensor name bytes */
#define LOOM_GGUF_MAX_KEY 65535        /* metadata key bytes */
#define LOOM_GGUF_MAX_DEPTH 8          /* nesting of arrays in arrays */
#define LOOM_GGUF_DEFAULT_ALIGNMENT 32

typedef struct loom_gguf_str {
    const char *data;      /* into the file; not NUL-terminated */
    size_t len;
} loom_gguf_str;

typedef struct loom_gguf_value {
    loom_gguf_type type;
    uint64_t u;            /* unsigned integers, and bool (0 or 1) */
    int64_t i;             /* signed integers */
    double f;              /* FLOAT32 and FLOAT64 */
    loom_gguf_str str;     /* STRING */
    /* ARRAY: element type, count and the raw little-endian elements. */
    loom_gguf_type elem_type;
    uint64_t count;
    const uint8_t *elems;
    size_t elems_bytes;
} loom_gguf_value;

typedef struct loom_gguf_kv {
    loom_gguf_str key;
    loom_gguf_value value;
    uint64_t offset;       /* file offset of the key's record */
} loom_gguf_kv;

typedef struct loom_gguf_tensor {
    loom_gguf_str name;
    uint32_t n_dims;                   /* 1..LOOM_GGUF_MAX_DIMS */
    uint64_t dims[LOOM_GGUF_MAX_DIMS]; /* fastest-varying first; unused are 1 */
    loom_gguf_tensor_type type;
    uint64_t offset;       /* within the data section, as stored */
    uint64_t n_elems, bytes;   /* bytes: n_elems / block x bytes a block */
    const void *data;      /* into the file: little-endian elements, or blocks as GGML lays them out */
    uint64_t info_offset;  /* file offset of the tensor's info record */
} loom_gguf_tensor;

typedef struct loom_gguf loom_gguf;

/* Validates data[0, size) as a GGUF file; borrows it (see above). */
loom_result loom_gguf_open_memory(const void *data, size_t size, loom_gguf **out);
/* Maps the file at path read-only and validates it. A file truncated by
 * another process while mapped faults (SIGBUS): open files nobody writes. */
loom_result loom_gguf_open_file(const char *path, loom_gguf **out);
void loom_gguf_close(loom_gguf *g);   /* NULL is fine */

uint32_t loom_gguf_version(const loom_gguf *g);
uint64_t loom_gguf_alignment(const loom_gguf *g);
uint64_t loom_gguf_data_offset(const loom_gguf *g);   /* start of tensor data */

/* Metadata in file order, and by key (NULL when absent). */
uint64_t loom_gguf_kv_count(const loom_gguf *g);
const loom_gguf_kv *loom_gguf_kv_at(const loom_gguf *g, uint64_t i);
const loom_gguf_kv *loom_gguf_find_kv(const loom_gguf *g, const char *key);

/* Typed getters: LOOM_NOT_FOUND naming the key when it is absent;
 * LOOM_INVALID_ARGUMENT when its type does not convert or the value does
 * not fit. get_u32 takes any integer type; get_f32 takes float32/float64. */
loom_result loom_gguf_get_u32(const loom_gguf *g, const char *key, uint32_t *out);
loom_result loom_gguf_get_f32(const loom_gguf *g, const char *key, float *out);
loom_result loom_gguf_get_str(const loom_gguf *g, const char *key, loom_gguf_str *out);
/* Fills items[0, v->count) from an array of strings (validated at open);
 * LOOM_INVALID_ARGUMENT when v is not one. */
loom_result loom_gguf_array_strings(const loom_gguf_value *v, loom_gguf_str *items);

/* Tensors in file order, and by name (NULL when absent). */
uint64_t loom_gguf_tensor_count(const loom_gguf *g);
const loom_gguf_tensor *loom_gguf_tensor_at(const loom_gguf *g, uint64_t i);
const loom_gguf_tensor *loom_gguf_find_tensor(const loom_gguf *g, const char *name);

/* Bytes of a tensor of a type taken and these dims (fastest-varying
 * first), as the reader lays it out: n_elems / block x bytes a block. 0 when
 * the type is not taken, n_dims is not 1..LOOM_GGUF_MAX_DIMS, a dim is 0,
 * dims[0] is not whole blocks, or the count passes 2^60. */
uint64_t loom_gguf_tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims);
/* Names for messages; "?" for codes outside the tables. Tensor types are
 * named for every ggml type, taken or not ("q5_k"). */
/* Bytes of a fixed-size metadata value type; 0 for strings, arrays and
 * unknown codes. */
size_t loom_gguf_value_bytes(uint32_t type);
const char *loom_gguf_type_name(uint32_t type);
const char *loom_gguf_tensor_type_name(uint32_t type);
/* The loom dtype whose rows are a tensor type's byte for byte: true and
 * *out for f32, f16 and the block types; false for bf16 and the rest. */
bool loom_gguf_tensor_dtype(uint32_t type, loom_dtype *out);

/* ---- llama models ------------------------------------------------------- */

struct loom_llama_weights;

/* Largest KV cache the loader sizes by default: max_seq 0 gives
 * min(llama.context_length, this). */
#define LOOM_LLAMA_GGUF_DEFAULT_MAX_SEQ 4096

/* How the llama loader loads; zero (or a NULL descriptor) means default. */
typedef struct loom_llama_gguf_desc {
    /* KV-cache rows: 0 gives min(llama.context_length, LOOM_LLAMA_GGUF_
     * DEFAULT_MAX_SEQ); another value at most the context length (above it
     * is LOOM_INVALID_ARGUMENT naming max_seq and the context). */
    uint32_t max_seq;
    /* Every check a load makes, but no values: the weights' matrices have
     * their shapes and dtypes and nothing else (loom_llama_weights.no_
     * values), for a dry run or a description of the file's model. */
    bool shapes_only;
    /* Matrices stored in a dtype other than f32 keep their stored bytes
     * alone, without the f32 copy only the CPU reference reads (which then
     * refuses the weights): a quarter of the host memory for a q4_k model,
     * and no time spent decoding it. */
    bool raw_only;
} loom_llama_gguf_desc;

/* Loads a llama-architecture model into the decoder's weights (llama.h).
 *
 * Shapes and hyper-parameters come from the metadata (llama.*: embedding
 * length, block count, head counts, feed-forward length, RMS epsilon, RoPE
 * base (default 10000), context length; head_dim from
 * llama.attention.key_length, else embedding length / heads); vocab from
 * token_embd.weight's shape; max_seq as the descriptor says.
 * Every tensor must be present with its exact shape; output.weight may be
 * absent (tied to token_embd). What the decoder would silently ignore is
 * refused (LOOM_UNSUPPORTED): any other tensor (biases, rope_freqs), RoPE
 * scaling, experts, a partial rotary dimension.
 *
 * Matrices load as they are stored, each in its own dtype: f32 and f16
 * keep their values and bits, Q8_0, Q4_0, Q4_K and Q6_K their blocks byte
 * for byte (what the GPU reads; the matrix's f32 copy, the blocks
 * dequantized, is host memory for the CPU reference, made unless raw_only
 * says not to); bf16 widens to f32
 * exactly. Norms are f32 vectors whatever their stored type. The config's
 * wtype is the dtype most matrices have (mix NONE), its kvtype f32.
 *
 * RoPE layout: GGUF llama files store the rows of attn_q and attn_k so that
 * RoPE rotates adjacent pairs (2i, 2i+1) of each head (llama.cpp's
 * converter permutes Hugging Face rows into that order, before quantizing),
 * while this decoder's ROPE rotates (i, i + head_dim/2). The loader moves
 * file row h*head_dim + 2i + j to row h*head_dim + j*head_dim/2 + i (j = 0,
 * 1) of wq and wk, whole rows, so block rows move as they are. q and k get
 * the same permutation within each head, so the attention scores, and
 * hence the model's outputs, are the file's. A file written with the
 * inverse permutation loads back bit for bit.
 *
 * tokenizer.ggml.tokens, when present, becomes the vocabulary read by
 * loom_llama_token_str. The caller owns *out (loom_llama_weights_destroy). */
loom_result loom_llama_weights_from_gguf(const char *path, const loom_llama_gguf_desc *desc,
                                         struct loom_llama_weights **out);
loom_result loom_llama_weights_from_gguf_memory(const void *data, size_t size, const loom_llama_gguf_desc *desc,
                                                struct loom_llama_weights **out);
/* The same from an open reader; the weights do not refer to it after. */
loom_result loom_llama_weights_from_gguf_reader(const loom_gguf *g, const loom_llama_gguf_desc *desc,
                                                struct loom_llama_weights **out);

/* The vocabulary string of token id (NUL-terminated; a token holding a NUL
 * byte reads as its prefix), or NULL when w has no vocabulary or id is past
 * its end. Owned by w. */
const char *loom_llama_token_str(const struct loom_llama_weights *w, uint32_t id);

/* ---- writing ------------------------------------------------------------ */

/* A GGUF file put together in memory, then written whole (gguf_write.c):
 * version 3, metadata and tensors in the order they were added, tensor data
 * aligned to general.alignment when that key is set (else 32) and no padding
 * after the last tensor. What the reader above takes, the writer writes:
 * F32, F16, BF16 and the block types (rows of whole blocks), little-endian.
 *
 * Ownership: the writer copies every key, name, value and tensor's data it
 * is given; the caller owns nothing it passes in after the call returns.
 * Threading: one thread per writer. Failure: LOOM_INVALID_ARGUMENT for an
 * empty or too long key or name, a duplicate tensor name, bad dims or type,
 * a general.alignment that is not a power of two; LOOM_NOT_FOUND for a key
 * or tensor that is not there; LOOM_OUT_OF_MEMORY; LOOM_IO when the file
 * cannot be written. A failed call leaves the writer as it was. */
typedef struct loom_gguf_writer loom_gguf_writer;

loom_result loom_gguf_writer_create(loom_gguf_writer **out);
void loom_gguf_writer_destroy(loom_gguf_writer *w);   /* NULL is fine */

/* Metadata: a key set again gets the new type and value in its old place. */
loom_result loom_gguf_writer_set_u32(loom_gguf_writer *w, const char *key, uint32_t v);
loom_result loom_gguf_writer_set_f32(loom_gguf_writer *w, const char *key, float v);
loom_result loom_gguf_writer_set_str(loom_gguf_writer *w, const char *key, const char *v);
/* An array of n strings, or of n elements of a fixed-size type (elem is not
 * STRING or ARRAY) given as their little-endian bytes. */
loom_result loom_gguf_writer_set_strs(loom_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
loom_result loom_gguf_writer_set_array(loom_gguf_writer *w, const char *key, loom_gguf_type elem, const void *elems,
                                       uint64_t n);
loom_result loom_gguf_writer_remove_key(loom_gguf_writer *w, const char *key);

/* Adds a tensor of n_dims dims (fastest-varying first) whose bytes are a
 * copy of data, or zeros when data is NULL. *out_data (may be NULL) is the
 * writer's copy, for the caller to fill in; it lives until the tensor is
 * removed or the writer destroyed. */
loom_result loom_gguf_writer_add_tensor(loom_gguf_writer *w, const char *name, loom_gguf_tensor_type type,
                                        uint32_t n_dims, const uint64_t *dims, const void *data, void **out_data);
loom_result loom_gguf_writer_remove_tensor(loom_gguf_writer *w, const char *name);
/* The dims of a tensor added: n_dims and dims[0, n_dims). */
loom_result loom_gguf_writer_tensor_dims(const loom_gguf_writer *w, const char *name, uint32_t *n_dims,
                                         uint64_t dims[LOOM_GGUF_MAX_DIMS]);

/* The file: in a malloc'ed buffer the caller frees (*data NULL and *size 0
 * on failure), or at path (replaced; a failed write may leave part of it). */
loom_result loom_gguf_writer_to_memory(const loom_gguf_writer *w, void **data, size_t *size);
loom_result loom_gguf_writer_to_file(const loom_gguf_writer *w, const char *path);

/* How loom_gguf_writer_add_llama lays a model out; zero is the default. */
typedef struct loom_gguf_llama_desc {
    /* Matrices and the embedding: F32 (0), F16, BF16 or a block type, made
     * from the f32 values (f16 and blocks the matrix has in that very dtype
     * go as they are; a block type quantizes with loom_quantize_row).
     * Norms are F32. */
    loom_gguf_tensor_type type;
    /* Each matrix in its own dtype instead, its bytes as uploaded (type is
     * not read): the model bit for bit, a raw-only load's too. */
    bool as_stored;
    const char *name;             /* general.name; NULL: "loom" */
    uint32_t context;             /* llama.context_length; 0: the config's max_seq */
    bool tied;                    /* no output.weight: readers tie it to token_embd */
    /* tokenizer.ggml.tokens: vocab strings, with tokenizer.ggml.model
     * "llama". NULL: made-up ones llama.cpp's loader takes as a
     * SentencePiece vocabulary ("<unk>", "<s>", "</s>", the byte tokens
     * "<0x00>".."<0xFF>", then "tok<id>"), with their token types. */
    const char *const *tokens;
    bool no_vocab;                /* no tokenizer keys at all */
} loom_gguf_llama_desc;

/* Adds a llama model's metadata (llama.* keys, as
 * loom_llama_weights_from_gguf reads them) and tensors to w, laid out as
 * llama.cpp's converter writes them: q and k rows permuted so that RoPE
 * rotates adjacent pairs, the inverse of the loader's permutation (whole
 * rows: block rows move as they are). Matrices written as stored, or in
 * the dtype they have, load back bit for bit; a narrower float type rounds
 * each value to nearest even, a block type quantizes the values.
 * LOOM_UNSUPPORTED for a matrix without the values to write (a raw-only
 * load has no f32 copies to convert); LOOM_INVALID_ARGUMENT naming the
 * tensor for rows that are not whole blocks of type. On failure w holds
 * part of the model (destroy it). */
loom_result loom_gguf_writer_add_llama(loom_gguf_writer *w, const struct loom_llama_weights *weights,
                                       const loom_gguf_llama_desc *desc);
/* The same model written to path in one call. */
loom_result loom_llama_weights_to_gguf(const struct loom_llama_weights *weights, const loom_gguf_llama_desc *desc,
                                       const char *path);

#ifdef __cplusplus
}
#endif
#endif
