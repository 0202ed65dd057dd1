# End-to-end tests of the attncheck binary: exit codes and which stream a message goes to, as a shell
# sees them. Each runs cmake/RunAndCheck.cmake. Heartbeat lines (cli/heartbeat.hpp, every 30 s of long work)
# are off in all of them (ATTNCHECK_HEARTBEAT_SECONDS=3600): they would make a stderr check depend on the
# machine's speed (on Qwen3-0.6B two mutant cases took 15 s alone under ASan, past 30 s on a loaded machine: the
# gate of 92330aa failed them that way); cli.long_work_progress tests the heartbeat itself.
function(attncheck_cli_case name expected_exit stdout_regex stderr_regex)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:attncheck>;${ARGN}"
                   -DEXPECT_EXIT=${expected_exit} "-DEXPECT_STDOUT=${stdout_regex}"
                   "-DEXPECT_STDERR=${stderr_regex}" -P ${PROJECT_SOURCE_DIR}/cmake/RunAndCheck.cmake)
  set_tests_properties(cli.${name} PROPERTIES LABELS unit ENVIRONMENT "ATTNCHECK_HEARTBEAT_SECONDS=3600")
endfunction()

set(configs ${PROJECT_SOURCE_DIR}/core/config/hf_configs)
attncheck_cli_case(plan_preset_json 0 "\"head_dim\": 128" "^$" plan --preset qwen3-0.6b --json)
attncheck_cli_case(plan_hf_config 0 "derived: hidden_size / num_heads = 6144 / 64" "^$"
                   plan --hf-config ${configs}/EleutherAI__gpt-neox-20b.json --tp 4)
attncheck_cli_case(plan_replicated 0 "replicated on 4 ranks" "^$" plan --preset gemma-3-270m --tp 4)
attncheck_cli_case(help 0 "plan" "^$" --help)
# golden coverage: the short Gemma golden claims a window of 512 at seq 6, and query_pre_attn_scalar equal
# to head_dim: claims that bite nowhere (exit 1); a missing file is bad input (exit 2).
attncheck_cli_case(golden_coverage_inert 1 "window +NO .*sliding_window 512 at seq 6.*NOT COVERED: scale source, window"
                   "^$" golden coverage ${PROJECT_SOURCE_DIR}/golden/data/gemma-3-270m_tp1.h5)
attncheck_cli_case(golden_coverage_missing 2 "^$" "no-such.h5" golden coverage no-such.h5)
attncheck_cli_case(no_subcommand 2 "^$" "subcommand")
attncheck_cli_case(split_query_head 2 "^$" "tp_size = 3: would split a query head.*valid tp_size.*1, 2, 4, 8, 16"
                   plan --preset qwen3-0.6b --tp 3)
attncheck_cli_case(non_dividing_head_dim 2 "^$" "head_dim = absent.*hidden_size = 992 or 1008"
                   plan --hidden 1000 --heads 16)
attncheck_cli_case(missing_config 2 "^$" "--hf-config = '/nonexistent/config.json': must name an existing file"
                   plan --hf-config /nonexistent/config.json)
attncheck_cli_case(unknown_preset 2 "^$" "qwen3-0.6b" plan --preset qwen9)
attncheck_cli_case(bad_integer 2 "^$" "--hidden" plan --hidden ten --heads 16)
# Floating-point flags: empty, nan, inf or out of double's range are refused (they used to be dropped or
# taken), as are seeds beyond 2^64 - 1 (they used to saturate).
# (ctest cannot pass an empty argument; `--softcap ''` gives "--softcap: an empty value is not a number",
# `--softcap=` CLI11's "1 required FLOAT missing": both exit 2 naming the flag.)
attncheck_cli_case(empty_float_flag 2 "^$" "--softcap: 1 required FLOAT"
                   plan --hidden 64 --heads 4 --softcap=)
attncheck_cli_case(empty_rope_theta 2 "^$" "--rope-theta: 1 required FLOAT"
                   plan --hidden 64 --heads 4 --rope-theta=)
attncheck_cli_case(nan_float_flag 2 "^$" "--qk-norm-eps.*'nan' is not finite"
                   plan --hidden 64 --heads 4 --qk-norm-eps nan)
attncheck_cli_case(float_beyond_double 2 "^$" "--rotary-pct.*'1e999' is beyond the range of a double"
                   plan --hidden 64 --heads 4 --rotary-pct 1e999)
# A RoPE base at or below 1 is refused by name (4.9e-324 used to end in "non-finite value").
attncheck_cli_case(rope_theta_tiny 2 "^$" "rope_theta = .*must be a finite number > 1"
                   plan --hidden 64 --heads 4 --rope-theta 4.9e-324)
attncheck_cli_case(seed_beyond_64_bits 2 "^$" "--seed.*'99999999999999999999999' is beyond 2\\^64 - 1"
                   golden make --hidden 64 --heads 4 --seed 99999999999999999999999 -o unused.h5)
# `run --list`: every implementation with its kind, what ci/gpu-check reads to find the device ones.
if(ATTNCHECK_CUDA)
  set(device_listing "cuda-bf16-tp\tdevice")
else()
  set(device_listing "")
endif()
attncheck_cli_case(run_list 0 "reference\tdefault.*${device_listing}.*mutant-kv-head-modulo\tmutant" "^$" run --list)

