// Where this tree's files are, for the tests that read them (the official HF configs, the H200 repro files).
// The compile definition ATTNCHECK_SOURCE_TREE_FROM_BINARY is the path from the test executable's folder to the
// tree (attncheck_test_reads_source_tree in cmake/AttncheckTesting.cmake: "../.." for build/cli/cli_test), the
// same in every clone, so that ccache serves these objects to a fresh clone: an absolute path in the definition
// made each of them compile again in every clone's build (18 s of the gate's build, and again under ASan).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#ifndef ATTNCHECK_SOURCE_TREE_FROM_BINARY
#error "ATTNCHECK_SOURCE_TREE_FROM_BINARY: call attncheck_test_reads_source_tree(<target>) in its CMakeLists.txt"
#endif

namespace attncheck {

// The path of `relative` (e.g. "core/config/hf_configs") inside this tree, from the running executable.
inline std::string source_tree_path(std::string_view relative) {
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe");
  return (executable.parent_path() / ATTNCHECK_SOURCE_TREE_FROM_BINARY / relative).lexically_normal().string();
}

}  // namespace attncheck
