// xml_text(): every character XML 1.0 allows kept, everything else written visibly.
#include "cli/xml_text.hpp"

#include <gtest/gtest.h>

namespace attncheck::cli {
namespace {

TEST(XmlText, KeepsWhatXmlAllowsAndWritesTheRestVisibly) {
  EXPECT_EQ(xml_text("plain <&> \"text\"\t\n\r"), "plain <&> \"text\"\t\n\r");  // markup is the writer's to escape
  EXPECT_EQ(xml_text("h\xC3\xA9"
                     "ad \xE2\x86\x92 \xF0\x9F\x98\x80"),
            "h\xC3\xA9"
            "ad \xE2\x86\x92 \xF0\x9F\x98\x80");
  EXPECT_EQ(xml_text(std::string("a\x01"
                                 "b\x00"
                                 "c",
                                 5)),
            "a\\u0001b\\u0000c");
  EXPECT_EQ(xml_text("\xEF\xBF\xBE\xEF\xBF\xBF"), "\\uFFFE\\uFFFF");  // U+FFFE, U+FFFF
  EXPECT_EQ(xml_text("\xEF\xBF\xBD"), "\xEF\xBF\xBD");                // U+FFFD is allowed
  EXPECT_EQ(xml_text("bad\xFFname"), "bad\\xFFname");                 // not UTF-8
  EXPECT_EQ(xml_text("\xC0\xAF"), "\\xC0\\xAF");                      // overlong '/'
  EXPECT_EQ(xml_text("\xED\xA0\x80"), "\\xED\\xA0\\x80");             // a surrogate, U+D800
  EXPECT_EQ(xml_text("cut \xE2\x86"), "cut \\xE2\\x86");              // truncated at the end
  EXPECT_EQ(xml_text("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");    // beyond U+10FFFF
}

}  // namespace
}  // namespace attncheck::cli