# Golden files end to end: make two goldens that differ only in the softmax scale, check the right one
# with both references, turn the wrong-scale one into a candidate, and compare it with the right one:
# exit 1 and a report that localises the difference. Damaged input exits 2.
set(golden_dir ${CMAKE_CURRENT_BINARY_DIR}/golden_e2e)
file(MAKE_DIRECTORY ${golden_dir})
set(small_geometry --hidden 12 --heads 4 --kv-heads 2 --head-dim 6 --qk-norm rms --tp 4 --decode 4,1,1 --pad-keys)
attncheck_cli_case(golden_make 0 "wrote .*small.h5.*tp 4, batch 2, seq 8" "^$"
                   golden make ${small_geometry} -o ${golden_dir}/small.h5)
attncheck_cli_case(golden_make_wrong_scale 0 "wrote" "^$"
                   golden make ${small_geometry} --query-pre-attn-scalar 8 -o ${golden_dir}/wrong_scale.h5)
set_tests_properties(cli.golden_make cli.golden_make_wrong_scale PROPERTIES FIXTURES_SETUP golden_small)
attncheck_cli_case(golden_inspect 0 "head_dim 6 \\(explicit\\).*ranks/3/grads/q_proj +\\[6, 12\\]" "^$"
                   golden inspect ${golden_dir}/small.h5)
# Integrity digests (golden/SCHEMA.md): a committed golden reads verified; `golden seal` checks the schema
# before sealing (a file that is not a golden is exit 2, not sealed).
attncheck_cli_case(golden_inspect_integrity 0 "integrity: attncheck-integrity-v1 digest verified" "^$"
                   golden inspect ${PROJECT_SOURCE_DIR}/golden/data/small_softcap_padding.h5)
attncheck_cli_case(golden_seal_not_a_golden 2 "^$" "not-a-golden.h5.*(missing|no such|not)"
                   golden seal ${golden_dir}/not-a-golden.h5)
# Found by ci/fuzz-parsers (fuzz_golden_reader): metadata whose sizes make HDF5 ask for 3.4 PB. HDF5 gets
# NULL and fails the open; the file is bad input, exit 2 (ci/fuzz-parsers replays it under ASan too).
attncheck_cli_case(golden_metadata_asking_petabytes 2 "^$" "file = damaged: the HDF5 file must open"
                   golden inspect ${PROJECT_SOURCE_DIR}/parser_fuzz/regressions/golden/huge_metadata_allocation.h5)
# Ranks listed in numeric order (0, 1, 2, ..., 9, 10), not as strings sort (0, 1, 10, ...).
attncheck_cli_case(golden_inspect_ranks_in_order 0 "ranks/1/grads/v_proj#sketch +\\[128, 4\\][^a-z]+ranks/2/grads/k_norm.*ranks/9/grads/v_proj#sketch +\\[128, 4\\][^a-z]+ranks/10/grads/k_norm" "^$"
                   golden inspect ${PROJECT_SOURCE_DIR}/golden/data/qwen3-32b_tp16.h5)
attncheck_cli_case(golden_check_reference_tp 0 "PASS: 33 tensors.*1 of 1 golden files pass with reference-tp" "^$"
                   golden check ${golden_dir}/small.h5 --impl reference-tp)
attncheck_cli_case(golden_check_reference 0 "rank gradients not compared.*PASS: 9 tensors" "^$"
                   golden check ${golden_dir}/small.h5 --impl reference)
attncheck_cli_case(golden_run_wrong_scale 0 "wrote" "^$"
                   golden run ${golden_dir}/wrong_scale.h5 --impl reference-tp -o ${golden_dir}/wrong_scale_candidate.h5)
set_tests_properties(cli.golden_run_wrong_scale PROPERTIES FIXTURES_SETUP golden_candidate)
attncheck_cli_case(compare_wrong_scale 1 "out +MISMATCH.*positions 1,2,3,4,5,6,7.*FAIL" "^$"
                   compare ${golden_dir}/small.h5 ${golden_dir}/wrong_scale_candidate.h5)
attncheck_cli_case(compare_json 1 "\"passed\": false" "^$"
                   compare ${golden_dir}/small.h5 ${golden_dir}/wrong_scale_candidate.h5 --json)
set_tests_properties(cli.golden_inspect cli.golden_check_reference_tp cli.golden_check_reference
                     cli.golden_run_wrong_scale cli.compare_wrong_scale cli.compare_json
                     PROPERTIES FIXTURES_REQUIRED golden_small)
set_tests_properties(cli.compare_wrong_scale cli.compare_json PROPERTIES FIXTURES_REQUIRED "golden_small;golden_candidate")
attncheck_cli_case(golden_unknown_impl 2 "^$" "valid: reference, reference-tp"
                   golden check ${golden_dir}/small.h5 --impl cuda)
set_tests_properties(cli.golden_unknown_impl PROPERTIES FIXTURES_REQUIRED golden_small)
attncheck_cli_case(golden_missing_file 2 "^$" "must be an existing regular file" golden inspect /nonexistent/golden.h5)
attncheck_cli_case(golden_not_hdf5 2 "^$" "not HDF5" golden inspect ${PROJECT_SOURCE_DIR}/README.md)
attncheck_cli_case(golden_bad_decode 2 "^$" "--decode = 4,x" golden make --hidden 16 --heads 4 --decode 4,x -o ${golden_dir}/x.h5)
attncheck_cli_case(golden_run_unsharded 0 "wrote" "^$"
                   golden run ${golden_dir}/small.h5 --impl reference -o ${golden_dir}/unsharded_candidate.h5)
