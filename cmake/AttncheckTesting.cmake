# attncheck_add_gtest(<name> SOURCES <files...> LIBRARIES <targets...> [LABELS <label>]
#                     [ENVIRONMENT <VAR=value>])
# One GoogleTest executable; each TEST becomes its own ctest entry (discovered when ctest runs, so the
# build does not execute test binaries), labelled for `ctest -L`.
# ATTNCHECK_GTEST_EXECUTABLES, when set, names the only executables made and registered (the asan preset:
# ci/test's sanitizer stage builds and runs those, not the rest); callers guard their own settings on a
# test executable with if(TARGET ...).
set(ATTNCHECK_GTEST_EXECUTABLES "" CACHE STRING "Only these GoogleTest executables (empty: all)")
function(attncheck_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT BUILD_TESTING)
    return()
  endif()
  if(ATTNCHECK_GTEST_EXECUTABLES AND NOT name IN_LIST ATTNCHECK_GTEST_EXECUTABLES)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES} attncheck_flags GTest::gtest GTest::gtest_main)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  include(GoogleTest)
  # gtest_discover_tests flattens PROPERTIES into one list, so each property takes exactly one value:
  # "unit;slow" would become LABELS unit plus a stray property named slow (seen with CMake 3.25).
  foreach(property_value IN ITEMS "${ARG_LABELS}" "${ARG_ENVIRONMENT}")
    list(LENGTH property_value count)
    if(count GREATER 1)
      message(FATAL_ERROR "attncheck_add_gtest(${name}): LABELS and ENVIRONMENT take one value each")
    endif()
  endforeach()
  # DISCOVERY_TIMEOUT: listing a LibTorch test's cases loads LibTorch and the CUDA libraries first, 4 s
  # warm and 44 s with a cold page cache (the gate's sanitizer and fuzzing builds run between the main
  # build and ctest): CMake's default of 5 s failed the whole ctest run.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 300 PROPERTIES LABELS "${ARG_LABELS}"
                       ENVIRONMENT "${ARG_ENVIRONMENT}")
endfunction()
