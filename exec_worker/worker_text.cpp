// Bounded, escaped echoes of a worker's text (exec_worker/worker_text.hpp).
#include "exec_worker/worker_text.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "core/text/utf8.hpp"

namespace attncheck::exec_worker {

namespace {

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
    const std::optional<Utf8Character> decoded = decode_utf8(text.substr(read));
    std::string piece;
    std::size_t consumed = 1;
    if (!decoded) {
      piece = fmt::format("\\x{:02x}", static_cast<std::uint8_t>(text[read]));
    } else if (is_control(decoded->code_point)) {
      piece = decoded->code_point < 0x100
                  ? fmt::format("\\x{:02x}", static_cast<std::uint32_t>(decoded->code_point))
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
