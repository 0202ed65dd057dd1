#include "core/config/config_parse.hpp"

#include <regex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {

// Config files are shallow and small; these bounds turn hostile input (deep nesting, YAML alias
// "billion laughs") into an error instead of a stack overflow or an out-of-memory kill.
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxValues = 1'000'000;

[[noreturn]] void too_big(const std::string& source, const std::string& what) {
  throw InputError(source, {{"config", what,
                             "must be a config file: nesting at most 64 levels deep and at most "
                             "1000000 values once YAML aliases are expanded",
                             "pass the model's config, not generated or recursive data"}});
}

nlohmann::json plain_scalar(const std::string& text) {
  static const std::regex integer_pattern(R"([-+]?[0-9]+)");
  static const std::regex float_pattern(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  try {
    if (std::regex_match(text, integer_pattern)) return std::stoll(text);
    if (std::regex_match(text, float_pattern)) return std::stod(text);
  } catch (const std::out_of_range&) {
    // Too large for int64 or double: keep the text; the typed reader reports it as not a number.
  }
  return text;
}

// Converts recursively; depth and the running count of values are bounded (aliases may make a small
// YAML text expand into a huge or even cyclic tree).
nlohmann::json to_json(const YAML::Node& node, int depth, std::size_t& values, const std::string& source) {
  if (depth > kMaxDepth) too_big(source, fmt::format("more than {} levels of nesting", kMaxDepth));
  if (++values > kMaxValues) too_big(source, fmt::format("more than {} values", kMaxValues));
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // Tag "!" marks a quoted scalar, which YAML never types.
      return node.Tag() == "!" ? nlohmann::json(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const YAML::Node& item : node) array.push_back(to_json(item, depth + 1, values, source));
      return array;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& item : node) {
        object[item.first.as<std::string>()] = to_json(item.second, depth + 1, values, source);
      }
      return object;
    }
  }
  return nullptr;
}

}  // namespace

nlohmann::json parse_yaml_as_json(const std::string& text, const std::string& source) {
  try {
    std::size_t values = 0;
    return to_json(YAML::Load(text), 0, values, source);
  } catch (const YAML::Exception& error) {
    throw InputError(source, {{"yaml", fmt::format("line {}, column {}", error.mark.line + 1, error.mark.column + 1),
                               "must be valid YAML: " + error.msg, "fix the syntax at that position"}});
  }
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  try {
    const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMaxDepth) too_big(source, fmt::format("more than {} levels of nesting", kMaxDepth));
      return true;
    };
    return nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(source, {{"json", fmt::format("byte {}", error.byte),
                               std::string("must be valid JSON: ") + error.what(), "fix the syntax at that position"}});
  } catch (const nlohmann::json::exception& error) {
    // e.g. a number too large for a double (1e400): valid syntax, but no value attncheck can use.
    throw InputError(source, {{"json", "a value", std::string("must be representable: ") + error.what(),
                               "write numbers within the range of a double"}});
  }
}

}  // namespace attncheck
