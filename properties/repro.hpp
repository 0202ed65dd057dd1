// Repro files: a failing case saved as a golden file (schema v1: geometry, inputs, weights and the
// reference's answers), which `attncheck replay FILE --impl NAME` (or any golden reader) replays.
//
// A failure that shows only after earlier cases in the same process (state_dependence.hpp) is saved as
// a sequence: a folder holding one such file per case and sequence.txt listing them in the order they
// run, the failing case last; `attncheck replay FOLDER --impl NAME` runs them in order in one instance.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/case.hpp"

namespace attncheck::properties {

// A repro that could not be written, and why (the folder is a file, something not a regular file stands at
// the file's path, a write failed). The failure it would have held is reported all the same: fuzz and
// mutants say the repro was not written instead of ending with an error (issue 56.9).
class ReproNotWritten : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `requested` (made when missing), or, when empty, a fresh folder $TMPDIR/attncheck-repro-XXXXXX (mkdtemp; TMPDIR
// unset: /tmp): repro files go where the user named or to a temporary folder, never into the current
// folder by surprise. Reports print the path of every file written. ReproNotWritten when `requested` is not a
// folder and cannot be made one.
std::string repro_folder(const std::string& requested);

// Writes the case with the fp64 reference's answers (reference-tp) as the golden file `path`.
void write_case_golden(const Case& test_case, const std::string& path, const std::string& generator);

// Writes <repro_folder(directory)>/repro-<implementation>-<hash of the case>.h5 and returns its path. Every repro
// file (a sequence's listing too) is written under a fresh name in its folder and renamed into place, so a link
// put at the path meanwhile is replaced, never followed; anything found there but a regular file (a folder, a
// FIFO, a symbolic link, dangling or not) is left alone and the repro not written. ReproNotWritten, naming the path and
// why, when it cannot be written.
std::string write_repro(const Case& test_case, const std::string& directory, const std::string& implementation);

// The listing in a sequence folder.
inline constexpr const char* kSequenceListing = "sequence.txt";

struct SequenceCase {
  Case test_case;
  std::string name;  // its file's name without .h5, e.g. "case-17", "failing-case-25"
};

// Writes <repro_folder(directory)>/repro-<implementation>-<hash of the last case>-sequence/ with one golden file per
// case and sequence.txt (the cases in order, the last the failing one, after `comment` lines that say
// what the sequence is); returns the folder's path.
std::string write_sequence_repro(const std::vector<SequenceCase>& cases, const std::string& comment,
                                 const std::string& directory, const std::string& implementation);

// The files a sequence folder lists, in order, as paths. InputError (naming what is wrong and what a
// sequence folder holds) when the folder has no sequence.txt or it is not a regular file (a FIFO is refused
// without waiting on it), it lists fewer than two files, a line is not a plain file name in the folder, or a
// listed file is missing.
std::vector<std::string> read_sequence_repro(const std::string& folder);

// The command that replays a repro file or sequence folder, quoted for a POSIX shell.
std::string replay_command(const std::string& path, const std::string& implementation);

}  // namespace attncheck::properties
