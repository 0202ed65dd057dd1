# End to end: `attncheck fuzz`, `mutants` and `replay` (label property). Included from cli/ after
# attncheck_cli_case() exists.
function(attncheck_fuzz_case name expected_exit stdout_regex stderr_regex timeout)
  add_test(NAME fuzz.${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:attncheck>;${ARGN}"
                   -DEXPECT_EXIT=${expected_exit} "-DEXPECT_STDOUT=${stdout_regex}"
                   "-DEXPECT_STDERR=${stderr_regex}" -DTIMEOUT=${timeout} -P ${PROJECT_SOURCE_DIR}/cmake/RunAndCheck.cmake)
  set_tests_properties(fuzz.${name} PROPERTIES LABELS property)
endfunction()

set(fuzz_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz_e2e)
attncheck_fuzz_case(reference_tp_clean 0 "fuzz reference-tp: 400 cases \\(0 unsupported\\)" "^$" 120
                    fuzz --impl reference-tp --cases 400 --seed 7 --repro-dir ${fuzz_dir})
# LibTorch's latent attention on the latent profile, sinks included: clean in fp64, and in fp32 within the
# latent yardstick's tolerance (reference/emulated_latent_layer.hpp); neither declines a case.
attncheck_fuzz_case(torch_fp64_latent_clean 0 "fuzz torch-cpu-fp64: 300 cases \\(0 unsupported\\)" "^$" 120
                    fuzz --impl torch-cpu-fp64 --profile latent --cases 300 --repro-dir ${fuzz_dir}/torch_latent)
attncheck_fuzz_case(torch_fp32_latent_clean 0 "fuzz torch-cpu-fp32: 300 cases \\(0 unsupported\\)" "^$" 120
                    fuzz --impl torch-cpu-fp32 --profile latent --cases 300 --repro-dir ${fuzz_dir}/torch_latent_fp32)
# reference-cp (the fp64 reference under the case's context-parallel layout) on the context-parallel profile:
# clean against the reference-tp oracle, decoding after a CP prefill included: nothing declined (the summary
# line ends the output; a declined part would add lines after it; progress lines, printed every 2 s on a slow
# machine, come before it).
attncheck_fuzz_case(reference_cp_clean 0 "fuzz reference-cp: 300 cases \\(0 unsupported\\) in [^\n]*\n$" "^$" 120
                    fuzz --impl reference-cp --profile context-parallel --cases 300 --repro-dir ${fuzz_dir}/reference_cp)
# Every mutant of the catalog is caught within its profile's case budget (mutant_case_budget), with the
# same table on any machine at any load; the time limit is only a runaway stop. What it asserts is the kill:
# each failure is kept as found (--shrink-candidates 0), since shrinking two long-profile kills
# (bf16-pv-accumulation, llama-cpp-9166) was 28 of its 67 s; the fuzz.*shrink* tests hold shrinking.
attncheck_fuzz_case(mutants_all_killed 0 "91 of 91 mutants killed\n$" "^$" 900
                    mutants --shrink-candidates 0 --repro-dir ${fuzz_dir}/mutants)
# A time-bounded fuzz says that what it covered depends on the machine, and how to get a verdict instead.
attncheck_fuzz_case(time_bounded_says_so 0
                    "time-bounded: how many cases 1 s covers depends on this machine and its load; for a verdict the same on every machine, give a case budget \\(these were --cases [0-9]+\\)"
                    "^$" 60 fuzz --impl reference --seconds 1 --repro-dir ${fuzz_dir})
# The runaway stops say so, distinctly, and never pass: a mutant whose cases the time limit ended has no
# verdict (exit 1, not counted as killed or survived); a shrink it ended is named as machine-dependent.
attncheck_fuzz_case(mutants_time_limit_no_verdict 1
                    "mutant-bf16-pv-accumulation +no verdict .*stopped by the time limit \\(0.001 s\\) after 1 of 150 cases: no verdict\n0 of 1 mutants killed; 1 stopped by the time limit before their case budget's end: no verdict"
                    "^$" 120 mutants --mutant mutant-bf16-pv-accumulation --time-limit 0.001 --repro-dir ${fuzz_dir}/time_limit)
attncheck_fuzz_case(shrink_time_limit_named 1
                    "to: heads[^\n]*\n  shrinking stopped by the time limit after [0-9]+ of 2000 candidates: this shrunk case depends on the machine\n"
                    "^$" 60 fuzz --impl mutant-kv-head-modulo --cases 200 --shrink-seconds 0.000001 --repro-dir ${fuzz_dir}/shrink_limit)
# Long failures shrink their length first, to where the bug can first show, the same every time.
add_test(NAME fuzz.long_failure_shrinks_length_first
         COMMAND ${CMAKE_COMMAND} -DATTNCHECK=$<TARGET_FILE:attncheck> -DDIR=${fuzz_dir}/length_first
                 -P ${CMAKE_CURRENT_LIST_DIR}/length_shrink_test.cmake)
set_tests_properties(fuzz.long_failure_shrinks_length_first PROPERTIES LABELS property)
# The long profile end to end: a fixed number of cases, clean.
attncheck_fuzz_case(reference_tp_long_clean 0 "fuzz reference-tp: 30 cases \\(0 unsupported\\)" "^$" 120
                    fuzz --impl reference-tp --profile long --cases 30 --seed 7 --repro-dir ${fuzz_dir})
attncheck_fuzz_case(bad_profile 2 "^$" "--profile = medium: must name a size profile; short .*, long .* or latent" 60
                    fuzz --impl reference --profile medium)
attncheck_fuzz_case(bad_shard 2 "^$" "--shard = 2/2: must be i/n with 0 <= i < n" 60
                    fuzz --impl reference --shard 2/2)
attncheck_fuzz_case(not_a_worker 2 "^$" "must start a process that first prints 'attncheck-worker 1', alone" 60
                    fuzz --impl exec:true --cases 1)
# The greeting is matched exactly, not as a prefix (protocol 10 is not protocol 1).
attncheck_fuzz_case(greeting_matched_exactly 2 "^$" "prints 'attncheck-worker 1', alone.*printed 'attncheck-worker 10'" 60
                    fuzz --impl "exec:echo attncheck-worker 10" --cases 1)
attncheck_fuzz_case(greeting_with_junk 2 "^$" "printed 'attncheck-worker 1junk'" 60
                    fuzz --impl "exec:echo attncheck-worker 1junk" --cases 1)
# ATTNCHECK_WORKER_TIMEOUT that is not a whole number of seconds in [1, 86400] is refused, not 300 s.
attncheck_fuzz_case(worker_timeout_not_a_number 2 "^$" "ATTNCHECK_WORKER_TIMEOUT = abc: must be a whole number" 60
                    fuzz --impl "exec:echo attncheck-worker 1" --cases 1)
set_tests_properties(fuzz.worker_timeout_not_a_number PROPERTIES ENVIRONMENT "ATTNCHECK_WORKER_TIMEOUT=abc")
# A worker that never answers: killed with what it started, its folder removed.
add_test(NAME fuzz.worker_timeout_cleans_up
         COMMAND sh ${PROJECT_SOURCE_DIR}/exec_worker/testing/worker_cleanup_test.sh $<TARGET_FILE:attncheck>
                 ${fuzz_dir}/stuck_worker)
set_tests_properties(fuzz.worker_timeout_cleans_up PROPERTIES LABELS property PASS_REGULAR_EXPRESSION "^PASS")
# Time flags are finite and within a year; shard counts within 2^20 (a case's size grows with its index).
attncheck_fuzz_case(seconds_nan 2 "^$" "--seconds.*'nan' is not finite" 60 fuzz --impl reference --seconds nan)
attncheck_fuzz_case(seconds_huge 2 "^$" "--seconds.*must lie in \\(0, 31536000\\]" 60
                    fuzz --impl reference --seconds 1e308)
attncheck_fuzz_case(max_size_nan 2 "^$" "--max-size.*'nan' is not finite" 60 fuzz --impl reference --max-size nan)
attncheck_fuzz_case(shard_count_huge 2 "^$" "--shard = 1/1152921504606846976: must be i/n with 0 <= i < n <= 1048576" 60
                    fuzz --impl reference --shard 1/1152921504606846976)
# The repro folder is checked before any case runs (it used to be an internal error at the first failure).
attncheck_fuzz_case(repro_dir_not_a_folder 2 "^$" "--repro-dir = /dev/null: must be a folder attncheck can" 60
                    fuzz --impl reference --cases 1 --repro-dir /dev/null)
attncheck_fuzz_case(mutants_repro_dir_not_a_folder 2 "^$" "--repro-dir = /dev/null: must be a folder" 60
                    mutants --mutant mutant-quotient-scale --repro-dir /dev/null)
# Budgets are counts: negative ones are refused, naming the flag and a valid value.
attncheck_fuzz_case(shrink_candidates_negative 2 "^$" "--shrink-candidates = -1: must be at least 0; 2000 \\(0: no shrinking\\)" 60
                    fuzz --impl reference --cases 1 --shrink-candidates=-1)
attncheck_fuzz_case(sequence_cases_negative 2 "^$" "--sequence-cases = -1: must be at least 0; 2000" 60
                    fuzz --impl reference --cases 1 --sequence-cases=-1)
attncheck_fuzz_case(mutants_cases_zero 2 "^$" "--cases = 0: must be at least 1" 60
                    mutants --mutant mutant-quotient-scale --cases 0 --repro-dir ${fuzz_dir}/mutants_zero)
attncheck_fuzz_case(seed_negative 2 "^$" "--seed.*'-1' is negative" 60 fuzz --impl reference --seed=-1)
attncheck_fuzz_case(unknown_implementation 2 "^$" "--impl = torch-cpu: must name an implementation.*mutant-kv-head-modulo" 60
                    fuzz --impl torch-cpu --cases 1)

# The KV-head-as-h-%-H_kv mutant shrinks to a small case, whose repro file replays the failure.
add_test(NAME fuzz.kv_head_modulo_shrinks_and_replays
         COMMAND ${CMAKE_COMMAND} -DATTNCHECK=$<TARGET_FILE:attncheck> -DDIR=${fuzz_dir}/kv_modulo
                 -P ${CMAKE_CURRENT_LIST_DIR}/shrink_replay_test.cmake)
set_tests_properties(fuzz.kv_head_modulo_shrinks_and_replays PROPERTIES LABELS property)

# transformers as an exec: worker (attncheck.adapters.hf_transformers, from this tree's python/): clean on
# what it supports; a planted bug is caught and shrunk.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(hf_worker "exec:${Python3_EXECUTABLE} -m attncheck.adapters.hf_transformers --worker")
attncheck_fuzz_case(hf_worker_clean 0 "fuzz exec:.*: 1200 cases \\([0-9]+ unsupported\\).*largest: heads" "" 120
                    fuzz --impl ${hf_worker} --cases 1200 --repro-dir ${fuzz_dir}/hf)
attncheck_fuzz_case(hf_worker_planted_bug 1 "FAIL matches-reference.*shrunk in [0-9]+ steps.*to: heads.*it fails alone, in a fresh instance.*replay: attncheck replay" ""
                    180 fuzz --impl "${hf_worker} --plant-bug quotient-scale" --cases 500 --repro-dir ${fuzz_dir}/hf_bug)
# The same worker on multi-head latent attention cases (the latent profile: DeepseekV3Attention), clean.
attncheck_fuzz_case(hf_worker_latent_clean 0 "fuzz exec:.*: 100 cases \\([0-9]+ unsupported\\).*largest: latent attention" ""
                    120 fuzz --impl ${hf_worker} --profile latent --cases 100 --repro-dir ${fuzz_dir}/hf_latent)
set_tests_properties(fuzz.hf_worker_clean fuzz.hf_worker_planted_bug fuzz.hf_worker_latent_clean PROPERTIES
  ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;TOKENIZERS_PARALLELISM=false;PYTHONPATH=${PROJECT_SOURCE_DIR}/python")

# A worker never receives the answers: one that copies /expected to /result finds none to copy and can
# only decline, and a fuzz in which an implementation declined every case fails, naming the reason.
set(copier "exec:${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/exec_worker/testing/answer_copying_worker.py")
attncheck_fuzz_case(worker_never_sees_answers 1
                    "5 cases \\(5 unsupported\\).*unsupported: 5 x .*carries no answers to copy.*FAIL .*declined all 5 cases"
                    "" 120 fuzz --impl ${copier} --cases 5 --repro-dir ${fuzz_dir}/copier)
# A worker whose candidates are fp32 is fuzzed under the contract its candidate files declare (precision
# and RoPE angles), the yardstick `attncheck compare` applies to the same files (it used to be declined).
set(fp32_worker "exec:${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/exec_worker/testing/attncheck_worker.py $<TARGET_FILE:attncheck> torch-cpu-fp32")
attncheck_fuzz_case(worker_fp32_judged_by_its_contract 0 "12 cases \\(0 unsupported\\)" "" 120
                    fuzz --impl ${fp32_worker} --cases 12 --repro-dir ${fuzz_dir}/fp32_worker)
# One rule for per-rank gradients, the candidate's /result@tp_size, whatever the greeting: a worker that
# does not greet "sharded" but writes them has them checked (a replicated KV head's missing all-reduce is
# caught), and one that greets "sharded" but declares tp_size 1 is excused (no ranks/* MISSING).
set(worker_script "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/exec_worker/testing/attncheck_worker.py $<TARGET_FILE:attncheck>")
attncheck_fuzz_case(worker_rank_gradients_checked_without_greeting 1 "FAIL matches-reference: ranks/[0-9]+/grads/[kv]_proj" ""
                    300 fuzz --impl "exec:${worker_script} reference-tp --halve-rank-kv" --cases 200
                    --shrink-candidates 10 --repro-dir ${fuzz_dir}/rank_rule)
attncheck_fuzz_case(worker_tp1_candidate_excused_despite_greeting 0 "20 cases \\(0 unsupported\\)" "" 120
                    fuzz --impl "exec:${worker_script} reference --greet-sharded" --cases 20 --repro-dir ${fuzz_dir}/rank_rule)
# Declined parts are counted apart and their reasons tallied, never passed: a worker that declines
# decoding on every case (decode/out dropped, /result/declined@decode set) fuzzes clean on the rest of
# each case, and fuzz says how many cases had declined parts and why.
set(declining_worker "exec:${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/properties/declining_worker.py $<TARGET_FILE:attncheck> reference-tp")
attncheck_fuzz_case(worker_declines_decode 0
                    "fuzz exec:.*: 16 cases \\(0 unsupported\\).*  [1-9][0-9]* of 16 cases with declined parts \\(those tensors not judged\\)\n  declined: [1-9][0-9]* x no KV cache in this worker"
                    "" 300 fuzz --impl ${declining_worker} --cases 16 --repro-dir ${fuzz_dir}/declining)
# A worker with a cache that is never cleared fails a case only after an earlier one in the same process:
# reported as such with the sequence (never as a pass), saved as a sequence repro that replays it in a
# fresh worker; and a sequence folder that is not one is refused, naming what is wrong.
add_test(NAME fuzz.state_dependent_failure_reported
         COMMAND ${CMAKE_COMMAND} -DATTNCHECK=$<TARGET_FILE:attncheck> -DPYTHON=${Python3_EXECUTABLE}
                 -DWORKER=${CMAKE_CURRENT_LIST_DIR}/stateful_worker.py -DDIR=${fuzz_dir}/stateful
                 -P ${CMAKE_CURRENT_LIST_DIR}/state_dependence_test.cmake)
add_test(NAME fuzz.sequence_replay_refuses_bad_folders
         COMMAND ${CMAKE_COMMAND} -DATTNCHECK=$<TARGET_FILE:attncheck> -DDIR=${fuzz_dir}/bad_sequences
                 -P ${CMAKE_CURRENT_LIST_DIR}/sequence_replay_refusals_test.cmake)
set_tests_properties(fuzz.state_dependent_failure_reported fuzz.sequence_replay_refuses_bad_folders
                     PROPERTIES LABELS property)
# A failure says where it fails, with the failure, before any replay: swapped query heads name two heads
# in o_proj's gradient.
attncheck_fuzz_case(failure_localised 1
                    "FAIL matches-reference.*to: .*\n  where:\n.*grads/o_proj: [0-9.e+]+ ulps of its scale[^\n]*query heads [0-9]+,[0-9]+\n.*\n  repro: .*replay: attncheck replay"
                    "" 120 fuzz --impl mutant-swap-query-heads --seed 3 --repro-dir ${fuzz_dir}/localised)
# Without --repro-dir, fuzz and mutants write their repro files to a fresh $TMPDIR/attncheck-repro-XXXXXX and
# nothing into the working folder (DECISIONS 34).
add_test(NAME fuzz.repro_folder_default
         COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/properties/repro_folder_test.py $<TARGET_FILE:attncheck>)
set_tests_properties(fuzz.repro_folder_default PROPERTIES LABELS property)
# A case the fp64 oracle cannot hold in this machine's memory now stops the run (exit 2, naming the estimate),
# never a case tallied as declined: a rerun with more room would judge it (issue 56: 155 of 1,000 cases once
# went uncounted this way). The worker computes nothing of attncheck's, so the oracle is the first to ask.
attncheck_fuzz_case(oracle_out_of_memory_stops 2 ".*"
                    "not enough memory: the fp64 reference run = an estimated [0-9.]+ MiB at peak: must fit in the 40.0 MiB"
                    120 fuzz --impl "exec:${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/python/examples/my_attention_worker.py"
                    --profile long --cases 40 --seed 1 --max-memory 40M)
# Correct fp64 layers where rounding cancels (issue 56.4 and 56.5), each of which failed before the fp64
# yardstick (core/compare/tolerance.hpp, kFp64YardstickFactor): the latent profile's case 633 of seed 12 (every
# gradient ~1e-6 of terms ~15); PyTorch's CPU flash SDPA in double, case 2438 of seed 2 (P from a stored
# log-sum-exp behind a saturated softmax); reference-cp's ring, case 2346 of seed 12 (the output merged by
# log-sum-exps, its rounding amplified through D = rowsum(dO o O)).
attncheck_fuzz_case(fp64_cancellation_latent 0 "fuzz torch-cpu-fp64: 700 cases \\(0 unsupported\\)" "^$" 120
                    fuzz --impl torch-cpu-fp64 --profile latent --cases 700 --seed 12 --repro-dir ${fuzz_dir}/cancel_latent)
attncheck_fuzz_case(fp64_flash_sdpa_rounding 0 "fuzz torch-cpu-fp64-sdpa: 2500 cases \\(0 unsupported\\)" "^$" 120
                    fuzz --impl torch-cpu-fp64-sdpa --cases 2500 --seed 2 --repro-dir ${fuzz_dir}/cancel_sdpa)
attncheck_fuzz_case(reference_cp_ring_rounding 0 "fuzz reference-cp: 2400 cases \\(0 unsupported\\)" "^$" 300
                    fuzz --impl reference-cp --profile context-parallel --cases 2400 --seed 12
                    --repro-dir ${fuzz_dir}/cancel_cp)
# A failure is always reported, and a repro that cannot be written is said so: a folder, FIFO or symbolic link
# at the repro's path (left as it is), the repro folder replaced by a file during the run, a sequence listing
# that is a FIFO (refused at once by replay) (properties/testing/repro_in_the_way_test.py).
add_test(NAME fuzz.repro_in_the_way
         COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/properties/testing/repro_in_the_way_test.py
                 $<TARGET_FILE:attncheck> ${fuzz_dir}/repro_in_the_way)
set_tests_properties(fuzz.repro_in_the_way PROPERTIES LABELS property TIMEOUT 300)
