// ConfigReader: typed, checked lookups of keys in a parsed config object (HF config.json, or a GPT-NeoX
// YAML converted to JSON). A key that is absent or null reads as nullopt; a key of the wrong type or
// out of range is recorded as a Violation naming the key path, its value and the expected form, and
// finish() throws them all at once, so a bad file is reported in one pass.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/errors/input_error.hpp"

namespace attncheck {

class ConfigReader {
 public:
  // source: how the file is named in messages ("hf config 'config.json'").
  // key_prefix: prepended to key names in messages ("text_config.").
  // dash_aliases: GPT-NeoX spells keys either way ("hidden-size" == "hidden_size").
  ConfigReader(const nlohmann::json& object, std::string source, std::string key_prefix = {},
               bool dash_aliases = false);

  // A reader of a nested object (named key; empty for a replacement of this object) that reports into
  // the same violation list.
  ConfigReader child(const nlohmann::json& object, const std::string& key) const;

  std::optional<std::int64_t> integer(std::string_view key);
  // Like integer(), and records "is required" when the key is absent or null.
  std::optional<std::int64_t> required_integer(std::string_view key, const std::string& suggestion);
  std::optional<double> number(std::string_view key);
  std::optional<bool> boolean(std::string_view key);
  std::optional<std::string> text(std::string_view key);
  // The raw value (nullptr when absent or null), for nested objects and arrays.
  const nlohmann::json* find(std::string_view key);

  // Records a violation for a key of this object.
  void reject(std::string_view key, const std::string& value, std::string rule, std::string suggestion);

  ViolationList& violations() { return *violations_; }
  const std::string& source() const { return source_; }
  const std::string& key_prefix() const { return key_prefix_; }
  void finish() const { violations_->throw_if_any(source_); }

  // The JSON text of a value, shortened for messages: 1024, "1024" (string), [1, 2] ...
  static std::string describe(const nlohmann::json& value);

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string key_prefix_;
  bool dash_aliases_;
  std::shared_ptr<ViolationList> violations_ = std::make_shared<ViolationList>();
};

}  // namespace attncheck
