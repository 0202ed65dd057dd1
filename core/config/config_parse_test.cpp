// The parsers' bounds: nesting depth, value count and (YAML, aliases expanded) text bytes are refused
// as InputErrors, and a JSON text of many small objects parses in time linear in its length.
#include "core/config/config_parse.hpp"

#include <gtest/gtest.h>

#include "core/errors/input_error.hpp"

namespace attncheck {
namespace {

InputError parse_rejection(const std::string& text, bool yaml) {
  try {
    if (yaml) {
      parse_yaml_as_json(text, "t");
    } else {
      parse_json(text, "t");
    }
  } catch (const InputError& error) {
    return error;
  }
  ADD_FAILURE() << "parsed without an InputError";
  return InputError("none", {});
}

std::string json_array_of_empty_objects(int count) {
  std::string text = "[";
  for (int i = 0; i < count; ++i) text += i == 0 ? "{}" : ",{}";
  return text + "]";
}

TEST(ConfigParse, ManySmallObjectsParseInLinearTime) {
  // With nlohmann's callback parser, 100,000 empty objects took 8 s and 300,000 would take over a minute
  // (ctest's timeout); the bounded SAX builder reads them in milliseconds.
  const nlohmann::json parsed = parse_json(json_array_of_empty_objects(300'000), "t");
  ASSERT_TRUE(parsed.is_array());
  EXPECT_EQ(parsed.size(), 300'000u);
  EXPECT_TRUE(parsed.back().is_object());
}

TEST(ConfigParse, JsonBeyondTheValueBoundIsRefused) {
  // 1,000,000 objects and their array: one value past the bound.
  const InputError error = parse_rejection(json_array_of_empty_objects(1'000'000), false);
  ASSERT_TRUE(error.names_field("config"));
  EXPECT_NE(error.violations().front().value.find("more than 1000000 values"), std::string::npos);
}

TEST(ConfigParse, NestingIsBoundedAt64Levels) {
  const auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  EXPECT_NO_THROW(parse_json(nested(64), "t"));
  const InputError error = parse_rejection(nested(65), false);
  ASSERT_TRUE(error.names_field("config"));
  EXPECT_NE(error.violations().front().value.find("levels of nesting"), std::string::npos);
  EXPECT_TRUE(parse_rejection(nested(100'000), false).names_field("config"));
}

TEST(ConfigParse, JsonErrorsStillNameTheirPlace) {
  EXPECT_TRUE(parse_rejection("{\"a\": [1, 2}", false).names_field("json"));
  EXPECT_TRUE(parse_rejection("{\"a\": 1e400}", false).names_field("json"));
  const nlohmann::json parsed = parse_json(R"({"a": [1, 2.5, "x", null, true], "b": {"c": -3}})", "t");
  EXPECT_EQ(parsed["a"][1], 2.5);
  EXPECT_EQ(parsed["b"]["c"], -3);
}

TEST(ConfigParse, YamlAliasesOfALongStringAreBoundedInBytes) {
  // One 8 MiB string aliased 1,000 times: 1,001 values, but 8 GB once expanded (it ended in bad_alloc).
  std::string text = "a: &s \"" + std::string(std::size_t{8} << 20, 'x') + "\"\nb: [*s";
  for (int i = 1; i < 1000; ++i) text += ", *s";
  text += "]\n";
  const InputError error = parse_rejection(text, true);
  ASSERT_TRUE(error.names_field("config"));
  EXPECT_NE(error.violations().front().value.find("bytes of keys and strings"), std::string::npos);
  // Seven copies (56 MiB with the anchor's own) are within the bound.
  std::string seven = "a: &s \"" + std::string(std::size_t{8} << 20, 'x') + "\"\nb: [*s, *s, *s, *s, *s, *s]\n";
  EXPECT_EQ(parse_yaml_as_json(seven, "t")["b"].size(), 6u);
}

}  // namespace
}  // namespace attncheck
