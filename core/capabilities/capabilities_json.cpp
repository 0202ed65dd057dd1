#include "core/capabilities/capabilities_json.hpp"

#include <fmt/format.h>

#include <numeric>
#include <set>

#include "core/errors/input_error.hpp"

namespace attncheck {

namespace {

constexpr std::int64_t kLargestStatedValue = std::int64_t{1} << 30;

std::string shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 100 ? text.substr(0, 97) + "..." : text;
}

// The features a list names, each unknown name a violation.
FeatureSet read_feature_list(const nlohmann::json& value, const std::string& field, ViolationList& violations) {
  FeatureSet features;
  if (!value.is_array()) {
    violations.add(field, shown(value), "must be a list of feature names", "[\"causal\", \"rope-half-split\"]");
    return features;
  }
  for (const nlohmann::json& entry : value) {
    const std::optional<Feature> feature = entry.is_string() ? parse_feature(entry.get<std::string>()) : std::nullopt;
    if (!feature) {
      violations.add(field, shown(entry), "must name a feature", feature_names());
      continue;
    }
    features.insert(*feature);
  }
  return features;
}

std::optional<std::int64_t> read_positive(const nlohmann::json& statement, const std::string& key,
                                          ViolationList& violations) {
  if (!statement.contains(key)) return std::nullopt;
  const nlohmann::json& value = statement.at(key);
  if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > kLargestStatedValue) {
    violations.add(key, shown(value), "must be a whole number in [1, 2^30]", "e.g. 8");
    return std::nullopt;
  }
  return value.get<std::int64_t>();
}

}  // namespace

Capabilities parse_capabilities(const nlohmann::json& statement, const std::string& source) {
  ViolationList violations;
  if (!statement.is_object()) {
    violations.add("statement", shown(statement), "must be one JSON object", R"({"features": ["causal", ...]})");
    violations.throw_if_any(source);
  }
  static const std::set<std::string> kKeys{
      "features",    "without",    "head_dim_multiple_of", "max_head_dim",
      "max_seq",     "max_batch",  "max_num_heads",        "max_hidden_size",
      "max_tp_size", "precisions", "tp_convention",        "stated"};  // "stated": to_json's, ignored
  for (const auto& [key, value] : statement.items()) {
    if (!kKeys.contains(key)) {
      violations.add(key, shown(value), "is not a key of a capability statement",
                     "features, without, head_dim_multiple_of, max_head_dim, max_seq, max_batch, max_num_heads, "
                     "max_hidden_size, max_tp_size, tp_convention, precisions");
    }
  }
  Capabilities capabilities{.stated = true};
  if (!statement.contains("features")) {
    violations.add("features", "absent", "is required: the features the implementation supports (or \"all\")",
                   R"("features": ["causal", "rope-half-split", "backward"])");
  } else if (const nlohmann::json& features = statement.at("features"); features.is_string()) {
    if (features.get<std::string>() != "all") {
      violations.add("features", shown(features), "must be a list of feature names or \"all\"", "\"all\"");
    }
  } else {
    capabilities.features = read_feature_list(features, "features", violations);
  }
  if (statement.contains("without")) {
    capabilities.features =
        capabilities.features.minus(read_feature_list(statement.at("without"), "without", violations));
  }
  if (const auto multiple = read_positive(statement, "head_dim_multiple_of", violations)) {
    capabilities.head_dim_multiple_of = *multiple;
  }
  capabilities.max_head_dim = read_positive(statement, "max_head_dim", violations);
  capabilities.max_seq = read_positive(statement, "max_seq", violations);
  capabilities.max_batch = read_positive(statement, "max_batch", violations);
  capabilities.max_num_heads = read_positive(statement, "max_num_heads", violations);
  capabilities.max_hidden_size = read_positive(statement, "max_hidden_size", violations);
  capabilities.max_tp_size = read_positive(statement, "max_tp_size", violations);
  if (statement.contains("tp_convention")) {
    const nlohmann::json& value = statement.at("tp_convention");
    const auto convention = value.is_string() ? parse_tp_convention(value.get<std::string>()) : std::nullopt;
    if (!convention) {
      violations.add("tp_convention", shown(value), "must name a TP convention",
                     "replicated-kv or megatron-equal-block");
    } else {
      capabilities.tp_convention = *convention;
    }
  }
  if (statement.contains("precisions")) {
    const nlohmann::json& precisions = statement.at("precisions");
    if (!precisions.is_array() || precisions.empty()) {
      violations.add("precisions", shown(precisions), "must be a non-empty list of precisions", R"(["fp32"])");
    } else {
      for (const nlohmann::json& entry : precisions) {
        const auto precision = entry.is_string() ? parse_precision(entry.get<std::string>()) : std::nullopt;
        if (!precision) {
          violations.add("precisions", shown(entry), "must name a precision", "fp64, fp32, bf16 or fp16");
        } else {
          capabilities.precisions.insert(*precision);
        }
      }
    }
  }
  if (violations.empty()) {
    const FeatureSet& features = capabilities.features;
    if (!features.contains(Feature::causal) && !features.contains(Feature::bidirectional)) {
      violations.add("features", to_string(features), "must include causal or bidirectional: every case has a mask",
                     "add \"causal\"");
    }
    if (!features.contains(Feature::rope_half_split) && !features.contains(Feature::rope_interleaved) &&
        !features.contains(Feature::no_rope)) {
      violations.add("features", to_string(features),
                     "must include rope-half-split, rope-interleaved or no-rope: every case has a RoPE form",
                     "add \"rope-half-split\"");
    }
    // A plain layer's head_dim is even (RoPE pairs its channels) and a multiple of head_dim_multiple_of; without
    // explicit-head-dim, hidden_size holds at least one such head. Latent heads need only the multiple.
    const std::int64_t multiple = capabilities.head_dim_multiple_of;
    const std::int64_t plain_step = std::lcm<std::int64_t>(2, multiple);
    const bool latent_only =
        features.contains(Feature::latent) && capabilities.max_head_dim && *capabilities.max_head_dim >= multiple;
    if (capabilities.max_head_dim && *capabilities.max_head_dim < plain_step && !latent_only) {
      violations.add("max_head_dim", std::to_string(*capabilities.max_head_dim),
                     fmt::format("must admit an even head_dim that is a multiple of {}", multiple),
                     std::to_string(plain_step));
    }
    if (capabilities.max_hidden_size && *capabilities.max_hidden_size < plain_step &&
        !features.contains(Feature::explicit_head_dim) && !features.contains(Feature::latent)) {
      violations.add("max_hidden_size", std::to_string(*capabilities.max_hidden_size),
                     fmt::format("must hold one head of an even head_dim that is a multiple of {} (without "
                                 "explicit-head-dim, hidden_size is num_heads x head_dim)",
                                 multiple),
                     std::to_string(plain_step));
    }
  }
  violations.throw_if_any(source);
  return capabilities;
}

