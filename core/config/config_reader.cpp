#include "core/config/config_reader.hpp"

#include <cmath>

#include <fmt/format.h>

namespace attncheck {

ConfigReader::ConfigReader(const nlohmann::json& object, std::string source, std::string key_prefix, bool dash_aliases)
    : object_(object), source_(std::move(source)), key_prefix_(std::move(key_prefix)), dash_aliases_(dash_aliases) {}

std::string ConfigReader::describe(const nlohmann::json& value) {
  // Replace invalid UTF-8 (a YAML scalar may hold any bytes) rather than throw.
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  if (value.is_string()) return text + " (a string)";
  if (value.is_boolean()) return text + " (a boolean)";
  if (value.is_object()) return text + " (an object)";
  if (value.is_array()) return text + " (a list)";
  return text;
}

void ConfigReader::reject(std::string_view key, const std::string& value, std::string rule, std::string suggestion) {
  violations_->add(key_prefix_ + std::string(key), value, std::move(rule), std::move(suggestion));
}

ConfigReader ConfigReader::child(const nlohmann::json& object, const std::string& key) const {
  ConfigReader nested(object, source_, key.empty() ? key_prefix_ : key_prefix_ + key + ".", dash_aliases_);
  nested.violations_ = violations_;
  return nested;
}

std::optional<std::int64_t> ConfigReader::required_integer(std::string_view key, const std::string& suggestion) {
  if (find(key) == nullptr) {
    reject(key, "absent", "is required", suggestion);
    return std::nullopt;
  }
  return integer(key);
}

const nlohmann::json* ConfigReader::find(std::string_view key) {
  const nlohmann::json* found = nullptr;
  std::string found_spelling;
  std::string spellings[2] = {std::string(key), std::string(key)};
  for (char& c : spellings[1]) {
    if (c == '_') c = '-';
  }
  const int count = dash_aliases_ && spellings[1] != spellings[0] ? 2 : 1;
  for (int i = 0; i < count; ++i) {
    auto it = object_.find(spellings[i]);
    if (it == object_.end()) continue;
    if (found != nullptr && *found != *it) {
      reject(key, fmt::format("{} and {}", describe(*found), describe(*it)),
             fmt::format("is given twice, as '{}' and '{}', with different values", found_spelling, spellings[i]),
             "keep one spelling");
      return nullptr;
    }
    found = &*it;
    found_spelling = spellings[i];
  }
  return found == nullptr || found->is_null() ? nullptr : found;
}

std::optional<std::int64_t> ConfigReader::integer(std::string_view key) {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  // nlohmann::json counts an unsigned value as is_number_integer() too: test it first, or
  // 18446744073709551615 would read as -1.
  if (value->is_number_unsigned()) {
    const auto unsigned_value = value->get<std::uint64_t>();
    if (unsigned_value <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(unsigned_value);
    reject(key, describe(*value), "is beyond a 64-bit signed integer", "write the value the model has, e.g. 1024");
    return std::nullopt;
  }
  if (value->is_number_integer()) return value->get<std::int64_t>();
  // 1024.0 is accepted as 1024; 1024.5 and 1e30 are not integers of any use here.
  if (value->is_number_float()) {
    const double number_value = value->get<double>();
    if (std::isfinite(number_value) && std::trunc(number_value) == number_value && std::fabs(number_value) < 9.0e15) {
      return static_cast<std::int64_t>(number_value);
    }
  }
  reject(key, describe(*value), "must be an integer", "write it as a plain integer, e.g. 1024");
  return std::nullopt;
}

std::optional<double> ConfigReader::number(std::string_view key) {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_number()) return value->get<double>();
  reject(key, describe(*value), "must be a number", "write it as a plain number, e.g. 10000.0");
  return std::nullopt;
}

std::optional<bool> ConfigReader::boolean(std::string_view key) {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_boolean()) return value->get<bool>();
  reject(key, describe(*value), "must be true or false", "write true or false");
  return std::nullopt;
}

std::optional<std::string> ConfigReader::text(std::string_view key) {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  reject(key, describe(*value), "must be a string", "write it in quotes");
  return std::nullopt;
}

}  // namespace attncheck
