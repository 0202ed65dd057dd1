// Decoding one UTF-8 character, strictly: what the echo of a worker's text (exec_worker/worker_text.hpp) and
// the JUnit report's text (cli/xml_text.hpp) both need to tell valid characters from bytes to escape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace attncheck {

struct Utf8Character {
  char32_t code_point;
  std::size_t length;  // bytes
};

// The UTF-8 character at the front of text (not empty), or nullopt for a byte that does not start a valid one
// (a stray continuation byte, a truncated or overlong sequence, a surrogate, beyond U+10FFFF).
inline std::optional<Utf8Character> decode_utf8(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return Utf8Character{lead, 1};
  std::size_t length = 0;
  char32_t code_point = 0;
  char32_t smallest = 0;  // below it, the sequence is overlong
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code_point = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code_point = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code_point = lead & 0x07, smallest = 0x10000;
  } else {
    return std::nullopt;
  }
  if (text.size() < length) return std::nullopt;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return std::nullopt;
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  if (code_point < smallest || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
    return std::nullopt;
  }
  return Utf8Character{code_point, length};
}

}  // namespace attncheck
