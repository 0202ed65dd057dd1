// FNV-1a 64 (golden/SCHEMA.md's hash(name)) over a stream of length-prefixed fields, so that ("ab", "c")
// and ("a", "bc") differ: each field is its length as 8 little-endian bytes, then its bytes. The stored
// yardsticks' case digest (stored_yardstick.cpp) is built on it.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::golden {

static_assert(std::endian::native == std::endian::little, "the digests hash little-endian lengths and values");

class FnvDigest {
 public:
  void bytes(const void* data, std::size_t size) {
    const auto* byte = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) state_ = (state_ ^ byte[i]) * 0x100000001B3ull;
  }
  void field(std::string_view text) {
    const std::uint64_t size = text.size();
    bytes(&size, sizeof size);
    bytes(text.data(), text.size());
  }
  void field(const std::vector<unsigned char>& raw) {
    field(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
  }
  std::string hex() const { return fmt::format("{:016x}", state_); }

 private:
  std::uint64_t state_ = 0xCBF29CE484222325ull;
};

}  // namespace attncheck::golden
