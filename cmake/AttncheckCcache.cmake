# Compiles through ccache when it is installed (ci/setup installs it): a rebuild of an unchanged source from any
# clone of the repository is then a cache hit. ci/test from a fresh clone builds everything twice (the default and
# the sanitizer presets), and most of a change leaves most translation units as they were.
#
# CCACHE_BASEDIR makes the paths inside this tree relative, so two clones share their entries; CCACHE_NOHASHDIR
# leaves the working directory out of the hash, which with -g1 it would otherwise be part of: an object fetched
# from the cache then names the first clone's build folder as its compilation directory (DW_AT_comp_dir), which
# only matters to a debugger looking for sources in a clone that is gone. A launcher set by the user
# (CMAKE_CXX_COMPILER_LAUNCHER) wins; -DATTNCHECK_CCACHE=OFF turns it off.
option(ATTNCHECK_CCACHE "Compile through ccache when it is installed" ON)
if(ATTNCHECK_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(ATTNCHECK_CCACHE_PROGRAM ccache)
  if(ATTNCHECK_CCACHE_PROGRAM)
    set(attncheck_ccache_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=true
        ${ATTNCHECK_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${attncheck_ccache_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${attncheck_ccache_launcher})
    message(STATUS "Compiling through ccache (${ATTNCHECK_CCACHE_PROGRAM})")
  endif()
endif()