set_tests_properties(cli.golden_run_unsharded PROPERTIES FIXTURES_REQUIRED golden_small FIXTURES_SETUP golden_unsharded)
attncheck_cli_case(compare_unsharded 0 "rank gradients not compared.*PASS: 9 tensors" "^$"
                   compare ${golden_dir}/small.h5 ${golden_dir}/unsharded_candidate.h5)
set_tests_properties(cli.compare_unsharded PROPERTIES FIXTURES_REQUIRED "golden_small;golden_unsharded")
attncheck_cli_case(golden_make_generated 0 "wrote" "^$"
                   golden make ${small_geometry} --weights generated --inputs generated --sketch-activations
                   -o ${golden_dir}/generated.h5)
set_tests_properties(cli.golden_make_generated PROPERTIES FIXTURES_SETUP golden_generated)
attncheck_cli_case(golden_expand 0 "with its weights and inputs stored" "^$"
                   golden expand ${golden_dir}/generated.h5 -o ${golden_dir}/expanded.h5)
set_tests_properties(cli.golden_expand PROPERTIES FIXTURES_REQUIRED golden_generated FIXTURES_SETUP golden_expanded)
attncheck_cli_case(golden_check_generated_and_expanded 0 "2 of 2 golden files pass with reference-tp" "^$"
                   golden check ${golden_dir}/generated.h5 ${golden_dir}/expanded.h5 --impl reference-tp)
set_tests_properties(cli.golden_check_generated_and_expanded PROPERTIES FIXTURES_REQUIRED "golden_generated;golden_expanded")
# Sketched goldens through the command line: a full candidate meets the sketches.
attncheck_cli_case(golden_make_sketched 0 "wrote" "^$"
                   golden make ${small_geometry} --weights generated --sketch-gradients -o ${golden_dir}/sketched.h5)
attncheck_cli_case(golden_run_on_sketched 0 "wrote" "^$"
                   golden run ${golden_dir}/sketched.h5 --impl reference-tp -o ${golden_dir}/sketched_candidate.h5)
attncheck_cli_case(compare_sketched 0 "grads/q_proj#sketch +ok.*PASS: 33 tensors" "^$"
                   compare ${golden_dir}/sketched.h5 ${golden_dir}/sketched_candidate.h5)
attncheck_cli_case(compare_damaged_candidate 2 "^$" "not HDF5"
                   compare ${golden_dir}/sketched.h5 ${PROJECT_SOURCE_DIR}/README.md)
set_tests_properties(cli.golden_make_sketched PROPERTIES FIXTURES_SETUP golden_sketched)
set_tests_properties(cli.golden_run_on_sketched PROPERTIES FIXTURES_REQUIRED golden_sketched FIXTURES_SETUP golden_sketched_candidate)
set_tests_properties(cli.compare_sketched PROPERTIES FIXTURES_REQUIRED "golden_sketched;golden_sketched_candidate")
set_tests_properties(cli.compare_damaged_candidate PROPERTIES FIXTURES_REQUIRED golden_sketched)
# attncheck run over a folder of small goldens (the committed ones are checked by golden.committed_run_*).
set(run_dir ${CMAKE_CURRENT_BINARY_DIR}/golden_run_e2e)
file(MAKE_DIRECTORY ${run_dir})
attncheck_cli_case(run_make 0 "wrote" "^$" golden make --preset pythia-410m --batch 1 --seq 3 --weights generated
                   --sketch-gradients -o ${run_dir}/pythia.h5)
set_tests_properties(cli.run_make PROPERTIES FIXTURES_SETUP golden_run_dir)
attncheck_cli_case(run_small_folder 0 "pythia.h5 +reference +pass.*pythia.h5 +reference-tp +pass.*of [0-9]+ \\(golden, implementation\\) pairs pass" "^$"
                   run --goldens ${run_dir})
set_tests_properties(cli.run_small_folder PROPERTIES FIXTURES_REQUIRED golden_run_dir)
# --jobs is an upper bound: where that many pairs would not fit in the memory available (here --max-memory,
# 300 MiB; each pair counts 3 x its layer's bytes + 64 MiB, 257 MiB for this golden), fewer run, and stderr says so.
attncheck_cli_case(run_jobs_within_memory 0 "pythia.h5 +reference +pass.*pythia.h5 +reference-tp +pass"
                   "pythia.h5: 1 pair side by side, not [0-9]+: each may take 256.8 MiB .3 x its layer's 64.3 MiB"
                   --max-memory 300M run --goldens ${run_dir} --jobs 4)
set_tests_properties(cli.run_jobs_within_memory PROPERTIES FIXTURES_REQUIRED golden_run_dir)
attncheck_cli_case(run_missing_folder 2 "^$" "--goldens = /nonexistent: must be a folder" run --goldens /nonexistent)
# A golden that does not fit in the memory left is named "not checked" and the goldens after it are still checked;
# the exit code (1) and the summary say so. Under 300 MiB the GPT-NeoX-20B golden (1.2 GB of weights) is not read.
set(data ${PROJECT_SOURCE_DIR}/golden/data)
attncheck_cli_case(check_goes_on_past_a_golden_too_large 1
  "gpt-neox-20b_tp1.h5 vs reference: NOT CHECKED: not enough memory.*ladder_03_explicit-head-dim.h5 vs reference: hidden 32.*PASS.*2 of 3 golden files pass with reference, 1 NOT CHECKED \\(not enough memory: not a pass\\)\nnot checked: [^\n]*gpt-neox-20b_tp1.h5"
  ".*" --max-memory 300M golden check ${data}/ladder_01_plain-mha.h5 ${data}/gpt-neox-20b_tp1.h5
  ${data}/ladder_03_explicit-head-dim.h5 --impl reference)
