#include "cli/xml_text.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "core/text/utf8.hpp"

namespace attncheck::cli {
namespace {

bool allowed_in_xml(std::uint32_t code_point) {
  return code_point == 0x9 || code_point == 0xA || code_point == 0xD || (code_point >= 0x20 && code_point <= 0xD7FF) ||
         (code_point >= 0xE000 && code_point <= 0xFFFD) || (code_point >= 0x10000 && code_point <= 0x10FFFF);
}

}  // namespace

std::string xml_text(std::string_view text) {
  std::string safe;
  safe.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::optional<Utf8Character> decoded = decode_utf8(text.substr(i));
    if (!decoded) {
      safe += fmt::format("\\x{:02X}", static_cast<std::uint8_t>(text[i]));
      ++i;
      continue;
    }
    if (allowed_in_xml(decoded->code_point)) {
      safe.append(text.substr(i, decoded->length));
    } else {
      safe += fmt::format("\\u{:04X}", static_cast<std::uint32_t>(decoded->code_point));
    }
    i += decoded->length;
  }
  return safe;
}

}  // namespace attncheck::cli
