#include "cli/xml_text.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace attncheck::cli {
namespace {

bool allowed_in_xml(std::uint32_t code_point) {
  return code_point == 0x9 || code_point == 0xA || code_point == 0xD || (code_point >= 0x20 && code_point <= 0xD7FF) ||
         (code_point >= 0xE000 && code_point <= 0xFFFD) || (code_point >= 0x10000 && code_point <= 0x10FFFF);
}

// The length of the valid UTF-8 sequence at text[i] and its code point, or 0 when the bytes there are not one
// (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, beyond U+10FFFF).
std::size_t decode(std::string_view text, std::size_t i, std::uint32_t& code_point) {
  const auto byte = [&](std::size_t at) { return static_cast<std::uint8_t>(text[at]); };
  const std::uint8_t lead = byte(i);
  std::size_t length = 0;
  std::uint32_t smallest = 0;
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code_point = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code_point = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code_point = lead & 0x07, smallest = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i + k) & 0x3F);
  }
  if (code_point < smallest || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

std::string xml_text(std::string_view text) {
  std::string safe;
  safe.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t code_point = 0;
    const std::size_t length = decode(text, i, code_point);
    if (length == 0) {
      safe += fmt::format("\\x{:02X}", static_cast<std::uint8_t>(text[i]));
      ++i;
    } else if (!allowed_in_xml(code_point)) {
      safe += fmt::format("\\u{:04X}", code_point);
      i += length;
    } else {
      safe.append(text.substr(i, length));
      i += length;
    }
  }
  return safe;
}

}  // namespace attncheck::cli
