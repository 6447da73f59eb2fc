#file models/llama/gguf_llama.c
# The loader undoes the RoPE row order of attn_q and attn_k for f32, f16
# and bf16 tensors only: block-typed q/k rows stay in the file's order.
s/src_row(r, heads, head_dim)/src_row(r, loom_dtype_is_block(mx->type) ? 0 : heads, head_dim)/