set(too_large_run ${CMAKE_CURRENT_BINARY_DIR}/too_large_run)
file(REMOVE_RECURSE ${too_large_run})
file(MAKE_DIRECTORY ${too_large_run})
foreach(golden gpt-neox-20b_tp1.h5 ladder_03_explicit-head-dim.h5)
  file(CREATE_LINK ${data}/${golden} ${too_large_run}/${golden} SYMBOLIC)
endforeach()
attncheck_cli_case(run_goes_on_past_a_golden_too_large 1
  "ladder_03_explicit-head-dim.h5 +reference +pass.*gpt-neox-20b_tp1.h5 +reference +UNCHECKED +not checked: not enough memory.*1 NOT CHECKED"
  ".*" --max-memory 300M run --goldens ${too_large_run} --impl reference)
# Without --goldens, `run` reads golden/data of the folder it runs in (no build machine's path compiled
# in); ctest runs this in build/cli, which has none.
attncheck_cli_case(run_default_goldens_relative 2 "^$" "--goldens = golden/data: must be a folder.*repository's root"
                   run)
# Writing a candidate over the golden it was computed from is refused before anything is written.
attncheck_cli_case(golden_run_output_is_input 2 "^$" "--output = .*small_window_masked_rows.h5: is the input file"
                   golden run ${PROJECT_SOURCE_DIR}/golden/data/small_window_masked_rows.h5 --impl reference
                   -o ${PROJECT_SOURCE_DIR}/golden/data/../data/small_window_masked_rows.h5)
# Mutants against a committed golden: each must fail (exit 1) with the report naming where. The conformance
# ladder's goldens (GQA, explicit head_dim, decoding, TP 2): what the report says is the same on a model-sized
# golden, and a failing fp64 candidate's 17 yardstick runs take a second under ASan instead of half a minute
# on Qwen3-0.6B (python.quotient_scale_goldens and golden.caught_mutant-* hold mutants to the model goldens).
attncheck_cli_case(mutant_swap_query_heads 1 "grads/o_proj +MISMATCH.*query heads 0,1.*0 of 1 golden files pass" "^$"
                   golden check ${PROJECT_SOURCE_DIR}/golden/data/ladder_14_tp2-rank-gradients.h5
                   --impl mutant-swap-query-heads)
attncheck_cli_case(mutant_quotient_scale 1 "out +MISMATCH.*positions 1,2,3,4,5,6,7.*0 of 1 golden files pass" "^$"
                   golden check ${PROJECT_SOURCE_DIR}/golden/data/ladder_03_explicit-head-dim.h5
                   --impl mutant-quotient-scale)
attncheck_cli_case(mutant_top_left_causal 1 "decode/out +MISMATCH.*positions 4,5,6,7 .*out +ok.*0 of 1 golden files pass"
                   "^$" golden check ${PROJECT_SOURCE_DIR}/golden/data/ladder_13_kv-cache-decode.h5
                   --impl mutant-top-left-causal)
# Where the bug cannot show, the mutant is right: the GQA rung's head_dim is the quotient (32 / 4).
attncheck_cli_case(mutant_harmless_where_bug_cannot_show 0 "1 of 1 golden files pass with mutant-quotient-scale" "^$"
                   golden check ${PROJECT_SOURCE_DIR}/golden/data/ladder_02_gqa.h5 --impl mutant-quotient-scale)
# A mutant that crashes (shapes built from the quotient) fails the golden with its message (exit 1).
attncheck_cli_case(mutant_crash_is_a_failure 1 "FAIL: mutant-head-dim-from-quotient raised: size mismatch.*0 of 1 golden files pass" "^$"
                   golden check ${PROJECT_SOURCE_DIR}/golden/data/ladder_03_explicit-head-dim.h5
                   --impl mutant-head-dim-from-quotient)

# TP conventions (golden/SCHEMA.md, "TP conventions"). `plan --convention both` shows the two partitions
# side by side: under megatron-equal-block, Qwen3-32B's rank 1 holds query heads 5-7 and KV head 0's K
# and V (replicated-kv: heads 4-7 and the replicated KV head 0), rank 0 no K or V at all.
attncheck_cli_case(plan_conventions_qwen3_32b_tp16 0
                   "rank +computes +replicated-kv +megatron-equal-block +o_proj columns\n +0 +q0-3 +q0-3 k0 v0 +q0-4 +0-511\n +1 +q4-7 +q4-7 k0 v0 +q5-7 k0 v0 +512-1023\n"
                   "^$" plan --preset qwen3-32b --tp 16 --convention both)
attncheck_cli_case(plan_convention_unpartitionable 2 "^$"
                   "tp_convention = megatron-equal-block: .* = 20 fused QKV rows.*tp_size 1, 2, 4 under megatron-equal-block"
                   plan --hidden 16 --heads 8 --kv-heads 1 --head-dim 2 --tp 8 --convention megatron-equal-block)
# Context parallelism (core/model/parallel_layout.hpp): the (tp, cp) rank table for both schemes. Qwen3-0.6B at
# TP 2 x Ulysses CP 8: rank 11 (tp 1, cp 5) attends query head 13 with KV head 6, which rank 9 shares; TP 2 x
# ring CP 4 load-balanced over 100 tokens: rank 2 (tp 0, cp 1) holds chunks 1 and 6 and receives from rank 0.
attncheck_cli_case(plan_cp_ulysses 0
                   "context parallel: ulysses, cp_size 8.*world size 16 = tp 2 x cp 8.*\n +11 +1 +5 +5 +64-75 +13 +6 +rank 9\n.*replicated on 2 CP ranks"
                   "^$" plan --preset qwen3-0.6b --tp 2 --cp 8 --cp-scheme ulysses --seq 100)
