// echoable(): a worker's text is repeated bounded, with a cut marker, and with nothing that could break
// a terminal or a JSON document (control characters, invalid UTF-8, bidirectional overrides).
#include "exec_worker/worker_text.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace attncheck::exec_worker {
namespace {

TEST(WorkerText, PlainTextUnchanged) {
  EXPECT_EQ(echoable("head_dim 96 is not supported"), "head_dim 96 is not supported");
  EXPECT_EQ(echoable("d\xc3\xa9j\xc3\xa0 vu \xe2\x9c\x93"), "d\xc3\xa9j\xc3\xa0 vu \xe2\x9c\x93");  // valid UTF-8 kept
  EXPECT_EQ(echoable(""), "");
}

TEST(WorkerText, ControlCharactersEscaped) {
  EXPECT_EQ(echoable("red\x1b[31m\x07\ttab\nline\r"), "red\\x1b[31m\\x07\\x09tab\\x0aline\\x0d");
  EXPECT_EQ(echoable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(echoable("del\x7f"), "del\\x7f");
  EXPECT_EQ(echoable("csi\xc2\x9b"), "csi\\x9b");                       // a C1 control (U+009B)
  EXPECT_EQ(echoable("bidi\xe2\x80\xae" "evil"), "bidi\\u{202e}evil");      // RIGHT-TO-LEFT OVERRIDE
}

TEST(WorkerText, InvalidUtf8Escaped) {
  EXPECT_EQ(echoable("a\xff" "b"), "a\\xffb");
  EXPECT_EQ(echoable("\xc3"), "\\xc3");                        // truncated sequence
  EXPECT_EQ(echoable("\xc0\xaf"), "\\xc0\\xaf");               // overlong '/'
  EXPECT_EQ(echoable("\xed\xa0\x80"), "\\xed\\xa0\\x80");      // a surrogate
  EXPECT_EQ(echoable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  EXPECT_EQ(echoable("\x80"), "\\x80");                        // a stray continuation byte
}

TEST(WorkerText, CutWithMarker) {
  const std::string long_text(20'000'000, 'x');
  const std::string shown = echoable(long_text);
  EXPECT_EQ(shown, std::string(kLongestEcho, 'x') + " [... 19999000 more bytes cut]");
  // Bytes the caller dropped already (a line beyond kLongestWorkerLine) are counted in the marker.
  EXPECT_EQ(echoable("abc", 7), "abc [... 7 more bytes cut]");
  EXPECT_EQ(echoable("abcdef", 0, 4), "abcd [... 2 more bytes cut]");
}

TEST(WorkerText, CutNeverSplitsACharacterOrAnEscape) {
  // 3 bytes each: the fourth would pass a 10-byte limit, so three are shown.
  EXPECT_EQ(echoable("\xe2\x9c\x93\xe2\x9c\x93\xe2\x9c\x93\xe2\x9c\x93", 0, 10),
            "\xe2\x9c\x93\xe2\x9c\x93\xe2\x9c\x93 [... 3 more bytes cut]");
  EXPECT_EQ(echoable("\x01\x02\x03", 0, 9), "\\x01\\x02 [... 1 more bytes cut]");
}

TEST(WorkerText, AlwaysValidJson) {
  std::string every_byte;
  for (int byte = 0; byte < 256; ++byte) every_byte += static_cast<char>(byte);
  const std::string shown = echoable(every_byte + every_byte);
  // nlohmann::json's dump() throws on invalid UTF-8 (its default error handler): it must not.
  EXPECT_NO_THROW((void)nlohmann::json(shown).dump());
  EXPECT_LE(shown.size(), kLongestEcho + 40);
  for (const char c : shown) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << shown;
}

}  // namespace
}  // namespace attncheck::exec_worker
