// Reads the candidate file an exec: worker wrote after it said "ok". Whatever is wrong with that file
// (none written, a FIFO, a symbolic link, a device, garbage, a copy of the case file, wrong types, shapes
// beyond the memory room) is the worker's failure, one rule in every command: a std::runtime_error that
// says why, never the InputError golden::read_candidate throws for a user's file (exit 2, "make the
// golden again"), and never naming the temporary path as if it were the user's.
#pragma once

#include <string>

#include "core/compare/compare.hpp"
#include "golden/golden_file.hpp"

namespace attncheck::exec_worker {

// The candidate at path (in the worker's temporary folder), read against expected_names as
// golden::read_candidate reads it. It must be a regular file (checked with lstat(), then opened without
// following links and without blocking, and read through that descriptor, so that a worker cannot swap
// in a FIFO or a link after the check). implementation: the worker's name, for the message.
golden::Candidate read_worker_candidate(const std::string& path, const NamedTensors& expected_names,
                                        const std::string& implementation);

}  // namespace attncheck::exec_worker