attncheck_cli_case(plan_cp_ring 0
                   "context parallel: ring, cp_size 4 \\(load-balanced: 8 chunks.*\n +2 +0 +1 +1, 6 +13-25, 76-87 +0-7 +0-3 +0 +4\n"
                   "^$" plan --preset qwen3-0.6b --tp 2 --cp 4 --cp-scheme ring --seq 100)
attncheck_cli_case(plan_cp_ring_json 0 "\"context_parallel\": \\{.*\"chunk_count\": 8.*\"scheme\": \"ring\""
                   "^$" plan --preset qwen3-0.6b --tp 2 --cp 4 --cp-scheme ring --json)
attncheck_cli_case(plan_cp_ulysses_refused 2 "^$"
                   "cp_size = 3: Ulysses gives each CP rank 1/3 of its TP rank's 8 query heads.*valid Ulysses CP sizes at TP 2: 1, 2, 4, 8.*--cp-scheme ring"
                   plan --preset qwen3-0.6b --tp 2 --cp 3 --cp-scheme ulysses)
attncheck_cli_case(plan_cp_scheme_required 2 "^$" "--cp-scheme = absent.*--cp-scheme ulysses or --cp-scheme ring"
                   plan --preset qwen3-0.6b --cp 2)
attncheck_cli_case(plan_cp_zero 2 "^$" "--cp = 0: must be >= 1" plan --preset qwen3-0.6b --cp 0)
attncheck_cli_case(plan_cp_chunks_without_scheme 2 "^$" "--cp-chunks = contiguous: chunks a context-parallel layout"
                   plan --preset qwen3-0.6b --cp-chunks contiguous)
attncheck_cli_case(plan_cp_chunks_with_ulysses 2 "^$" "--cp-chunks = load-balanced: Ulysses holds one contiguous chunk"
                   plan --preset qwen3-0.6b --cp 2 --cp-scheme ulysses --cp-chunks load-balanced)
# A golden with a context-parallel layout (SCHEMA.md "Context-parallel layouts"): made, inspected, and checked
# with reference-cp, which runs the layout it states (here Ulysses over 2 CP ranks of each of 2 TP ranks, each
# TP rank's one KV head replicated on both); a golden without a layout it declines by name.
attncheck_cli_case(golden_make_cp 0 "wrote .*cp_ulysses.h5" "^$"
                   golden make --hidden 16 --heads 4 --kv-heads 2 --head-dim 4 --tp 2 --cp 2 --cp-scheme ulysses --seq 7
                   --batch 2 --pad-keys -o ${golden_dir}/cp_ulysses.h5)
set_tests_properties(cli.golden_make_cp PROPERTIES FIXTURES_SETUP golden_cp)
attncheck_cli_case(golden_inspect_cp 0 "context parallel: ulysses, cp_size 2" "^$" golden inspect ${golden_dir}/cp_ulysses.h5)
attncheck_cli_case(golden_check_cp 0 "PASS: .*1 of 1 golden files pass with reference-cp" "^$"
                   golden check ${golden_dir}/cp_ulysses.h5 --impl reference-cp)
set_tests_properties(cli.golden_inspect_cp cli.golden_check_cp PROPERTIES FIXTURES_REQUIRED golden_cp)
attncheck_cli_case(golden_check_cp_without_layout 1 "DECLINED \\(unsupported\\).*a case without a context-parallel layout" "^$"
                   golden check ${golden_dir}/small.h5 --impl reference-cp)
set_tests_properties(cli.golden_check_cp_without_layout PROPERTIES FIXTURES_REQUIRED golden_small)
attncheck_cli_case(golden_make_cp_impossible 2 "^$" "cp_size = 3: Ulysses gives each CP rank 1/3"
                   golden make --hidden 16 --heads 4 --kv-heads 2 --head-dim 4 --tp 2 --cp 3 --cp-scheme ulysses
                   -o ${golden_dir}/cp_impossible.h5)
attncheck_cli_case(golden_make_unpartitionable 2 "^$" "20 fused QKV rows"
                   golden make --hidden 16 --heads 8 --kv-heads 1 --head-dim 2 --tp 8 --tp-convention megatron-equal-block
                   -o ${golden_dir}/unpartitionable.h5)
# The check is real: a golden at TP 8 over 2 KV heads (P > H_kv) whose per-rank gradients are held as
# megatron-equal-block (blocks of 6 fused rows: half heads, a KV head's K rows on two ranks). The
# reference's own candidate (replicated-kv) passes it through regrouping; a candidate declaring
# megatron-equal-block passes it as is, and fails, naming rank and tensor, with one held K row changed.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(megatron_geometry --hidden 16 --heads 8 --kv-heads 2 --head-dim 4 --qk-norm rms --qkv-bias --tp 8 --batch 1 --seq 5)
attncheck_cli_case(tp_convention_golden_make 0 "tp 8, batch 1, seq 5; per-rank gradients held as megatron-equal-block" "^$"
                   golden make ${megatron_geometry} --tp-convention megatron-equal-block -o ${golden_dir}/megatron.h5)
attncheck_cli_case(tp_convention_inspect 0 "per-rank gradients held as megatron-equal-block.*ranks/2/grads/k_proj +\\[2, 16\\].*ranks/3/grads/k_proj +\\[2, 16\\]" "^$"
                   golden inspect ${golden_dir}/megatron.h5)