Capabilities parse_capabilities_text(std::string_view text, const std::string& source) {
  nlohmann::json statement;
  try {
    statement = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(source,
                     {{"statement", std::string(text.substr(0, 100)), fmt::format("must be JSON ({})", error.what()),
                       R"({"features": ["causal", "rope-half-split", "backward"]})"}});
  }
  return parse_capabilities(statement, source);
}

nlohmann::json to_json(const Capabilities& capabilities) {
  nlohmann::json features = nlohmann::json::array();
  for (const Feature feature : capabilities.features.list()) features.push_back(std::string(to_string(feature)));
  nlohmann::json json{{"stated", capabilities.stated}, {"features", features}};
  if (capabilities.head_dim_multiple_of > 1) json["head_dim_multiple_of"] = capabilities.head_dim_multiple_of;
  for (const auto& [key, limit] :
       {std::pair{"max_head_dim", capabilities.max_head_dim}, std::pair{"max_seq", capabilities.max_seq},
        std::pair{"max_batch", capabilities.max_batch}, std::pair{"max_num_heads", capabilities.max_num_heads},
        std::pair{"max_hidden_size", capabilities.max_hidden_size},
        std::pair{"max_tp_size", capabilities.max_tp_size}}) {
    if (limit) json[key] = *limit;
  }
  if (capabilities.tp_convention) json["tp_convention"] = std::string(to_string(*capabilities.tp_convention));
  if (!capabilities.precisions.empty()) {
    nlohmann::json precisions = nlohmann::json::array();
    for (const Precision precision : capabilities.precisions.list())
      precisions.push_back(std::string(to_string(precision)));
    json["precisions"] = precisions;
  }
  return json;
}

FeatureSet parse_feature_list(const std::vector<std::string>& names, const std::string& option) {
  ViolationList violations;
  FeatureSet features;
  for (const std::string& name : names) {
    if (const auto feature = parse_feature(name)) {
      features.insert(*feature);
    } else {
      violations.add(option, name.substr(0, 100), "must name a feature", feature_names());
    }
  }
  violations.throw_if_any("invalid option");
  return features;
}

}  // namespace attncheck
