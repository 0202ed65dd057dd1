# ctest fuzz.state_dependent_failure_reported: properties/stateful_worker.py keeps a cache that is never
# cleared (answers keyed by input shape), so a case fails only after an earlier case of the same shapes
# in the same worker process. `attncheck fuzz` with a fixed seed and case budget must exit 1 reporting
# that ("fails only after earlier cases in the same process", with the sequence), never a pass; its
# sequence repro, replayed, must fail in a fresh worker through the recorded sequence, while the failing
# case alone passes there and the reference passes the whole sequence.
#   cmake -DATTNCHECK=... -DPYTHON=... -DWORKER=.../stateful_worker.py -DDIR=... -P state_dependence_test.cmake
file(REMOVE_RECURSE ${DIR})
set(worker "exec:${PYTHON} ${WORKER} ${ATTNCHECK} reference-tp")

function(run_attncheck expected_exit output_variable)
  execute_process(COMMAND ${ATTNCHECK} ${ARGN} RESULT_VARIABLE exit_code OUTPUT_VARIABLE stdout
                  ERROR_VARIABLE stderr TIMEOUT 240)
  message("--- attncheck ${ARGN}\n${stdout}${stderr}")
  if(NOT exit_code STREQUAL "${expected_exit}")
    message(FATAL_ERROR "exited ${exit_code}, expected ${expected_exit}")
  endif()
  set(${output_variable} "${stdout}" PARENT_SCOPE)
endfunction()

function(expect text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: no match for /${regex}/")
  endif()
endfunction()

# Seed 1: case 3 has the shapes of case 0, so the cache answers it with case 0's answer; cases 1 and 2
# are not needed and the search drops them.
run_attncheck(1 fuzz_out fuzz --impl ${worker} --cases 60 --seed 1 --shrink-candidates 10 --repro-dir ${DIR})
expect("${fuzz_out}" "\nFAIL exec:[^\n]*: fails only after earlier cases in the same process: case \\[0\\] then the failing one \\(case 3\\)\n"
       "the fuzz report")
expect("${fuzz_out}" "\n  alone, in a fresh instance, case 3 passes" "the fresh-instance check")
expect("${fuzz_out}" "\n  after the earlier cases, in a fresh instance, it fails matches-reference: [^\n]*MISMATCH"
       "the failure at the end of the sequence")
if(fuzz_out MATCHES "\nPASS" OR fuzz_out MATCHES "\n  it fails alone")
  message(FATAL_ERROR "a state-dependent failure reported as a pass or as failing alone")
endif()
if(NOT fuzz_out MATCHES "\n  repro: ([^\n]+-sequence) \\(2 cases in order, listed in sequence.txt\\)\n")
  message(FATAL_ERROR "the sequence repro: not named")
endif()
set(folder ${CMAKE_MATCH_1})
file(STRINGS ${folder}/sequence.txt listing REGEX "^[^#]")
if(NOT listing MATCHES "^case-0\\.h5;failing-case-3[^;]*\\.h5$")
  message(FATAL_ERROR "sequence.txt lists '${listing}', expected case-0.h5 then failing-case-3...")
endif()

# The repro replayed in a fresh worker: the sequence reproduces the failure, the failing case alone passes.
run_attncheck(1 replay_out replay ${folder} --impl ${worker})
expect("${replay_out}" "\n  1\\. case-0\\.h5: pass\n  2\\. failing-case-3[^\n]*\\.h5: FAIL: [^\n]*MISMATCH" "the sequence's verdicts")
expect("${replay_out}" "the last case alone, in a fresh instance of exec:[^\n]*:\n  2\\. failing-case-3[^\n]*\\.h5: pass\n"
       "the failing case alone, in a fresh worker")
expect("${replay_out}" "\nFAIL exec:[^\n]*: fails only after earlier cases in the same process: case-0 then the failing one \\(failing-case-3[^)]*\\); alone, in a fresh instance, it passes\n"
       "the replay's conclusion")
# The reference passes every case of the sequence.
run_attncheck(0 reference_out replay ${folder} --impl reference)
expect("${reference_out}" "\nPASS reference: the sequence passes" "the reference's replay")
message("reported as failing only after case 0; the sequence repro reproduces it in a fresh worker")