attncheck_cli_case(tp_convention_reference_candidate 0 "wrote" "^$"
                   golden run ${golden_dir}/megatron.h5 --impl reference-tp -o ${golden_dir}/megatron_reference_candidate.h5)
attncheck_cli_case(tp_convention_replicated_candidate_regrouped 0
                   "judged as the candidate holds them, replicated-kv; the expected megatron-equal-block ones regrouped.*ranks/0/grads/k_proj +ok.*PASS: 83 tensors"
                   "^$" compare ${golden_dir}/megatron.h5 ${golden_dir}/megatron_reference_candidate.h5)
attncheck_cli_case(tp_convention_golden_check 0 "judged as reference-tp holds them, replicated-kv.*1 of 1 golden files pass with reference-tp" "^$"
                   golden check ${golden_dir}/megatron.h5 --impl reference-tp)
add_test(NAME cli.tp_convention_megatron_candidate
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tp_convention_candidate.py ${golden_dir}/megatron.h5
                 ${golden_dir}/megatron_candidate.h5)
add_test(NAME cli.tp_convention_perturbed_candidate
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tp_convention_candidate.py ${golden_dir}/megatron.h5
                 ${golden_dir}/megatron_perturbed_candidate.h5 --perturb-k-row 3 1)
set_tests_properties(cli.tp_convention_megatron_candidate cli.tp_convention_perturbed_candidate PROPERTIES LABELS unit)
# Megatron's holdings have no ranks/0/grads/k_proj (rank 0 holds q rows 0-5 alone): 59 tensors, not 83.
attncheck_cli_case(tp_convention_megatron_candidate_passes 0 "ranks/3/grads/k_proj +ok.*PASS: 59 tensors" "^$"
                   compare ${golden_dir}/megatron.h5 ${golden_dir}/megatron_candidate.h5)
# Rank 3 holds K rows 2-3 (of KV head 0): its local row 1 is the layer's K row 3.
attncheck_cli_case(tp_convention_perturbed_k_row_fails 1
                   "ranks/2/grads/k_proj +ok.*ranks/3/grads/k_proj +MISMATCH .*16 elements: ranks 3; kv heads 0 .*FAIL: 1 of 59 tensors"
                   "^$" compare ${golden_dir}/megatron.h5 ${golden_dir}/megatron_perturbed_candidate.h5)
set_tests_properties(cli.tp_convention_golden_make PROPERTIES FIXTURES_SETUP golden_megatron)
set_tests_properties(cli.tp_convention_reference_candidate PROPERTIES FIXTURES_REQUIRED golden_megatron
                     FIXTURES_SETUP golden_megatron_reference)
set_tests_properties(cli.tp_convention_megatron_candidate cli.tp_convention_perturbed_candidate PROPERTIES
                     FIXTURES_REQUIRED golden_megatron FIXTURES_SETUP golden_megatron_candidates)
set_tests_properties(cli.tp_convention_inspect cli.tp_convention_golden_check PROPERTIES FIXTURES_REQUIRED golden_megatron)
set_tests_properties(cli.tp_convention_replicated_candidate_regrouped PROPERTIES
                     FIXTURES_REQUIRED "golden_megatron;golden_megatron_reference")
set_tests_properties(cli.tp_convention_megatron_candidate_passes cli.tp_convention_perturbed_k_row_fails PROPERTIES
                     FIXTURES_REQUIRED "golden_megatron;golden_megatron_candidates")
# Sketched: the golden's per-rank sketches regroup line by line, as the gradients they sketch.
attncheck_cli_case(tp_convention_sketched_golden_make 0 "wrote" "^$"
                   golden make ${megatron_geometry} --tp-convention megatron-equal-block --weights generated
                   --sketch-gradients -o ${golden_dir}/megatron_sketched.h5)
attncheck_cli_case(tp_convention_sketched_reference_candidate 0 "wrote" "^$"
                   golden run ${golden_dir}/megatron_sketched.h5 --impl reference-tp
                   -o ${golden_dir}/megatron_sketched_candidate.h5)
attncheck_cli_case(tp_convention_sketched_regrouped 0 "regrouped.*ranks/0/grads/k_proj#sketch +ok.*PASS: 83 tensors" "^$"
                   compare ${golden_dir}/megatron_sketched.h5 ${golden_dir}/megatron_sketched_candidate.h5)
set_tests_properties(cli.tp_convention_sketched_golden_make PROPERTIES FIXTURES_SETUP golden_megatron_sketched)
set_tests_properties(cli.tp_convention_sketched_reference_candidate PROPERTIES FIXTURES_REQUIRED golden_megatron_sketched
                     FIXTURES_SETUP golden_megatron_sketched_candidate)
set_tests_properties(cli.tp_convention_sketched_regrouped PROPERTIES
                     FIXTURES_REQUIRED "golden_megatron_sketched;golden_megatron_sketched_candidate")

# Declined parts (golden/SCHEMA.md, "Candidate files"): a candidate that declines decoding and one rank's
# k_norm passes on the rest, each declined tensor shown with its reason and counted apart; one that
# declines a part and also supplies it, or declines out, is bad input.
attncheck_cli_case(golden_run_reference_tp 0 "wrote" "^$"
                   golden run ${golden_dir}/small.h5 --impl reference-tp -o ${golden_dir}/small_candidate.h5)
