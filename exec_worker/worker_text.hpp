// What an exec: worker says, made safe to repeat: attncheck echoes a worker's unsupported reasons, error
// messages, a bad greeting and the reasons its candidate declines parts into tables, JSON, HTML and the
// terminal, so each is cut to a bounded length, with a marker saying how much was cut, and its control
// characters and invalid UTF-8 are escaped (a worker's bytes can neither flood nor break attncheck's
// output, nor move a terminal's cursor).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace attncheck::exec_worker {

// Bytes of one line from a worker that attncheck keeps: the rest of a longer line is read and counted,
// never buffered.
inline constexpr std::size_t kLongestWorkerLine = 64 * 1024;
// Bytes of a worker's text that one message repeats.
inline constexpr std::size_t kLongestEcho = 1000;

// text as at most `limit` bytes of valid UTF-8 without control characters: C0 and C1 controls, DEL,
// bidirectional overrides and every byte that is not part of valid UTF-8 are written as \xNN or \u{NNNN};
// past the limit it ends with " [... N more bytes cut]", N counting what was left of text plus
// `already_cut` (bytes the caller dropped before, e.g. of a line longer than kLongestWorkerLine).
std::string echoable(std::string_view text, std::size_t already_cut = 0, std::size_t limit = kLongestEcho);

}  // namespace attncheck::exec_worker
