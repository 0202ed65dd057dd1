# End to end (label property, names worker.*): hostile exec: workers against the attncheck binary, each
# scenario built by exec_worker/testing/worker_e2e_test.py from exec_worker/testing/hostile_worker.py or
# setsid_worker.sh, in its own folder with its own small golden. Included from exec_worker/CMakeLists.txt;
# $<TARGET_FILE:attncheck> resolves though cli/ defines the target later.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(worker_e2e_dir ${CMAKE_CURRENT_BINARY_DIR}/worker_e2e)
function(attncheck_worker_case scenario timeout)
  add_test(NAME worker.${scenario}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/testing/worker_e2e_test.py
                   $<TARGET_FILE:attncheck> ${worker_e2e_dir}/${scenario} ${scenario})
  set_tests_properties(worker.${scenario} PROPERTIES LABELS property TIMEOUT ${timeout})
endfunction()

# After "ok", a candidate that is not a valid candidate file is the worker's failure (exit 1, FAIL) in
# `golden check` and `run`, never bad input (exit 2); a FIFO does not hang attncheck.
foreach(mode IN ITEMS garbage nothing fifo symlink folder copy-case wrong-type huge-shape)
  attncheck_worker_case(candidate-${mode} 120)
endforeach()
# What attncheck repeats of a worker is bounded and escaped.
attncheck_worker_case(long-reason 120)
attncheck_worker_case(dirty-error 120)
# A worker that exits without answering fails with its exit status; one that never answers gets NoAnswer.
attncheck_worker_case(exit-3 120)
attncheck_worker_case(silent 120)
# A worker that ends between cases is restarted for the next; one out of step with the protocol is stopped.
attncheck_worker_case(exit-after-answer 120)
attncheck_worker_case(exit-after-lingering 120)
attncheck_worker_case(stray-line 120)
# The worker's whole tree ends with it: after a normal exit, and after attncheck is killed with SIGKILL.
attncheck_worker_case(tree-daemon 120)
attncheck_worker_case(tree-setsid 120)
attncheck_worker_case(tree-sigkill 120)
# The worker's folder is held by a descriptor: a worker that swaps it for a symbolic link cannot make attncheck
# write or delete elsewhere; attncheck failing to write its own case file is its internal error (exit 3), never
# the worker's FAIL (exec_worker/testing/worker_folder_test.py).
add_test(NAME worker.folder_held_by_descriptor
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/testing/worker_folder_test.py
                 $<TARGET_FILE:attncheck> ${worker_e2e_dir}/folder_held_by_descriptor)
set_tests_properties(worker.folder_held_by_descriptor PROPERTIES LABELS property TIMEOUT 120)
