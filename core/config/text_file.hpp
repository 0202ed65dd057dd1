// Reads a whole config file, turning every failure (missing, a directory, unreadable, too large to be a
// config) into an InputError that names the option it came from.
#pragma once

#include <string>

namespace attncheck {

// field: the option or key that named the file ("--hf-config"). Files over 64 MiB are refused:
// no config is that large, and reading /dev/zero or a stray checkpoint must not hang the tool.
std::string read_text_file(const std::string& path, const std::string& field);

}  // namespace attncheck
