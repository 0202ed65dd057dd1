# cmake -DCOMMAND=<list> -DEXPECT_EXIT=<code> -DEXPECT_STDOUT=<regex> -DEXPECT_STDERR=<regex> [-DTIMEOUT=<s>]
#       -P RunAndCheck.cmake
# Runs COMMAND and fails (printing both streams) unless its exit code and both streams match.
if(NOT TIMEOUT)
  set(TIMEOUT 60)
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE exit_code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr
                TIMEOUT ${TIMEOUT})
set(problems "")
if(NOT exit_code STREQUAL EXPECT_EXIT)
  string(APPEND problems "exit code ${exit_code}, expected ${EXPECT_EXIT}\n")
endif()
if(NOT stdout MATCHES "${EXPECT_STDOUT}")
  string(APPEND problems "stdout does not match /${EXPECT_STDOUT}/\n")
endif()
if(NOT stderr MATCHES "${EXPECT_STDERR}")
  string(APPEND problems "stderr does not match /${EXPECT_STDERR}/\n")
endif()
if(problems)
  message(FATAL_ERROR "${problems}--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}")
endif()