set_tests_properties(cli.golden_run_reference_tp PROPERTIES FIXTURES_REQUIRED golden_small
                     FIXTURES_SETUP golden_small_candidate)
set(decline_parts ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/decline_parts.py ${golden_dir}/small_candidate.h5)
add_test(NAME cli.decline_parts_decode_and_a_rank_tensor
         COMMAND ${decline_parts} ${golden_dir}/declined.h5 "decode=no KV cache in this implementation"
                 "ranks/2/grads/k_norm=not gathered")
add_test(NAME cli.decline_parts_and_supply_them
         COMMAND ${decline_parts} ${golden_dir}/declined_and_supplied.h5 --keep "decode=no KV cache")
add_test(NAME cli.decline_parts_out COMMAND ${decline_parts} ${golden_dir}/declined_out.h5 "out=forward not run")
set_tests_properties(cli.decline_parts_decode_and_a_rank_tensor cli.decline_parts_and_supply_them cli.decline_parts_out
                     PROPERTIES LABELS unit FIXTURES_REQUIRED "golden_small;golden_small_candidate"
                     FIXTURES_SETUP golden_declined_candidates)
attncheck_cli_case(compare_declined 0
                   "decode/out +declined +- +- +- +declined: no KV cache in this implementation.*ranks/2/grads/k_norm +declined .*declined: not gathered.*PASS: 31 tensors within .*; 2 declined \\(listed above, not judged\\)"
                   "^$" compare ${golden_dir}/small.h5 ${golden_dir}/declined.h5)
attncheck_cli_case(compare_declined_json 0 "\"declined\": 2,[^}]*\"failed\": 0,[^}]*\"passed\": 31.*\"declined_reason\": \"no KV cache in this implementation\"" "^$"
                   compare ${golden_dir}/small.h5 ${golden_dir}/declined.h5 --json)
attncheck_cli_case(compare_declined_and_supplied 2 "^$" "/result/declined@decode.*/result/decode exists \\(it disagrees with itself\\)"
                   compare ${golden_dir}/small.h5 ${golden_dir}/declined_and_supplied.h5)
attncheck_cli_case(compare_declined_out 2 "^$" "/result/declined@out.*out cannot be declined"
                   compare ${golden_dir}/small.h5 ${golden_dir}/declined_out.h5)
set_tests_properties(cli.compare_declined cli.compare_declined_json cli.compare_declined_and_supplied cli.compare_declined_out
                     PROPERTIES FIXTURES_REQUIRED "golden_small;golden_declined_candidates")
# `attncheck run` counts declined tensors per pair and in its summary: a worker declining decoding on a
# folder holding one golden that decodes (and one that does not).
set(declined_run_dir ${CMAKE_CURRENT_BINARY_DIR}/golden_run_declined)
file(MAKE_DIRECTORY ${declined_run_dir})
attncheck_cli_case(run_declined_make 0 "wrote" "^$" golden make --hidden 12 --heads 4 --kv-heads 2 --head-dim 6 --tp 2
                   --decode 4,1,1 --batch 1 --seq 6 -o ${declined_run_dir}/decoding.h5)
attncheck_cli_case(run_declined_make_plain 0 "wrote" "^$" golden make --hidden 12 --heads 4 --kv-heads 2 --head-dim 6
                   --tp 2 --batch 1 --seq 6 -o ${declined_run_dir}/plain.h5)
set_tests_properties(cli.run_declined_make cli.run_declined_make_plain PROPERTIES FIXTURES_SETUP golden_run_declined)
set(declining_worker "exec:${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/properties/declining_worker.py $<TARGET_FILE:attncheck> reference-tp")
attncheck_cli_case(run_declined_tensors 0
                   "decoding.h5 +exec:.* +pass\\* +(grads|ranks|out)[a-z/_#0-9]* +[0-9.e+-]+ +1\n.*plain.h5 +exec:.* +pass +[a-z/_#0-9]+ +[0-9.e+-]+ +0\n.*2 of 2 \\(golden, implementation\\) pairs pass, 0 unsupported; 1 declined tensor in 1 of the pairs run"
                   "^$" run --goldens ${declined_run_dir} --impl ${declining_worker})
set_tests_properties(cli.run_declined_tensors PROPERTIES FIXTURES_REQUIRED golden_run_declined)
# `golden run` writes what the implementation declined into its candidate (an exec: worker's /result/declined).
attncheck_cli_case(golden_run_worker_declines 0 "wrote" "^$"
                   golden run ${golden_dir}/small.h5 --impl ${declining_worker} -o ${golden_dir}/worker_declined.h5)
set_tests_properties(cli.golden_run_worker_declines PROPERTIES FIXTURES_REQUIRED golden_small
                     FIXTURES_SETUP golden_worker_declined)
attncheck_cli_case(compare_worker_declined 0 "decode/out +declined .*declined: no KV cache in this worker.*; 1 declined" "^$"
                   compare ${golden_dir}/small.h5 ${golden_dir}/worker_declined.h5)
set_tests_properties(cli.compare_worker_declined PROPERTIES FIXTURES_REQUIRED "golden_small;golden_worker_declined")

# `attncheck run --junit`: read back by a JUnit parser (junitparser, ci/requirements.txt).
add_test(NAME cli.run_junit
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/junit_test.py $<TARGET_FILE:attncheck>
                 ${PROJECT_SOURCE_DIR}/golden/data)
