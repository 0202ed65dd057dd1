# Runs generator_dump (C++), then python/attncheck/generator.py --check on its output; fails unless both agree.
execute_process(COMMAND ${DUMP} OUTPUT_FILE ${OUT} RESULT_VARIABLE dump_exit)
if(NOT dump_exit EQUAL 0)
  message(FATAL_ERROR "generator_dump exited ${dump_exit}")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} --check ${OUT} RESULT_VARIABLE check_exit OUTPUT_VARIABLE output
                ERROR_VARIABLE errors)
message("${output}${errors}")
if(NOT check_exit EQUAL 0)
  message(FATAL_ERROR "python/attncheck/generator.py --check exited ${check_exit}")
endif()
# numpy is a CI dependency (ci/setup), so the vectorised generator must have been checked too.
if(NOT output MATCHES "plain Python and numpy")
  message(FATAL_ERROR "the numpy generator was not checked (is numpy installed for ${PYTHON}?)")
endif()
