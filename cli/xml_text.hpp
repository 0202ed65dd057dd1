// Text that is valid in an XML 1.0 document, whatever it was: golden names from the file system and reasons
// a worker wrote can hold control characters, invalid UTF-8 or U+FFFE / U+FFFF, which no XML parser accepts
// (a JUnit report with one of them is read as no report at all by a CI gate).
#pragma once

#include <string>
#include <string_view>

namespace attncheck::cli {

// `text` with every character XML 1.0 allows kept as it is (tab, newline, carriage return, U+0020..U+D7FF,
// U+E000..U+FFFD, U+10000..U+10FFFF) and everything else written visibly instead: a disallowed character as
// \uXXXX (U+0001 -> "\u0001"), a byte that is not part of valid UTF-8 as \xNN. Markup (<, &, quotes) is
// left to the XML writer, which escapes it.
std::string xml_text(std::string_view text);

}  // namespace attncheck::cli
