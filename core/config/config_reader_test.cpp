// ConfigReader: typed lookups, null as absent, key paths in messages, NeoX's two spellings.
#include "core/config/config_reader.hpp"

#include <gtest/gtest.h>

namespace attncheck {
namespace {

TEST(ConfigReader, ReadsTypedValuesAndTreatsNullAsAbsent) {
  const nlohmann::json object = {{"a", 12}, {"b", 2.5}, {"c", true}, {"d", "text"}, {"e", nullptr}, {"f", 8.0}};
  ConfigReader reader(object, "src");
  EXPECT_EQ(reader.integer("a"), 12);
  EXPECT_EQ(reader.number("a"), 12.0);
  EXPECT_EQ(reader.number("b"), 2.5);
  EXPECT_EQ(reader.boolean("c"), true);
  EXPECT_EQ(reader.text("d"), "text");
  EXPECT_EQ(reader.integer("e"), std::nullopt);
  EXPECT_EQ(reader.integer("missing"), std::nullopt);
  EXPECT_EQ(reader.integer("f"), 8);
  EXPECT_NO_THROW(reader.finish());
}

TEST(ConfigReader, CollectsEveryTypeErrorWithTheKeyPath) {
  const nlohmann::json outer = {{"inner", {{"n", "x"}, {"m", 1.5}, {"big", 1e300}}}};
  ConfigReader reader(outer, "src");
  ConfigReader inner = reader.child(outer["inner"], "inner");
  EXPECT_EQ(inner.integer("n"), std::nullopt);
  EXPECT_EQ(inner.integer("m"), std::nullopt);
  EXPECT_EQ(inner.integer("big"), std::nullopt);
  EXPECT_EQ(inner.required_integer("absent", "add it"), std::nullopt);
  try {
    reader.finish();
    FAIL();
  } catch (const InputError& error) {
    ASSERT_EQ(error.violations().size(), 4u);
    EXPECT_EQ(error.violations()[0].field, "inner.n");
    EXPECT_EQ(error.violations()[1].value, "1.5");
    EXPECT_EQ(error.violations()[3].field, "inner.absent");
    EXPECT_EQ(error.violations()[3].rule, "is required");
    EXPECT_EQ(error.context(), "src");
  }
}

TEST(ConfigReader, DashAliasesReadEitherSpelling) {
  const nlohmann::json object = {{"hidden-size", 512}, {"num_heads", 8}};
  ConfigReader reader(object, "neox", "", /*dash_aliases=*/true);
  EXPECT_EQ(reader.integer("hidden_size"), 512);
  EXPECT_EQ(reader.integer("num_heads"), 8);
  ConfigReader strict(object, "hf");
  EXPECT_EQ(strict.integer("hidden_size"), std::nullopt);
}

TEST(ConfigReader, DescribeShortensLongValues) {
  const nlohmann::json long_list = nlohmann::json(std::vector<int>(100, 7));
  const std::string text = ConfigReader::describe(long_list);
  EXPECT_LE(text.size(), 80u);
  EXPECT_NE(text.find("(a list)"), std::string::npos);
}

}  // namespace
}  // namespace attncheck