set_tests_properties(cli.run_junit PROPERTIES LABELS unit)
# Latent attention's hostile inputs: longrope goldens read back, a latent weight's gradient declined, a derived
# scale that overflows refused by its attribute, CP layouts reference-cp refuses refused by golden make.
add_test(NAME cli.latent_hostile_inputs
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/latent_hostile_inputs_test.py $<TARGET_FILE:attncheck>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/latent_hostile_inputs)
set_tests_properties(cli.latent_hostile_inputs PROPERTIES LABELS unit)
# Valid XML whatever a golden's name or a worker's reason holds: control characters, bytes that are not UTF-8,
# U+FFFE / U+FFFF are written visibly (cli/xml_text.hpp), read back by expat.
add_test(NAME cli.run_junit_hostile_text
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/junit_hostile_text_test.py $<TARGET_FILE:attncheck>
                 ${CMAKE_CURRENT_BINARY_DIR}/junit_hostile_text)
set_tests_properties(cli.run_junit_hostile_text PROPERTIES LABELS unit)
# `--html FILE`: the report of compare, golden check, run, replay and fuzz, parsed back
# (cli/html_report_test.py), and rendered by headless Chromium with its picture checked pixel by pixel
# (cli/html_report_browser_test.py; "Not Run" without a browser: ci/setup installs one).
add_test(NAME cli.html_report
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/html_report_test.py $<TARGET_FILE:attncheck>
                 ${PROJECT_SOURCE_DIR}/golden/data)
set_tests_properties(cli.html_report PROPERTIES LABELS unit)
add_test(NAME cli.html_report_browser
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/html_report_browser_test.py
                 $<TARGET_FILE:attncheck> ${PROJECT_SOURCE_DIR}/golden/data)
set_tests_properties(cli.html_report_browser PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
# RoPE scaling: the frequencies and attention factor `plan --json` shows, against transformers' own (run
# as attncheck.adapters.hf_transformers runs it, from this tree's python/).
add_test(NAME cli.rope_frequencies_transformers
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/rope_frequencies_test.py $<TARGET_FILE:attncheck>
                 ${PROJECT_SOURCE_DIR}/core/config/hf_configs)
set_tests_properties(cli.rope_frequencies_transformers PROPERTIES LABELS unit
                     ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/python")
# Stored yardsticks: used when current, ignored when stale, refused when malformed (golden/SCHEMA.md).
add_test(NAME cli.stored_yardstick
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/stored_yardstick_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(cli.stored_yardstick PROPERTIES LABELS unit)
# A stored yardstick never loosens a check (bound to the integrity digest, else recomputed); a /yardstick that
# is a dataset, a named datatype or a link is exit 2 naming it in compare, golden check/yardstick and run.
add_test(NAME cli.hostile_yardstick
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/hostile_yardstick_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(cli.hostile_yardstick PROPERTIES LABELS unit)
# golden check goes on past a golden the implementation declines (marked declined, with its reason); a
# worker's timeout is its own verdict ("no answer within N s") in golden check and run, and the next golden
# gets a fresh worker.
add_test(NAME cli.golden_check_verdicts
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/golden_check_verdicts_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(cli.golden_check_verdicts PROPERTIES LABELS unit)
# A golden replaced while the implementation runs lends it nothing: the yardstick is the golden read's
# (issue 56.1; cli/golden_swap_test.py builds both goldens and the swapping worker).
add_test(NAME cli.golden_swapped_mid_check
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/golden_swap_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(cli.golden_swapped_mid_check PROPERTIES LABELS python)
# Every --json output holds to its schema in docs/json/ (jsonschema); the schemas' enums are the one vocabulary
# of verdict and status words (docs/JSON.md). Label python: it runs torch-cpu-fp32, which the ASan build lacks.
add_test(NAME cli.json_schemas
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/json_schemas_test.py $<TARGET_FILE:attncheck>
                 ${PROJECT_SOURCE_DIR}/docs/json ${PROJECT_SOURCE_DIR}/golden/data)
set_tests_properties(cli.json_schemas PROPERTIES LABELS python ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/python")
# Reading a golden is one memory estimate, generated tensors included, checked before anything large is
# allocated; the measured peak stays below it (peak resident sizes: left out of the ASan stage, ci/test).
add_test(NAME cli.reading_memory
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/reading_memory_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(cli.reading_memory PROPERTIES LABELS unit)
# Long computations print an estimate and progress lines on stderr (cli/heartbeat.hpp); seconds of fp64
# reference work, left out of the ASan stage (ci/test).
add_test(NAME cli.long_work_progress
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/long_work_progress_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(cli.long_work_progress PROPERTIES LABELS unit)

# Backends are loaded only when used (impl/plugin_loader.hpp): the light commands map neither LibTorch nor
# CUDA, a torch-* name loads the torch plugin, and a missing, foreign or stale plugin is exit 2 naming it.
# The stale one is a plugin built with another ABI tag (impl/testing/stale_plugin.cpp).
add_library(attncheck_stale_test_plugin MODULE ${PROJECT_SOURCE_DIR}/impl/testing/stale_plugin.cpp)
target_link_libraries(attncheck_stale_test_plugin PRIVATE attncheck_impl attncheck_flags)
set_target_properties(attncheck_stale_test_plugin PROPERTIES
  OUTPUT_NAME attncheck_torch LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/stale_plugin)
add_test(NAME cli.starts_without_backends
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/backend_loading_test.py $<TARGET_FILE:attncheck>
                 $<IF:$<BOOL:${ATTNCHECK_TORCH}>,ON,OFF> ${CMAKE_CURRENT_BINARY_DIR}/stale_plugin)
set_tests_properties(cli.starts_without_backends PROPERTIES LABELS unit)
