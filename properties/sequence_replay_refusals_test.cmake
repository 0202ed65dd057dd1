# ctest fuzz.sequence_replay_refuses_bad_folders: `attncheck replay FOLDER` reads FOLDER/sequence.txt; a
# folder without one, a listing naming a missing file or a path, or listing fewer than two cases is bad
# input (exit 2) naming the problem and what a sequence folder holds, before any case runs.
#   cmake -DATTNCHECK=... -DDIR=... -P sequence_replay_refusals_test.cmake
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR}/empty ${DIR}/missing ${DIR}/path ${DIR}/single)
execute_process(COMMAND ${ATTNCHECK} golden make --hidden 8 --heads 2 --seq 4 -o ${DIR}/single/only.h5
                RESULT_VARIABLE made OUTPUT_QUIET)
if(NOT made EQUAL 0)
  message(FATAL_ERROR "golden make exited ${made}")
endif()
file(COPY ${DIR}/single/only.h5 DESTINATION ${DIR}/missing)
file(WRITE ${DIR}/missing/sequence.txt "# a listing\nonly.h5\n\nnot-there.h5\n")
file(WRITE ${DIR}/path/sequence.txt "../single/only.h5\n../single/only.h5\n")
file(WRITE ${DIR}/single/sequence.txt "only.h5\n")

function(expect_refusal folder regex)
  execute_process(COMMAND ${ATTNCHECK} replay ${DIR}/${folder} --impl reference RESULT_VARIABLE exit_code
                  OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 60)
  if(NOT exit_code EQUAL 2 OR NOT stderr MATCHES "${regex}" OR NOT stdout STREQUAL "")
    message(FATAL_ERROR "replay ${folder}: exit ${exit_code}, expected 2 with /${regex}/ on stderr\n"
                        "--- stdout ---\n${stdout}--- stderr ---\n${stderr}")
  endif()
  message("${folder}: ${stderr}")
endfunction()

set(valid "a repro \\.h5 file, or a folder written by attncheck fuzz holding sequence\\.txt")
expect_refusal(empty "invalid sequence repro: [^\n]*/empty = a folder: holds no readable sequence\\.txt; ${valid}")
expect_refusal(missing "/missing/sequence\\.txt line 4 = not-there\\.h5: names no file in the folder; ${valid}")
expect_refusal(path "/path/sequence\\.txt line 1 = \\.\\./single/only\\.h5: must be a file name in the folder, without a path")
expect_refusal(single "/single/sequence\\.txt = 1 case files: must list at least two: the earlier cases, then the failing one")
