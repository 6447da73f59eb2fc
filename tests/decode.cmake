# llama-decode and `loom bench decode` end to end, as CI can run them: the
# tiny model checked against the CPU reference on every step under the
# validation layer (f32 and f16, one and three steps in flight, each
# ablation), the device-free dry run of the 1b shape with its JSON checked,
# and one quick pass of the decode benchmark. The torch peer is only
# syntax-checked: CI has no GPU and no PyTorch.
if(TARGET llama-decode)
  set(decode_env "LOOM_VALIDATE=1")
  if(LOOM_SANITIZE)
    list(APPEND decode_env "ASAN_OPTIONS=detect_leaks=0")
  endif()
  function(decode_test name)
    add_test(NAME ${name} COMMAND ${ARGN})
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${decode_env}" RESOURCE_LOCK gpu)
  endfunction()
  set(check $<TARGET_FILE:llama-decode> --config tiny --steps 24 --check --quiet)
  foreach(w f32 f16)
    foreach(k 1 3)
      decode_test(decode_check_${w}_inflight${k} ${check} --${w} --in-flight ${k})
    endforeach()
  endforeach()
  foreach(flag no-fuse no-reorder barrier-every no-cache)
    decode_test(decode_check_${flag} ${check} --${flag})
    decode_test(decode_check_${flag}_f16 ${check} --${flag} --f16 --in-flight 1)
  endforeach()
  # The step log at the start of the next step: older steps read from
  # their slot once the step after them is done, the newest from the outputs.
  decode_test(decode_check_early-log ${check} --early-log)
  decode_test(decode_check_early-log_f16 ${check} --early-log --f16 --in-flight 2)
  # A cache of 1024 and 768 rows: ATTENTION in 4 and 3 shares, which the
  # gather pass hands to the o-projection to combine; and the same without.
  decode_test(decode_check_gather ${check} --max-seq 1024)
  decode_test(decode_check_gather_f16 ${check} --max-seq 768 --f16 --in-flight 1)
  decode_test(decode_check_no-gather ${check} --max-seq 1024 --no-gather)
  # The shares in f16 (LOOM_ENABLE_HALF_SHARES): 3 and 2 shares, f16 weights
  # (f32 weights keep f32 shares).
  decode_test(decode_check_half-shares_f16 ${check} --max-seq 768 --f16 --half-shares)
  decode_test(decode_check_half-shares_2_f16 ${check} --max-seq 512 --f16 --half-shares --early-log --in-flight 1)
  # The staged norm input in f16 (LOOM_ENABLE_HALF_STAGE), the FFN output in
  # f16 (LOOM_ENABLE_HALF_ACT), all the halves, and with the LM head and FFN
  # split at a forced binding limit.
  decode_test(decode_check_half-stage_f16 ${check} --f16 --half-stage)
  decode_test(decode_check_half-act_f16 ${check} --f16 --half-act --in-flight 1)
  # ... and the wide attention's output (head_dim 128) in f16 for its
  # projection: 8 shares combined in the dispatch, and one share.
  set(wide --dim 256 --heads 2 --kv-heads 1 --head-dim 128 --f16 --half-act)
  decode_test(decode_check_half-act_wide_f16 ${check} ${wide})
  decode_test(decode_check_half-act_wide1_f16 ${check} ${wide} --max-seq 8 --steps 8)
  decode_test(decode_check_halves_f16 ${check} --max-seq 512 --f16 --half-stage --half-shares --half-act --early-log)
  decode_test(decode_check_half-stage_split_f16 ${check} --f16 --half-stage --half-shares --half-act --in-flight 1)
  set_tests_properties(decode_check_half-stage_split_f16 PROPERTIES ENVIRONMENT
                       "${decode_env};LOOM_MAX_BINDING_RANGE=131072")
  # ... and with the LM head (not the projections) split: its row blocks
  # read one f16 t.
  decode_test(decode_check_half-stage_split-head_f16 ${check} --vocab 4096 --f16 --half-stage --half-act)
  set_tests_properties(decode_check_half-stage_split-head_f16 PROPERTIES ENVIRONMENT
                       "${decode_env};LOOM_MAX_BINDING_RANGE=1048576")
  # Two chunks a trip for long rows (LOOM_ENABLE_LONG_ROWS): the down
  # projection's rows of 513 chunks (one pair a trip for every invocation,
  # then one odd chunk for the first) and of 768 (a pair, then a chunk for
  # every invocation).
  decode_test(decode_check_long-rows_f16 ${check} --f16 --ffn 4104 --long-rows)
  decode_test(decode_check_long-rows_768_f16 ${check} --f16 --ffn 6144 --long-rows --in-flight 1)
  # f16 KV caches (the 1b and 7b presets' default): f16 and f32 weights,
  # unfused, shared out to the o-projection (plain and half shares), the
  # wide kernel with its f16 output, and head_dim 12 (16-bit loads, not the
  # 16-byte path).
  decode_test(decode_check_kv-f16 ${check} --f16 --kv-f16)
  decode_test(decode_check_kv-f16_f32 ${check} --f32 --kv-f16 --in-flight 1)
  decode_test(decode_check_kv-f16_no-fuse ${check} --f16 --kv-f16 --no-fuse --in-flight 1)
  decode_test(decode_check_kv-f16_gather ${check} --f16 --kv-f16 --max-seq 768)
  decode_test(decode_check_kv-f16_half-shares ${check} --f16 --kv-f16 --max-seq 1024 --half-shares --in-flight 1)
  decode_test(decode_check_kv-f16_wide ${check} ${wide} --kv-f16)
  # head_dim 128, block-typed: the wide attention on its tagged form
  # (ATT_TAG), its o-projection a gate reader.
  decode_test(decode_check_wide_tag_q4_k_m ${check} --dim 256 --heads 2 --kv-heads 1 --head-dim 128 --kv-f16
              --wtype q4_k_m --ffn 768 --in-flight 1)
  decode_test(decode_check_kv-f16_hd12 ${check} --f16 --kv-f16 --dim 96 --heads 8 --kv-heads 4 --head-dim 12)
  # The tagged kernels (under the layer their barriers stay) at rows that
  # are not a multiple of 8: x read two words at a time.
  decode_test(decode_check_tags_awkward ${check} --f16 --kv-f16 --dim 64 --heads 5 --kv-heads 1 --head-dim 12
              --ffn 684 --in-flight 1)
  # A prompt, every step (prompt ones too) checked against the reference,
  # in any config, and fed one id per decode step; the script checks
  # --token against a one-id prompt, that generation goes on from the last
  # prompt id, that chunked prefill generates what prefill by decode steps
  # does, and that a bad id or chunk is a usage error.
  set(prompt --prompt-ids 5,17,300,2)
  decode_test(decode_check_prompt_f32 ${check} ${prompt} --in-flight 1)
  decode_test(decode_check_prompt_f16 ${check} ${prompt} --f16)
  decode_test(decode_check_prompt_no-fuse ${check} ${prompt} --no-fuse --in-flight 2)
  decode_test(decode_check_prompt_early-log ${check} ${prompt} --early-log --in-flight 3)
  decode_test(decode_check_prompt_gguf ${check} ${prompt} --model ${CMAKE_CURRENT_BINARY_DIR}/tiny-f16.gguf)
  set_tests_properties(decode_check_prompt_gguf PROPERTIES FIXTURES_REQUIRED gguf_models)
  decode_test(decode_check_prompt_by-decode ${check} ${prompt} --prefill-by-decode)
  # Prefill in multi-token steps (the default for a prompt): 40 ids in
  # steps of 1 (decode steps), 7 (buckets of 8, the last step 5 rows) and
  # 16 (two full steps, then 8 rows), f32 and f16, each step's last row and
  # the KV cache rows it wrote checked against the reference.
  set(prompt40 --prompt-ids 5,17,300,2,9,11,480,77,3,250,6,199,41,8,123,64,500,1,33,270,13,90,402,7,15,311,29,2,88,150,460,19,5,240,71,333,4,99,210,47)
  foreach(w f32 f16)
    foreach(ch 1 7 16)
      decode_test(decode_check_prefill${ch}_${w} ${check} ${prompt40} --steps 8 --prefill-chunk ${ch} --${w})
    endforeach()
  endforeach()
  decode_test(decode_check_prefill_kv-f16 ${check} ${prompt40} --steps 4 --prefill-chunk 16 --f16 --kv-f16)
  decode_test(decode_check_prefill_q4_k_m ${check} ${prompt40} --steps 4 --prefill-chunk 16 --wtype q4_k_m
              --ffn 768 --kv-f16)
  # The split K walk (the default): steps of 32 ids take the portable
  # tiles, whose matrices of one weight (q/k/v and the residual
  # projections) then split their K walk in two; f32 and Q4_K_M. And the
  # same steps without it (LOOM_DISABLE=split_k), the tiles unsplit.
  foreach(w f32 q4_k_m)
    decode_test(decode_check_prefill_split-k_${w} ${check} ${prompt40} --steps 4 --prefill-chunk 32 --wtype ${w})
  endforeach()
  decode_test(decode_check_prefill_no-split-k_f32 ${check} ${prompt40} --steps 4 --prefill-chunk 32)
  set_tests_properties(decode_check_prefill_no-split-k_f32 PROPERTIES ENVIRONMENT "${decode_env};LOOM_DISABLE=split_k")
  # The prefill benchmark end to end on a small model: the stable warm-up,
  # the timed prefills (steps of 4, the last of 1) and the time to the
  # first token, and the verification form; its JSON line names the mode.
  set(small --config tiny --dim 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 128 --layers 2 --json)
  decode_test(decode_bench_prefill $<TARGET_FILE:llama-decode> ${small} --bench-prefill 9 --prefill-chunk 4)
  decode_test(decode_bench_verify $<TARGET_FILE:llama-decode> ${small} --bench-prefill 3 --verify)
  # ... and deep in a context: 3 rows at position 20 after 20 ids prefilled
  # once (untimed), whose next token is the plain run's.
  decode_test(decode_bench_verify_at $<TARGET_FILE:llama-decode> ${small} --bench-prefill 3 --verify --bench-at 20)
  decode_test(decode_bench_at ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode>
              -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_bench_at.cmake)
  set_tests_properties(decode_bench_prefill PROPERTIES PASS_REGULAR_EXPRESSION
                       "\"mode\":\"bench-prefill\".*\"tokens_per_s\":[1-9]")
  set_tests_properties(decode_bench_verify PROPERTIES PASS_REGULAR_EXPRESSION
                       "\"mode\":\"bench-verify\".*\"tokens_per_s\":[1-9]")
  # A pass pattern overrides the exit status: a failure or a validation
  # message (both "llama-decode: ..." on stderr) fails the test instead.
  set_tests_properties(decode_bench_verify_at PROPERTIES PASS_REGULAR_EXPRESSION
                       "\"mode\":\"bench-verify\",.*\"rows\":3,\"at\":20,.*\"tokens_per_s\":[1-9]")
  set_tests_properties(decode_bench_prefill decode_bench_verify decode_bench_verify_at PROPERTIES
                       FAIL_REGULAR_EXPRESSION "llama-decode: ")
  decode_test(decode_prompt ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode>
              -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_prompt.cmake)
  # Quantized weights: the random weights quantized on the host (--wtype),
  # each block type and llama.cpp's Q4_K_M mix (tiny's ffn_down, rows of
  # 688, falls back to f16); every matrix in whole K blocks (ffn 768); with
  # f16 caches.
  foreach(w q8_0 q4_0 q4_k q6_k q4_k_m)
    decode_test(decode_check_${w} ${check} --wtype ${w})
  endforeach()
  decode_test(decode_check_q4_k_m_ffn768 ${check} --wtype q4_k_m --ffn 768 --in-flight 1)
  decode_test(decode_check_q4_k_m_kv-f16 ${check} --wtype q4_k_m --kv-f16 --early-log)
  # Matrices whose blocks end mid-word (q8_0 rows of 3 blocks, 102 bytes, and
  # q6_k's 210-byte blocks, over 513 rows): the buffer holds the last word.
  decode_test(decode_check_q8_0_odd ${check} --wtype q8_0 --dim 96 --heads 3 --kv-heads 1 --head-dim 32 --ffn 96
              --vocab 513 --in-flight 1)
  decode_test(decode_check_q6_k_odd ${check} --wtype q6_k --vocab 513)
  # GGUF files of them (--model): tensors to the GPU as stored, the file's
  # context and types in the banner and JSON, the synthetic model's tokens.
  foreach(w q8_0 q4_k_m)
    decode_test(decode_check_gguf_${w} ${check} --model ${CMAKE_CURRENT_BINARY_DIR}/tiny-${w}.gguf)
    set_tests_properties(decode_check_gguf_${w} PROPERTIES FIXTURES_REQUIRED gguf_models)
  endforeach()
  foreach(w f16 q4_k_m)
    decode_test(decode_gguf_${w} ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode>
                -DMODEL=${CMAKE_CURRENT_BINARY_DIR}/tiny-${w}.gguf -DWTYPE=${w}
                -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_gguf.cmake)
    set_tests_properties(decode_gguf_${w} PROPERTIES FIXTURES_REQUIRED gguf_models)
  endforeach()
  # Weights larger than one binding: a forced small limit splits the LM
  # head, the embedding and the projections into row blocks; the reference
  # still agrees on every step, and the tokens are those of the unsplit run.
  decode_test(decode_check_split ${check} --ffn 256)
  decode_test(decode_check_split_f16 ${check} --f16 --in-flight 1)
  set_tests_properties(decode_check_split PROPERTIES ENVIRONMENT "${decode_env};LOOM_MAX_BINDING_RANGE=65536")
  set_tests_properties(decode_check_split_f16 PROPERTIES ENVIRONMENT "${decode_env};LOOM_MAX_BINDING_RANGE=131072")
  # ... and over block-typed weights: the Q4_K_M mix (the LM head's Q6_K
  # and the embedding's Q4_K rows cut), and Q8_0 rows 2 bytes short of a
  # word (dim 96: 3 blocks a row), whose blocks are 128 rows.
  decode_test(decode_check_split_q4_k_m ${check} --wtype q4_k_m --vocab 1024 --in-flight 1)
  set_tests_properties(decode_check_split_q4_k_m PROPERTIES ENVIRONMENT "${decode_env};LOOM_MAX_BINDING_RANGE=131072")
  # The LM head's workgroups capped as a GPU's SM count caps them
  # (LOOM_WAVE_GROUPS; lavapipe reports none): each loops over its row
  # blocks, and the last to finish picks the best of 3.
  foreach(w f16 q4_k_m)
    decode_test(decode_check_wave_${w} ${check} --wtype ${w} --in-flight 1)
    set_tests_properties(decode_check_wave_${w} PROPERTIES ENVIRONMENT "${decode_env};LOOM_WAVE_GROUPS=3")
  endforeach()
  # The residual projections at 256 invocations (the waves pass, passes/
  # waves.c), as a GPU with fewer SMs than their workgroups gets them: with
  # LOOM_WAVE_GROUPS=4 (one SM) every one of tiny's takes its _wg256 form,
  # the Q4_K and Q6_K down projections (ffn 768) and the counted edges' forms
  # too; the profile names the kernels the plan took.
  decode_test(decode_check_wg256_q4_k_m ${check} --wtype q4_k_m --ffn 768 --in-flight 1)
  set_tests_properties(decode_check_wg256_q4_k_m PROPERTIES ENVIRONMENT "${decode_env};LOOM_WAVE_GROUPS=4")
  decode_test(decode_check_wg256_counts ${check} --wtype q4_k_m --ffn 768)
  set_tests_properties(decode_check_wg256_counts PROPERTIES ENVIRONMENT "${decode_env};LOOM_WAVE_GROUPS=4;LOOM_ENABLE=counts")
  decode_test(decode_profile_wg256 $<TARGET_FILE:llama-decode> --config tiny --wtype q4_k_m --ffn 768 --steps 4
              --profile-nodes --quiet)
  set_tests_properties(decode_profile_wg256 PROPERTIES ENVIRONMENT "${decode_env};LOOM_WAVE_GROUPS=4"
    PASS_REGULAR_EXPRESSION "\nmatvec_add_stage_tag_tq_wg256_q4_k +4 [^\n]*\n[^\n]*\nmatvec_add_stage_tag_tq_xqt_wg256_q4_k +2 [^\n]*\n[^\n]*\n[^\n]*\nmatvec_add_stage_tag_tq_xqt_wg256_q6_k +2 "
    FAIL_REGULAR_EXPRESSION "rror|VUID")
  # And q/k/v with a Q6_K Wv in its form of fewer registers (f16 caches:
  # the _kh forms, as the 1b and 7b models have them).
  decode_test(decode_check_q6w_q4_k_m ${check} --wtype q4_k_m --ffn 768 --kv-f16 --in-flight 1)
  set_tests_properties(decode_check_q6w_q4_k_m PROPERTIES ENVIRONMENT "${decode_env};LOOM_WAVE_GROUPS=4")
  decode_test(decode_profile_q6w $<TARGET_FILE:llama-decode> --config tiny --wtype q4_k_m --ffn 768 --kv-f16
              --steps 4 --profile-nodes --quiet)
  set_tests_properties(decode_profile_q6w PROPERTIES ENVIRONMENT "${decode_env};LOOM_WAVE_GROUPS=4"
    PASS_REGULAR_EXPRESSION "\nrms_norm_qkv_rope_kh_pre_xq_q6w_q4_k_vq6_k +2 "
    FAIL_REGULAR_EXPRESSION "rror|VUID")
  decode_test(decode_check_split_q8_0_odd ${check} --wtype q8_0 --dim 96 --heads 3 --kv-heads 1 --head-dim 32
              --ffn 1024)
  set_tests_properties(decode_check_split_q8_0_odd PROPERTIES ENVIRONMENT "${decode_env};LOOM_MAX_BINDING_RANGE=81920")
  # A device without float atomic adds: the model compiles through its own
  # cache with the runtime's device options, so no stage pass (and no half
  # stage, though asked for).
  decode_test(decode_check_no-atomics_f16 ${check} --f16 --half-stage --in-flight 1)
  set_tests_properties(decode_check_no-atomics_f16 PROPERTIES ENVIRONMENT "${decode_env};LOOM_ATOMIC_FLOAT=0")
  decode_test(decode_split_tokens ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode>
              -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_split.cmake)
  # --profile-nodes: the last step by op kind, then by kernel in the plan's
  # order of first use (Q4_K_M: the Q4_K and Q6_K down projections apart).
  decode_test(decode_profile_nodes $<TARGET_FILE:llama-decode> --config tiny --wtype q4_k_m --ffn 768 --steps 4
              --profile-nodes --quiet)
  set_tests_properties(decode_profile_nodes PROPERTIES
    PASS_REGULAR_EXPRESSION "by kernel:\nkernel +nodes +us +us/node\nzero +1 [^\n]*\nembed_rms_norm_qkv_rope_q4_k +1 [^\n]*\nattention_tag +4 [^\n]*\n[^\n]*\n[^\n]*\nmatvec_add_stage_tag_tq_xqt_q4_k +2 [^\n]*\n[^\n]*\n[^\n]*\nmatvec_add_stage_tag_tq_xqt_q6_k +2 "
    FAIL_REGULAR_EXPRESSION "rror|VUID")
  # Tagged vectors polled with no barrier, without the validation layer
  # (the script says why), against the CPU reference and the plain kernels.
  add_test(NAME decode_tags COMMAND ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode> -DPROBES=${LOOM_PROBES}
           -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_tags.cmake)
  set_tests_properties(decode_tags PROPERTIES RESOURCE_LOCK gpu)
  if(LOOM_SANITIZE)
    set_tests_properties(decode_tags PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endif()
  # No device needed: no validation environment, no lock.
  add_test(NAME decode_dry_run_1b COMMAND ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode>
           -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_dry_run.cmake)
  add_test(NAME decode_dry_run_types COMMAND ${CMAKE_COMMAND} -DDECODE=$<TARGET_FILE:llama-decode>
           -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/decode_dry_run_types.cmake)
  if(TARGET loom)
    decode_test(bench_decode_quick $<TARGET_FILE:loom> bench decode --config tiny --steps 4 --quick)
    decode_test(bench_decode_rounds $<TARGET_FILE:loom> bench decode --config tiny --steps 2 --quick --rounds 2
                --variants early-log,optimized,no-gather)
    decode_test(bench_decode_q4_k_m $<TARGET_FILE:loom> bench decode --config tiny --wtype q4_k_m --steps 2 --quick
                --variants optimized,kv-f16)
  endif()
endif()
# The PyTorch peer, compiled to bytecode without running it (CI has no
# PyTorch), where there is a python3: tools/deps.sh installs none.
find_program(LOOM_PYTHON3 python3)
if(LOOM_PYTHON3)
  add_test(NAME torch_decode_syntax COMMAND ${LOOM_PYTHON3} -c
           "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')"
           ${CMAKE_SOURCE_DIR}/bench/torch_decode.py)
else()
  message(STATUS "python3 not found: torch_decode_syntax (bench/torch_decode.py compiles) is not registered")
endif()
# The GPU machine's shell scripts, parsed by the shell (CI cannot run them:
# they need the GPU and the peer's libraries).
foreach(script ab_decode.sh quant_bench.sh prefill_bench.sh load_check.sh)
  add_test(NAME bench_script_syntax_${script} COMMAND sh -n ${CMAKE_SOURCE_DIR}/bench/${script})
endforeach()
