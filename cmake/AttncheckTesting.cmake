# attncheck_add_gtest(<name> SOURCES <files...> LIBRARIES <targets...> [LABELS <labels...>]
#                     [ENVIRONMENT <VAR=value...>])
# One GoogleTest executable; each TEST becomes its own ctest entry (discovered when ctest runs, so the
# build does not execute test binaries), labelled for `ctest -L`.
function(attncheck_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT BUILD_TESTING)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES} attncheck_flags GTest::gtest GTest::gtest_main)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${ARG_LABELS}"
                       ENVIRONMENT "${ARG_ENVIRONMENT}")
endfunction()
