#include "core/config/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {
constexpr std::uintmax_t kMaxConfigBytes = std::uintmax_t{64} << 20;

[[noreturn]] void fail(const std::string& path, const std::string& field, const std::string& rule) {
  throw InputError("cannot read " + field, {{field, "'" + path + "'", rule, "pass the path of a config file"}});
}
}  // namespace

std::string read_text_file(const std::string& path, const std::string& field) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) fail(path, field, "must name an existing file");
  if (!std::filesystem::is_regular_file(status))
    fail(path, field, "must name a regular file, not a directory or device");
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) fail(path, field, "must name a readable file (" + error.message() + ")");
  if (size > kMaxConfigBytes) {
    fail(path, field, fmt::format("must be a config file of at most 64 MiB (this one has {} bytes)", size));
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream) fail(path, field, fmt::format("must name a readable file ({})", std::strerror(errno)));
  std::ostringstream text;
  text << stream.rdbuf();
  if (stream.bad()) fail(path, field, "must name a readable file (read error)");
  return std::move(text).str();
}

}  // namespace attncheck
