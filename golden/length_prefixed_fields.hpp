// Fields framed for a digest as golden/SCHEMA.md specifies: each field is its length as 8 little-endian
// bytes, then its bytes, so that ("ab", "c") and ("a", "bc") differ. The integrity digest (SHA-256,
// integrity.cpp) and the stored yardsticks' case digest (FNV-1a, fnv_digest.hpp) frame fields alike;
// Hasher derives from LengthPrefixedFields<Hasher> and supplies bytes(data, size).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace attncheck::golden {

// Lengths are written, and the digests' callers hash numbers, as they lie in memory: little-endian.
static_assert(std::endian::native == std::endian::little, "the digests hash little-endian lengths and values");

template <class Hasher>
class LengthPrefixedFields {
 public:
  void field(std::string_view text) {
    const std::uint64_t size = text.size();
    hasher().bytes(&size, sizeof size);
    hasher().bytes(text.data(), text.size());
  }
  void field(const std::vector<unsigned char>& raw) {
    field(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
  }

 private:
  Hasher& hasher() { return static_cast<Hasher&>(*this); }
};

}  // namespace attncheck::golden
