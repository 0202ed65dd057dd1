# Implementations register themselves (impl/registry.hpp): each backend's registration file holds a
# namespace-scope BackendRegistration, built as an OBJECT library whose object files are linked into
# every program that links attncheck_implementations. Object files on the link line are always linked
# (an unreferenced member of a static archive would be dropped, and its registration with it), and
# $<TARGET_OBJECTS> in an interface target carries them through static libraries to each executable.
#
#   attncheck_register_implementations(<target> SOURCES <files> LIBRARIES <libraries>)
#
# in the backend's own CMakeLists.txt; a backend that is not built (no LibTorch, no nvcc) registers
# nothing, and no other file changes.
add_library(attncheck_implementations INTERFACE)

function(attncheck_register_implementations target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LIBRARIES")
  add_library(${target} OBJECT ${ARG_SOURCES})
  target_link_libraries(${target} PUBLIC attncheck_impl ${ARG_LIBRARIES} PRIVATE attncheck_flags)
  target_link_libraries(attncheck_implementations INTERFACE ${target} $<TARGET_OBJECTS:${target}>)
endfunction()
