// Bounded, escaped echoes of a worker's text (exec_worker/worker_text.hpp).
#include "exec_worker/worker_text.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

namespace attncheck::exec_worker {

namespace {

struct Decoded {
  char32_t code_point;
  std::size_t length;  // bytes
};

// The UTF-8 character at the front of text, or nullopt for a byte that does not start a valid one
// (a stray continuation byte, a truncated or overlong sequence, a surrogate, beyond U+10FFFF).
std::optional<Decoded> decode(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return Decoded{lead, 1};
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
  return Decoded{code_point, length};
}

// Characters a terminal or a reader would act on rather than show: C0 and C1 controls, DEL, and the
// bidirectional embeddings, overrides and isolates (which reorder the text around them).
bool is_control(char32_t code_point) {
  return code_point < 0x20 || (code_point >= 0x7F && code_point <= 0x9F) ||
         (code_point >= 0x202A && code_point <= 0x202E) || (code_point >= 0x2066 && code_point <= 0x2069);
}

}  // namespace

std::string echoable(std::string_view text, std::size_t already_cut, std::size_t limit) {
  std::string shown;
  std::size_t read = 0;
  while (read < text.size()) {
    const std::optional<Decoded> decoded = decode(text.substr(read));
    std::string piece;
    std::size_t consumed = 1;
    if (!decoded) {
      piece = fmt::format("\\x{:02x}", static_cast<std::uint8_t>(text[read]));
    } else if (is_control(decoded->code_point)) {
      piece = decoded->code_point < 0x100 ? fmt::format("\\x{:02x}", static_cast<std::uint32_t>(decoded->code_point))
                                          : fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(decoded->code_point));
      consumed = decoded->length;
    } else {
      piece.assign(text.substr(read, decoded->length));
      consumed = decoded->length;
    }
    if (shown.size() + piece.size() > limit) break;
    shown += piece;
    read += consumed;
  }
  const std::size_t cut = text.size() - read + already_cut;
  if (cut > 0) shown += fmt::format(" [... {} more bytes cut]", cut);
  return shown;
}

}  // namespace attncheck::exec_worker
