# Compile flags shared by every attncheck target, through the interface target attncheck_flags.
#
# ATTNCHECK_MARCH: the fp64 reference (Eigen) is built for x86-64-v3 (AVX2 + FMA). On the CPUs of this
# project's machines Eigen 3.4's AVX-512 path measured about 20% slower than its AVX2 path, and
# x86-64-v3 still runs on every x86-64 server of the last decade. Set it empty to use the compiler's
# default target.
set(ATTNCHECK_MARCH "x86-64-v3" CACHE STRING "-march for attncheck's C++ code (empty: compiler default)")
option(ATTNCHECK_WERROR "Treat compiler warnings as errors" ON)

# -Wno-missing-field-initializers: GCC 12 warns on designated initializers that leave members at their
# default member initializers, which is exactly how GeometrySpec and friends are meant to be written.
add_library(attncheck_flags INTERFACE)
target_compile_options(attncheck_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
                               -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ATTNCHECK_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ATTNCHECK_MARCH}>>:-march=${ATTNCHECK_MARCH}>)
