#include "core/config/config_parse.hpp"

#include <regex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {

// Config files are shallow and small; these bounds turn hostile input (deep nesting, YAML alias
// "billion laughs", one long string aliased many times) into an error instead of a stack overflow or an
// out-of-memory kill. The byte bound is that of the file itself (core/config/text_file.cpp): aliases
// may repeat text, never grow it past what a file could hold.
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxValues = 1'000'000;
constexpr std::size_t kMaxTextBytes = std::size_t{64} << 20;

[[noreturn]] void too_big(const std::string& source, const std::string& what) {
  throw InputError(source, {{"config", what,
                             "must be a config file: nesting at most 64 levels deep, at most 1000000 values "
                             "and 64 MiB of keys and strings once YAML aliases are expanded",
                             "pass the model's config, not generated or recursive data"}});
}

// What the conversion has produced so far (aliases expanded).
struct Expansion {
  std::size_t values = 0;
  std::size_t text_bytes = 0;
};

void count_text(Expansion& expansion, std::size_t bytes, const std::string& source) {
  expansion.text_bytes += bytes;
  if (expansion.text_bytes > kMaxTextBytes) {
    too_big(source, fmt::format("more than {} bytes of keys and strings", kMaxTextBytes));
  }
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
nlohmann::json to_json(const YAML::Node& node, int depth, Expansion& expansion, const std::string& source) {
  if (depth > kMaxDepth) too_big(source, fmt::format("more than {} levels of nesting", kMaxDepth));
  if (++expansion.values > kMaxValues) too_big(source, fmt::format("more than {} values", kMaxValues));
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      count_text(expansion, node.Scalar().size(), source);
      // Tag "!" marks a quoted scalar, which YAML never types.
      return node.Tag() == "!" ? nlohmann::json(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const YAML::Node& item : node) array.push_back(to_json(item, depth + 1, expansion, source));
      return array;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& item : node) {
        std::string key = item.first.as<std::string>();
        count_text(expansion, key.size(), source);
        object[std::move(key)] = to_json(item.second, depth + 1, expansion, source);
      }
      return object;
    }
  }
  return nullptr;
}

// nlohmann's DOM builder with the depth and value bounds checked at each event. Not parse()'s callback
// form: in nlohmann 3.11 that is quadratic in the number of objects (100,000 empty objects took 8 s,
// 1,000,000 never finished); sax_parse with this builder is linear. sax_parse is a template over the
// handler type, so these members hide the base ones without virtual calls.
class BoundedJsonBuilder : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
  BoundedJsonBuilder(nlohmann::json& result, const std::string& source) : Base(result), source_(source) {}

  bool null() { return count() && Base::null(); }
  bool boolean(bool value) { return count() && Base::boolean(value); }
  bool number_integer(nlohmann::json::number_integer_t value) { return count() && Base::number_integer(value); }
  bool number_unsigned(nlohmann::json::number_unsigned_t value) { return count() && Base::number_unsigned(value); }
  bool number_float(nlohmann::json::number_float_t value, const std::string& text) {
    return count() && Base::number_float(value, text);
  }
  bool string(std::string& value) { return count() && Base::string(value); }
  bool binary(nlohmann::json::binary_t& value) { return count() && Base::binary(value); }
  bool start_object(std::size_t elements) { return enter() && Base::start_object(elements); }
  bool end_object() { return leave() && Base::end_object(); }
  bool start_array(std::size_t elements) { return enter() && Base::start_array(elements); }
  bool end_array() { return leave() && Base::end_array(); }

 private:
  bool count() {
    if (++values_ > kMaxValues) too_big(source_, fmt::format("more than {} values", kMaxValues));
    return true;
  }
  bool enter() {
    if (++depth_ > kMaxDepth) too_big(source_, fmt::format("more than {} levels of nesting", kMaxDepth));
    return count();
  }
  bool leave() {
    --depth_;
    return true;
  }

  const std::string& source_;
  std::size_t values_ = 0;
  int depth_ = 0;
};

}  // namespace

nlohmann::json parse_yaml_as_json(const std::string& text, const std::string& source) {
  try {
    Expansion expansion;
    return to_json(YAML::Load(text), 0, expansion, source);
  } catch (const YAML::Exception& error) {
    throw InputError(source, {{"yaml", fmt::format("line {}, column {}", error.mark.line + 1, error.mark.column + 1),
                               "must be valid YAML: " + error.msg, "fix the syntax at that position"}});
  }
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  try {
    nlohmann::json result;
    BoundedJsonBuilder builder(result, source);
    nlohmann::json::sax_parse(text, &builder);
    return result;
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
