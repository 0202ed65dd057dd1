# ctest fuzz.long_failure_shrinks_length_first: mutant-window-tile-skip-from-last-query (a block of 64
# queries skips the key tiles before its last query's window, so its earlier queries lose keys) can only
# fail with a second block of queries, so no seq <= 64 fails, and the shortest failing length lies in
# that second block: 65 <= seq <= 128. Fuzzed on the long profile (seed 1, 150 cases) it fails at seq 255;
# the shrink bisects the length first and must end within those bounds, twice with the same shrunk case
# and repro file (a candidate budget, not seconds), whose replay fails with the mutant and passes with the
# reference.
#   cmake -DATTNCHECK=... -DDIR=... -P length_shrink_test.cmake
file(REMOVE_RECURSE ${DIR})
set(mutant mutant-window-tile-skip-from-last-query)
foreach(run first second)
  execute_process(COMMAND ${ATTNCHECK} fuzz --impl ${mutant} --profile long --cases 150 --seed 1 --repro-dir ${DIR}/${run}
                  RESULT_VARIABLE exit_code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  message("${out}${err}")
  if(NOT exit_code EQUAL 1)
    message(FATAL_ERROR "fuzz exited ${exit_code}, expected 1 (the mutant caught)")
  endif()
  if(NOT out MATCHES "shrunk in [0-9]+ steps \\([0-9]+ candidates, ([0-9]+) of them lengths by bisection[^\n]*from: [^\n]*; batch [0-9]+, seq ([0-9]+),[^\n]*\n  to: ([^\n]*; batch [0-9]+, seq ([0-9]+),[^\n]*)\n")
    message(FATAL_ERROR "no shrink in the output")
  endif()
  set(probes ${CMAKE_MATCH_1})
  set(original_seq ${CMAKE_MATCH_2})
  set(${run}_shrunk "${CMAKE_MATCH_3}")
  set(seq ${CMAKE_MATCH_4})
  if(original_seq LESS_EQUAL 128 OR probes LESS 1)
    message(FATAL_ERROR "expected a failure past 128 keys shrunk by bisection: seq ${original_seq}, ${probes} probes")
  endif()
  if(seq LESS 65 OR seq GREATER 128)
    message(FATAL_ERROR "shrunk to seq ${seq}: outside the second block of queries [65, 128]")
  endif()
  if(NOT out MATCHES "\n  repro: ([^\n]+\\.h5)\n")
    message(FATAL_ERROR "no repro file named")
  endif()
  get_filename_component(${run}_repro_name ${CMAKE_MATCH_1} NAME)
  set(${run}_repro ${CMAKE_MATCH_1})
endforeach()
if(NOT first_shrunk STREQUAL second_shrunk OR NOT first_repro_name STREQUAL second_repro_name)
  message(FATAL_ERROR "two runs shrank differently:\n${first_shrunk} (${first_repro_name})\n"
                      "${second_shrunk} (${second_repro_name})")
endif()
execute_process(COMMAND ${ATTNCHECK} replay ${first_repro} --impl ${mutant} RESULT_VARIABLE mutant_exit
                OUTPUT_VARIABLE mutant_out ERROR_VARIABLE mutant_err TIMEOUT 60)
if(NOT mutant_exit EQUAL 1 OR NOT mutant_out MATCHES "MISMATCH.*0 of 1 golden files pass")
  message(FATAL_ERROR "replay with the mutant exited ${mutant_exit}, expected 1:\n${mutant_out}${mutant_err}")
endif()
execute_process(COMMAND ${ATTNCHECK} replay ${first_repro} --impl reference RESULT_VARIABLE reference_exit
                OUTPUT_VARIABLE reference_out ERROR_VARIABLE reference_err TIMEOUT 60)
if(NOT reference_exit EQUAL 0)
  message(FATAL_ERROR "replay with the reference exited ${reference_exit}:\n${reference_out}${reference_err}")
endif()
message("seq ${original_seq} shrunk to seq ${seq} (${first_shrunk}), the same twice; the repro replays the failure")
