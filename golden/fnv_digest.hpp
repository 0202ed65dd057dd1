// FNV-1a 64 (golden/SCHEMA.md's hash(name)) over a stream of length-prefixed fields
// (length_prefixed_fields.hpp). The stored yardsticks' case digest (stored_yardstick.cpp) is built on it.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "golden/length_prefixed_fields.hpp"

namespace attncheck::golden {

class FnvDigest : public LengthPrefixedFields<FnvDigest> {
 public:
  void bytes(const void* data, std::size_t size) {
    const auto* byte = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) state_ = (state_ ^ byte[i]) * 0x100000001B3ull;
  }
  std::string hex() const { return fmt::format("{:016x}", state_); }

 private:
  std::uint64_t state_ = 0xCBF29CE484222325ull;
};

}  // namespace attncheck::golden
