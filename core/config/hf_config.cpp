#include "core/config/hf_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/config/config_parse.hpp"
#include "core/config/config_reader.hpp"
#include "core/config/hf_architectures.hpp"
#include "core/config/text_file.hpp"
#include "core/errors/nearby.hpp"

namespace attncheck {

namespace {

enum class LayerKind { full, sliding };

std::string_view to_string(LayerKind kind) {
  return kind == LayerKind::full ? "full_attention" : "sliding_attention";
}

// ConfigReader reads a null as an absent key. Where transformers (5.24.0) does not, keeping the None and
// failing when it builds the model (rope_theta, rms_norm_eps, query_pre_attn_scalar, a max_window_layers
// it compares with) or reading it as something else (yarn's truncate: null as false), attncheck refuses
// the null rather than read the key's default. `expected` is the form the key takes.
void refuse_null(ConfigReader& reader, const nlohmann::json& object, const std::string& key,
                 std::string_view expected) {
  const auto value = object.find(key);
  if (value == object.end() || !value->is_null()) return;
  reader.reject(key, "null",
                fmt::format("must be {}, or absent where a default applies: a null is not read as the default "
                            "(transformers keeps it, and either fails or reads it otherwise)",
                            expected),
                fmt::format("state the value, or remove \"{}\"", key));
}

// Which kind of attention layer `layer` is, from layer_types, Gemma 2's and 3's patterns, Qwen2/3's
// use_sliding_window / max_window_layers, or a model-wide sliding_window (Mistral, Phi-3).
LayerKind layer_kind(ConfigReader& reader, const nlohmann::json& config, HfFamily family, std::int64_t layer) {
  if (const nlohmann::json* layer_types = reader.find("layer_types")) {
    if (!layer_types->is_array() || layer >= static_cast<std::int64_t>(layer_types->size())) {
      reader.reject("layer_types", ConfigReader::describe(*layer_types),
                    fmt::format("must be a list with an entry for layer {}", layer), "list one type per layer");
      return LayerKind::full;
    }
    const nlohmann::json& type = (*layer_types)[static_cast<std::size_t>(layer)];
    if (type == "full_attention") return LayerKind::full;
    if (type == "sliding_attention") return LayerKind::sliding;
    reader.reject(fmt::format("layer_types[{}]", layer), ConfigReader::describe(type),
                  "must be \"full_attention\" or \"sliding_attention\"; other layer kinds are not modelled",
                  "choose a layer of one of those kinds");
    return LayerKind::full;
  }
  switch (family) {
    case HfFamily::gemma2:
    case HfFamily::gpt_oss:
      // Gemma2Config, GptOssConfig: sliding unless (i + 1) % 2 == 0, i.e. even layers slide.
      return (layer + 1) % 2 != 0 ? LayerKind::sliding : LayerKind::full;
    case HfFamily::gemma3: {
      // transformers: layer i is sliding unless (i + 1) % pattern == 0.
      refuse_null(reader, config, "_sliding_window_pattern", "an integer");
      refuse_null(reader, config, "sliding_window_pattern", "an integer");
      std::optional<std::int64_t> pattern = reader.integer("_sliding_window_pattern");
      if (!pattern) pattern = reader.integer("sliding_window_pattern");
      if (pattern.value_or(6) < 1) {
        reader.reject("sliding_window_pattern", std::to_string(*pattern), "must be >= 1", "sliding_window_pattern = 6");
        return LayerKind::full;
      }
      return (layer + 1) % pattern.value_or(6) == 0 ? LayerKind::full : LayerKind::sliding;
    }
    case HfFamily::qwen2:
    case HfFamily::qwen3:
    case HfFamily::smollm3:
      // transformers: a window only with use_sliding_window, and (Qwen) only from max_window_layers on.
      if (!reader.boolean("use_sliding_window").value_or(false) || reader.find("sliding_window") == nullptr) {
        return LayerKind::full;
      }
      refuse_null(reader, config, "max_window_layers", "an integer");
      return layer >= reader.integer("max_window_layers").value_or(0) ? LayerKind::sliding : LayerKind::full;
    case HfFamily::mistral:
    case HfFamily::phi3:
      // Phi3Attention passes config.sliding_window to every layer.
      return reader.find("sliding_window") != nullptr ? LayerKind::sliding : LayerKind::full;
    case HfFamily::llama:
    case HfFamily::gemma:
    case HfFamily::deepseek_v2:
    case HfFamily::deepseek_v3:
    case HfFamily::gpt_neox:
    case HfFamily::olmo2:
    case HfFamily::granite:
    case HfFamily::gptj:
      return LayerKind::full;  // these architectures ignore a sliding_window key
  }
  return LayerKind::full;
}

// SmolLM3: whether `layer` rotates at all (no_rope_layers[i] = 1 rotates, 0 does not; absent: every
// no_rope_layer_interval-th layer does not).
bool layer_has_rope(ConfigReader& reader, const nlohmann::json& config, HfFamily family, std::int64_t layer) {
  if (family != HfFamily::smollm3) return true;
  if (const nlohmann::json* flags = reader.find("no_rope_layers")) {
    if (!flags->is_array() || layer >= static_cast<std::int64_t>(flags->size()) ||
        !((*flags)[static_cast<std::size_t>(layer)].is_number_integer())) {
      reader.reject("no_rope_layers", ConfigReader::describe(*flags),
                    fmt::format("must be a list of 0/1 integers with an entry for layer {}", layer),
                    "list 1 (RoPE) or 0 (no RoPE) per layer");
      return true;
    }
    const std::int64_t flag = (*flags)[static_cast<std::size_t>(layer)].get<std::int64_t>();
    if (flag != 0 && flag != 1) {
      reader.reject(fmt::format("no_rope_layers[{}]", layer), std::to_string(flag), "must be 0 (no RoPE) or 1 (RoPE)",
                    "0 or 1");
    }
    return flag != 0;
  }
  refuse_null(reader, config, "no_rope_layer_interval", "an integer");
  const std::int64_t interval = reader.integer("no_rope_layer_interval").value_or(4);
  if (interval < 1) {
    reader.reject("no_rope_layer_interval", std::to_string(interval), "must be >= 1", "4 (SmolLM3)");
    return true;
  }
  return (layer + 1) % interval != 0;
}

struct RopeSettings {
  double theta = 10000.0;
  std::optional<double> partial_rotary_factor;  // stated inside the RoPE object (transformers v5)
  RopeScaling scaling;
};

// The keys a RoPE object (rope_scaling; rope_parameters in transformers v5) may hold. Those after the
// first four are scaling parameters: a type must say which scaling they belong to.
const std::vector<std::string>& rope_object_keys() {
  static const std::vector<std::string> keys = {"rope_type",        "type",
                                                "rope_theta",       "partial_rotary_factor",
                                                "factor",           "low_freq_factor",
                                                "high_freq_factor", "original_max_position_embeddings",
                                                "beta_fast",        "beta_slow",
                                                "mscale",           "mscale_all_dim",
                                                "truncate",         "attention_factor",
                                                "short_factor",     "long_factor"};
  return keys;
}

bool is_scaling_parameter(const std::string& name) {
  const auto& keys = rope_object_keys();
  const auto found = std::find(keys.begin(), keys.end(), name);
  return found != keys.end() && found - keys.begin() >= 4;
}

std::string_view expected_form(const std::string& name) {
  if (name == "truncate") return "true or false";
  if (name == "short_factor" || name == "long_factor") return "a list of numbers";
  if (name == "original_max_position_embeddings") return "an integer";
  return "a number";
}

// The type a RoPE object states, and under which key (rope_type, or the legacy "type"); nullopt when it
// states neither. A type that is null, not a string, or stated twice differently is refused here; `ok`
// turns false then.
struct StatedType {
  std::string name;
  std::string key;
};
std::optional<StatedType> stated_rope_type(ConfigReader& nested, const nlohmann::json& object, bool& ok) {
  std::optional<StatedType> stated;
  for (const char* key : {"rope_type", "type"}) {
    const auto value = object.find(key);
    if (value == object.end()) continue;
    if (value->is_null()) {
      ok = false;  // refused with the other keys
      continue;
    }
    if (!value->is_string()) {
      nested.reject(key, ConfigReader::describe(*value), "must be a string naming the RoPE type",
                    "one of default, linear, llama3, yarn, longrope");
      ok = false;
      continue;
    }
    const std::string name = value->get<std::string>();
    if (!stated) {
      stated = StatedType{name, key};
    } else if (stated->name != name) {
      // transformers reads rope_type and ignores "type" (standardize_rope_params' setdefault).
      nested.reject(key, ConfigReader::describe(*value),
                    fmt::format("disagrees with rope_type \"{}\", which transformers reads in its place", stated->name),
                    "state the type once, as rope_type");
      ok = false;
    }
  }
  return stated;
}

// Reads one RoPE object (rope_scaling, rope_parameters or one layer kind's entry of it; `key` names it in
// messages) as transformers' compute functions read it. Types not modelled (dynamic NTK and any other)
// are refused by name, as are unknown keys and nulls.
//
// transformers 5.24.0 (modeling_rope_utils.py), read and tried: an object without rope_type and type is
// "default" (standardize_rope_params), and validate_rope only logs "Unrecognized keys" for a factor
// beside it, so Llama 3.1's llama3 x8 would run as plain RoPE. attncheck refuses a missing or "default"
// type when the object states scaling parameters; {} or an object of only rope_theta and
// partial_rotary_factor is plain RoPE, as there. A null or non-string type loads, then fails building
// the model (ROPE_INIT_FUNCTIONS[None]): refused. Nulls among the parameters mean different things per
// key (truncate: null is false, factor: null is max_position_embeddings / original or a TypeError):
// refused, never read as the default.
RopeSettings read_rope_object(ConfigReader& reader, const nlohmann::json& object, const std::string& key,
                              HfFamily family) {
  RopeSettings rope;
  if (!object.is_object()) {
    reader.reject(key, ConfigReader::describe(object), "must be an object of RoPE settings",
                  "e.g. {\"rope_type\": \"llama3\", \"factor\": 8, ...}");
    return rope;
  }
  ConfigReader nested = reader.child(object, key);
  std::vector<std::string> scaling_parameters;  // the ones stated, for messages
  for (const auto& [name, value] : object.items()) {
    const auto& keys = rope_object_keys();
    if (std::find(keys.begin(), keys.end(), name) == keys.end()) {
      nested.reject(name, ConfigReader::describe(value), "is not a RoPE parameter attncheck knows",
                    "remove it, or describe the layer with flags");
      continue;
    }
    if (value.is_null() && (name == "rope_type" || name == "type")) {
      nested.reject(name, "null",
                    "must be a string naming the RoPE type: transformers loads a null type and fails building the "
                    "model",
                    "one of default, linear, llama3, yarn, longrope");
    } else {
      refuse_null(nested, object, name, expected_form(name));
    }
    if (is_scaling_parameter(name)) scaling_parameters.push_back(name);
  }
  // Read whatever the type, so that a malformed base is refused even where no scaling applies.
  const std::optional<double> theta = nested.number("rope_theta");
  rope.partial_rotary_factor = nested.number("partial_rotary_factor");
  if (theta) rope.theta = *theta;

  bool type_ok = true;
  const std::optional<StatedType> stated = stated_rope_type(nested, object, type_ok);
  if (!type_ok) return rope;
  if (!stated || stated->name == "default") {
    if (!scaling_parameters.empty()) {
      const std::string parameters = fmt::format("{}", fmt::join(scaling_parameters, ", "));
      if (!stated) {
        nested.reject("rope_type", "absent",
                      fmt::format("is required, as the object states scaling parameters ({}): without a type "
                                  "transformers runs plain RoPE and ignores them",
                                  parameters),
                      "add \"rope_type\": one of linear, llama3, yarn, longrope; or remove the parameters for "
                      "plain RoPE");
      } else {
        nested.reject(stated->key, "\"default\"",
                      fmt::format("names plain RoPE, yet the object states scaling parameters ({}), which "
                                  "transformers then ignores",
                                  parameters),
                      "name the scaling they belong to (linear, llama3, yarn, longrope), or remove them");
      }
    }
    return rope;
  }
  std::string type = stated->name;
  if (family == HfFamily::phi3 && (type == "su" || type == "yarn")) type = "longrope";  // Phi3Config's renaming
  const std::optional<RopeScalingType> parsed = parse_rope_scaling_type(type);
  if (!parsed || *parsed == RopeScalingType::none) {
    const bool dynamic = type.find("dynamic") != std::string::npos;
    nested.reject(stated->key, "\"" + stated->name + "\"",
                  dynamic ? "dynamic NTK scaling (frequencies recomputed from the longest sequence seen so far) is "
                            "not modelled by attncheck"
                          : "is not a RoPE scaling attncheck models",
                  "one of default, linear, llama3, yarn, longrope");
    return rope;
  }
  RopeScaling& scaling = rope.scaling;
  scaling.type = *parsed;
  scaling.factor = nested.number("factor");
  scaling.low_freq_factor = nested.number("low_freq_factor");
  scaling.high_freq_factor = nested.number("high_freq_factor");
  scaling.original_max_position_embeddings = nested.integer("original_max_position_embeddings");
  scaling.beta_fast = nested.number("beta_fast");
  scaling.beta_slow = nested.number("beta_slow");
  scaling.mscale = nested.number("mscale");
  scaling.mscale_all_dim = nested.number("mscale_all_dim");
  scaling.truncate = nested.boolean("truncate").value_or(true);  // absent: true, as transformers (null refused above)
  scaling.attention_factor = nested.number("attention_factor");
  for (const auto& [name, target] :
       {std::pair{"short_factor", &scaling.short_factor}, std::pair{"long_factor", &scaling.long_factor}}) {
    const nlohmann::json* values = nested.find(name);
    if (values == nullptr) continue;
    if (!values->is_array() ||
        !std::all_of(values->begin(), values->end(), [](const auto& v) { return v.is_number(); })) {
      nested.reject(name, ConfigReader::describe(*values), "must be a list of numbers, one per rotated channel pair",
                    "e.g. [1.0, 1.0, ...]");
      continue;
    }
    for (const auto& value : *values) target->push_back(value.get<double>());
  }
  // Latent attention (DeepSeek-V2/V3, Kimi K2): transformers scales the softmax by mscale(factor,
  // mscale_all_dim)^2 for every RoPE scaling but default (yarn_apply_mscale, 5.24.0), not for yarn alone;
  // attncheck models that factor with yarn, so any other scaling stating a non-zero mscale_all_dim is refused
  // by name rather than given a softmax scale 1.8x too small.
  const bool latent_family = family == HfFamily::deepseek_v2 || family == HfFamily::deepseek_v3;
  if (latent_family && scaling.type != RopeScalingType::yarn && scaling.mscale_all_dim.value_or(0.0) != 0.0) {
    nested.reject("mscale_all_dim", fmt::format("{}", *scaling.mscale_all_dim),
                  fmt::format("with {} RoPE scaling, transformers multiplies latent attention's softmax scale by "
                              "mscale(factor, mscale_all_dim)^2, which attncheck models only with yarn",
                              stated->name),
                  "yarn scaling (DeepSeek-V3's and Kimi K2's), or no mscale_all_dim");
  }
  // Fields a type does not read are dropped here, as transformers drops them (a llama3 object may
  // carry e.g. no beta_fast, but a linear one stating original_max_position_embeddings is harmless).
  if (scaling.type != RopeScalingType::llama3) scaling.low_freq_factor = scaling.high_freq_factor = std::nullopt;
  if (scaling.type == RopeScalingType::linear) scaling.original_max_position_embeddings = std::nullopt;
  if (scaling.type != RopeScalingType::yarn) {
    scaling.beta_fast = scaling.beta_slow = scaling.mscale = scaling.mscale_all_dim = std::nullopt;
    scaling.truncate = true;
  }
  if (scaling.type != RopeScalingType::yarn && scaling.type != RopeScalingType::longrope) {
    scaling.attention_factor = std::nullopt;
  }
  if (scaling.type != RopeScalingType::longrope) scaling.short_factor.clear(), scaling.long_factor.clear();
  return rope;
}

// A file stating both rope_scaling and rope_parameters (`key`: the object this layer reads). transformers
// 5.24.0 reads rope_scaling in their place (convert_rope_params_to_dict: `rope_scaling or
// rope_parameters`), as 4.x did, and drops rope_parameters' own keys, its rope_theta included. attncheck
// reads rope_scaling too, and refuses every key on which the two differ: stated in both with different
// values, or stated only in rope_parameters (transformers would drop it). rope_theta and
// partial_rotary_factor stated only in rope_parameters pass when the top level states them too, since
// transformers takes them from there (and the top-level rules hold them equal).
void require_same_rope_objects(ConfigReader& reader, const nlohmann::json& config, const nlohmann::json& parameters,
                               const std::string& key, const nlohmann::json& scaling) {
  if (!parameters.is_object() || !scaling.is_object()) return;  // refused where each is read
  const auto type_key = [](const nlohmann::json& object) -> std::optional<std::string> {
    for (const char* name : {"rope_type", "type"}) {
      if (object.contains(name)) return name;
    }
    return std::nullopt;
  };
  const std::optional<std::string> parameters_type = type_key(parameters), scaling_type = type_key(scaling);
  const auto disagree = [&](const std::string& scaling_name, const std::string& parameters_name) {
    reader.reject("rope_scaling." + scaling_name, ConfigReader::describe(scaling[scaling_name]),
                  fmt::format("disagrees with {}.{} = {}", key, parameters_name,
                              ConfigReader::describe(parameters[parameters_name])),
                  fmt::format("state the RoPE settings once (rope_scaling or {}), or the same in both places", key));
  };
  const auto dropped = [&](const std::string& name) {
    reader.reject(fmt::format("{}.{}", key, name), ConfigReader::describe(parameters[name]),
                  "is not in rope_scaling, which transformers reads in place of rope_parameters when a file has "
                  "both: it would be dropped",
                  fmt::format("state it in rope_scaling too, or keep only one of rope_scaling and {}", key));
  };
  if (parameters_type && scaling_type && parameters[*parameters_type] != scaling[*scaling_type]) {
    disagree(*scaling_type, *parameters_type);
  }
  if (parameters_type && !scaling_type) dropped(*parameters_type);
  for (const auto& [name, value] : scaling.items()) {
    if (name == "rope_type" || name == "type") continue;
    if (parameters.contains(name) && parameters[name] != value) disagree(name, name);
  }
  for (const auto& [name, value] : parameters.items()) {
    if (name == "rope_type" || name == "type" || scaling.contains(name)) continue;
    const auto top = config.find(name);
    const bool stated_at_top = top != config.end() && !top->is_null();
    if ((name == "rope_theta" || name == "partial_rotary_factor") && stated_at_top) continue;
    dropped(name);
  }
}

// What transformers' standardize_rope_params and the compute functions fill in from the rest of the
// config: original_max_position_embeddings (a top-level key wins, as Phi-3 saves it there; else the
// object's own; else max_position_embeddings) and, for yarn and longrope without a factor,
// max_position_embeddings / original_max_position_embeddings.
void complete_rope_scaling(ConfigReader& reader, const nlohmann::json& config, RopeScaling& scaling,
                           ImportedConfig& imported) {
  if (scaling.type != RopeScalingType::llama3 && scaling.type != RopeScalingType::yarn &&
      scaling.type != RopeScalingType::longrope) {
    return;
  }
  // transformers 5.24.0 sets a null top-level original_max_position_embeddings into the object and fails
  // computing the frequencies; its strict config refuses a null max_position_embeddings.
  refuse_null(reader, config, "original_max_position_embeddings", "an integer");
  refuse_null(reader, config, "max_position_embeddings", "an integer");
  const std::optional<std::int64_t> max_positions = reader.integer("max_position_embeddings");
  if (const std::optional<std::int64_t> top = reader.integer("original_max_position_embeddings")) {
    // transformers reads the top-level value and drops the object's: two different values are two
    // meanings, one of which would vanish without a word (a Phi-3 config has a top-level one even when
    // the file omits it: Phi3Config's default, 4096).
    if (scaling.original_max_position_embeddings && *scaling.original_max_position_embeddings != *top) {
      reader.reject("original_max_position_embeddings", std::to_string(*top),
                    fmt::format("differs from the RoPE object's original_max_position_embeddings {}: transformers "
                                "uses this top-level value (stated, or the family's default) and drops the "
                                "object's",
                                *scaling.original_max_position_embeddings),
                    "state one value: the same in both places, or only at the top level");
    }
    scaling.original_max_position_embeddings = top;
  } else if (!scaling.original_max_position_embeddings) {
    scaling.original_max_position_embeddings = max_positions;
  }
  if (!scaling.factor && scaling.type != RopeScalingType::llama3 && max_positions &&
      scaling.original_max_position_embeddings && *scaling.original_max_position_embeddings > 0) {
    scaling.factor =
        static_cast<double>(*max_positions) / static_cast<double>(*scaling.original_max_position_embeddings);
    imported.notes.push_back(
        fmt::format("RoPE {} factor {} = max_position_embeddings / original_max_position_embeddings",
                    to_string(scaling.type), format_number(*scaling.factor)));
  }
}

// The RoPE object this layer reads from rope_parameters (transformers v5: {"rope_type", "rope_theta",
// ...}, or one such object per layer kind) and its name; nullptr when the file has none. Anything else
// is refused, never read as "no RoPE settings" (a base of 10000 where the file says 1e6).
const nlohmann::json* chosen_rope_parameters(ConfigReader& reader, LayerKind kind, std::string& key) {
  const nlohmann::json* parameters = reader.find("rope_parameters");
  key = "rope_parameters";
  if (parameters == nullptr) return nullptr;
  const std::string kind_name(to_string(kind));
  if (parameters->is_object() && parameters->contains(kind_name)) {
    key = "rope_parameters." + kind_name;
    return &(*parameters)[kind_name];
  }
  const std::string other_kind(to_string(kind == LayerKind::full ? LayerKind::sliding : LayerKind::full));
  if (parameters->is_object() && parameters->contains(other_kind)) {
    reader.reject("rope_parameters." + kind_name, "absent",
                  fmt::format("is required: rope_parameters is given per layer kind, and this layer is {}", kind_name),
                  fmt::format("add \"{}\": {{\"rope_type\": \"default\", \"rope_theta\": ...}}", kind_name));
    reader.finish();
  }
  if (!parameters->is_object()) {
    reader.reject(key, ConfigReader::describe(*parameters), "must be an object of RoPE settings",
                  "e.g. {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}");
    reader.finish();
  }
  return parameters;
}

// RoPE base, the object's partial_rotary_factor and the scaling for this layer.
RopeSettings rope_for(ConfigReader& reader, const nlohmann::json& config, HfFamily family, LayerKind kind,
                      ImportedConfig& imported) {
  std::string key;
  const nlohmann::json* parameters = chosen_rope_parameters(reader, kind, key);
  const nlohmann::json* legacy = reader.find("rope_scaling");
  // transformers takes rope_scaling only when it is truthy (`rope_scaling or rope_parameters`): {} is none.
  if (legacy != nullptr && legacy->is_object() && legacy->empty()) legacy = nullptr;
  if (parameters == nullptr && family == HfFamily::gemma3 && kind == LayerKind::sliding) {
    // Gemma 3's sliding layers use plain RoPE on their own base; rope_scaling is for its full layers.
    refuse_null(reader, config, "rope_local_base_freq", "a number");
    RopeSettings rope;
    rope.theta = reader.number("rope_local_base_freq").value_or(10000.0);
    imported.notes.push_back("RoPE base from rope_local_base_freq, unscaled (Gemma 3 sliding layers)");
    return rope;
  }
  RopeSettings rope;
  std::optional<double> theta;  // stated in a RoPE object
  std::string theta_key;        // which one, for messages
  if (parameters != nullptr) {
    rope = read_rope_object(reader, *parameters, key, family);
    if (parameters->contains("rope_theta")) theta = rope.theta, theta_key = key;
  }
  if (legacy != nullptr) {
    const RopeSettings from_legacy = read_rope_object(reader, *legacy, "rope_scaling", family);
    if (parameters != nullptr) require_same_rope_objects(reader, config, *parameters, key, *legacy);
    // transformers reads rope_scaling; what rope_parameters adds was refused just above, or is its base
    // and rotary fraction, which the top level states too.
    rope.scaling = from_legacy.scaling;
    if (from_legacy.partial_rotary_factor) rope.partial_rotary_factor = from_legacy.partial_rotary_factor;
    if (legacy->is_object() && legacy->contains("rope_theta")) theta = from_legacy.theta, theta_key = "rope_scaling";
  }
  // The top-level base (GPT-NeoX's rotary_emb_base in v4 files without rope_theta): used when no object
  // states one, refused when the two disagree.
  const std::string outer_key =
      parameters == nullptr && family == HfFamily::gpt_neox && reader.find("rope_theta") == nullptr ? "rotary_emb_base"
                                                                                                    : "rope_theta";
  refuse_null(reader, config, outer_key, "a number (the RoPE base)");
  const std::optional<double> outer_theta = reader.number(outer_key);
  if (!theta) {
    theta = outer_theta;
  } else if (outer_theta && *outer_theta != *theta) {
    reader.reject(outer_key, format_number(*outer_theta),
                  fmt::format("disagrees with {}.rope_theta = {}", theta_key, format_number(*theta)),
                  "state the RoPE base once, or the same in both places");
  }
  complete_rope_scaling(reader, config, rope.scaling, imported);
  rope.theta = theta.value_or(10000.0);
  return rope;
}

// DeepSeek-V2/V3 and Kimi K2: the latent widths (core/model/latent_attention.hpp), read as transformers'
// DeepseekV3Attention reads them. The config's head_dim is not a head width there (the config classes set it to
// qk_rope_head_dim, RoPE's width), so it is dropped; no rotary fraction applies.
void read_latent_attention(ConfigReader& reader, const nlohmann::json& config, HfFamily family,
                           ImportedConfig& imported) {
  GeometrySpec& spec = imported.spec;
  LatentAttentionSpec latent;
  // A null q_lora_rank is None: q_proj straight from the hidden state (DeepSeek-V2-Lite). Absent keys hold
  // the config class's defaults by now (apply_defaults).
  latent.q_lora_rank = reader.integer("q_lora_rank");
  const auto width = [&](const char* key) {
    refuse_null(reader, config, key, "an integer");
    return reader.required_integer(key, fmt::format("add \"{}\", e.g. as DeepSeek-V3's config states it", key))
        .value_or(0);
  };
  latent.kv_lora_rank = width("kv_lora_rank");
  latent.qk_nope_head_dim = width("qk_nope_head_dim");
  latent.qk_rope_head_dim = width("qk_rope_head_dim");
  latent.v_head_dim = width("v_head_dim");
  // transformers builds q_a_layernorm and kv_a_layernorm without an eps (its RMSNorm default, 1e-6) whatever
  // rms_norm_eps says; vLLM and SGLang pass rms_norm_eps. Every DeepSeek-V2/V3 and Kimi K2 config states 1e-6,
  // where they agree; a file stating another value is read as transformers reads it, and the note says so.
  latent.latent_norm_eps = 1e-6;
  if (const std::optional<double> eps = reader.number("rms_norm_eps"); eps && *eps != 1e-6) {
    imported.notes.push_back(fmt::format(
        "latent norms' eps 1e-06 as transformers builds them; rms_norm_eps {} (what vLLM and SGLang use for them) "
        "is not read",
        format_number(*eps)));
  }
  if (spec.head_dim) {
    imported.notes.push_back(fmt::format(
        "head_dim {} not read: in DeepSeek's configs it is RoPE's width (qk_rope_head_dim), not a head width",
        *spec.head_dim));
    spec.head_dim = std::nullopt;
  }
  if (spec.rotary_pct) {
    reader.reject("partial_rotary_factor", format_number(*spec.rotary_pct),
                  "is not read by latent attention, whose RoPE covers qk_rope_head_dim channels of each head",
                  "remove it");
  }
  spec.rotary_pct = std::nullopt;
  // transformers reads a null rope_interleave as false (rotate_half), not as the default true.
  refuse_null(reader, config, "rope_interleave", "true or false");
  if (family == HfFamily::deepseek_v3 && !reader.boolean("rope_interleave").value_or(true)) {
    spec.rope_style = RopeStyle::half_split;  // rope_interleave false: rotate_half on the RoPE part
  }
  spec.latent = latent;
}

// Fills transformers' defaults for keys the file omits and notes which.
void apply_defaults(nlohmann::json& config, const HfArchitecture& architecture, ImportedConfig& imported) {
  // transformers v5 keeps the RoPE base inside rope_parameters, and a rope_scaling may state it too: a
  // default beside either would read as a second, disagreeing statement of the base.
  const auto rope_scaling = config.find("rope_scaling");
  const bool object_states_base =
      config.contains("rope_parameters") ||
      (rope_scaling != config.end() && rope_scaling->is_object() && rope_scaling->contains("rope_theta"));
  std::vector<std::string> filled;
  for (const auto& [key, value] : architecture.defaults().items()) {
    if (config.contains(key)) continue;
    if ((key == "rope_theta" || key == "rotary_emb_base") && object_states_base) continue;
    config[key] = value;
    filled.push_back(fmt::format("{} {}", key, value.dump()));
  }
  if (!filled.empty()) {
    imported.notes.push_back(fmt::format("{} defaults for omitted keys (as transformers applies them): {}",
                                         architecture.name, fmt::join(filled, ", ")));
  }
}

}  // namespace

ImportedConfig import_hf_config_text(const std::string& text, const std::string& source,
                                     const HfImportOptions& options) {
  const nlohmann::json root = parse_json(text, source);
  if (!root.is_object()) {
    throw InputError(
        source, {{"config", ConfigReader::describe(root), "must be a JSON object", "pass a Hugging Face config.json"}});
  }
  ImportedConfig imported;
  imported.source = source;
  // Multimodal wrappers keep the language model's keys in text_config; read those instead.
  const auto text_config = root.find("text_config");
  const bool nested = text_config != root.end() && text_config->is_object();
  nlohmann::json config = nested ? *text_config : root;
  ConfigReader root_reader(root, source);
  ConfigReader reader = root_reader.child(config, nested ? "text_config" : "");
  if (const nlohmann::json* value = root_reader.find("text_config"); value != nullptr && !nested) {
    root_reader.reject("text_config", ConfigReader::describe(*value), "must be an object when present",
                       "remove it or give the language model's keys in it");
  }
  if (nested) imported.notes.push_back("read text_config (the language model of a multimodal config)");

  const std::string model_type = reader.text("model_type").value_or(root_reader.text("model_type").value_or(""));
  imported.model_type = model_type.empty() ? "absent" : model_type;
  if (const std::string_view refusal = refused_architecture(model_type); !refusal.empty()) {
    reader.reject("model_type", "\"" + model_type + "\"", std::string(refusal),
                  "describe a standard attention layer with --hidden/--heads/--kv-heads/--head-dim flags");
    reader.finish();
  }
  const std::optional<HfArchitecture> architecture = hf_architecture(model_type);
  if (!architecture) {
    reader.reject("model_type", model_type.empty() ? "absent" : "\"" + model_type + "\"",
                  "must name an architecture attncheck models (its defaults, QK-norm and layer kinds differ): " +
                      supported_model_types(),
                  "describe other models with --hidden/--heads/--kv-heads/--head-dim flags");
    reader.finish();
  }
  const HfFamily family = architecture->family;
  if (family == HfFamily::gptj) {
    // GPTJConfig's attribute_map: n_embd, n_head, n_layer, n_positions are the usual keys by other names.
    std::vector<std::string> renamed;
    for (const auto& [from, to] :
         {std::pair{"n_embd", "hidden_size"}, std::pair{"n_head", "num_attention_heads"},
          std::pair{"n_layer", "num_hidden_layers"}, std::pair{"n_positions", "max_position_embeddings"}}) {
      if (config.contains(from) && !config.contains(to)) {
        config[to] = config[from];
        renamed.push_back(fmt::format("{} as {}", from, to));
      }
    }
    if (!renamed.empty()) imported.notes.push_back(fmt::format("GPT-J keys read: {}", fmt::join(renamed, ", ")));
  }
  apply_defaults(config, *architecture, imported);

  GeometrySpec& spec = imported.spec;
  spec.hidden_size =
      reader.required_integer("hidden_size", "add \"hidden_size\", the residual width, e.g. 1024").value_or(0);
  spec.num_heads =
      reader.required_integer("num_attention_heads", "add \"num_attention_heads\", the number of query heads, e.g. 16")
          .value_or(0);
  spec.num_kv_heads = reader.integer("num_key_value_heads");
  spec.head_dim = reader.integer("head_dim");

  refuse_null(reader, config, "num_hidden_layers", "an integer");
  const std::int64_t layers = reader.integer("num_hidden_layers").value_or(INT64_MAX);
  if (layers < 1) {
    reader.violations().add("num_hidden_layers", std::to_string(layers), "must be at least 1 (a model has layers)",
                            "the model's layer count, e.g. 28");
    reader.finish();
  }
  if (options.layer < 0 || options.layer >= layers) {
    reader.violations().add("layer", std::to_string(options.layer),
                            fmt::format("must be a layer index in [0, {})", layers), "nearby valid: layer = 0");
    reader.finish();
  }
  const LayerKind kind = layer_kind(reader, config, family, options.layer);
  const bool has_rope = layer_has_rope(reader, config, family, options.layer);
  imported.layer_kind =
      fmt::format("layer {}{}: {}{}", options.layer, layers == INT64_MAX ? "" : fmt::format(" of {}", layers),
                  to_string(kind), has_rope ? "" : ", no RoPE (no_rope_layers)");
  if (kind == LayerKind::sliding) {
    spec.sliding_window = reader.integer("sliding_window");
    if (!spec.sliding_window) {
      reader.reject("sliding_window", "absent", "is required for a sliding_attention layer",
                    "add \"sliding_window\", e.g. 4096");
    }
  }

  const RopeSettings rope = rope_for(reader, config, family, kind, imported);
  spec.rope_theta = rope.theta;
  spec.rope_scaling = rope.scaling;
  std::optional<double> partial = rope.partial_rotary_factor;
  for (const char* key : {"partial_rotary_factor", "rotary_pct"}) {
    const std::optional<double> stated = reader.number(key);
    if (stated && partial && *stated != *partial) {
      reader.reject(key, format_number(*stated),
                    fmt::format("must agree with the other rotary fraction given ({})", format_number(*partial)),
                    "state the rotary fraction once");
    }
    if (!partial) partial = stated;
  }
  if (!partial && family == HfFamily::gpt_neox) {
    partial = 0.25;  // GPTNeoXConfig's rotary_pct default
    imported.notes.push_back("GPT-NeoX default rotary_pct 0.25 (the file states no rotary fraction)");
  }
  spec.rotary_pct = partial;
  if (family == HfFamily::gptj) {
    // GPTJAttention: rotary_dim channels rotate (null: the whole head).
    spec.rotary_dim = reader.integer("rotary_dim");
    if (spec.rotary_dim) spec.rotary_pct = std::nullopt;
  }
  if (!has_rope) {
    // A NoPE layer rotates nothing; its config's RoPE settings apply to the other layers.
    spec.rotary_dim = 0;
    spec.rotary_pct = std::nullopt;
    spec.rope_scaling = {};
  }

  spec.qk_norm = architecture->qk_norm;
  if (spec.qk_norm != QkNorm::none) {
    refuse_null(reader, config, "rms_norm_eps", "a number (the QK-norm epsilon)");
    spec.qk_norm_eps = reader.number("rms_norm_eps").value_or(1e-6);
  }
  switch (architecture->bias_rule) {
    case HfBiasRule::qwen2:
      spec.qkv_bias = true;  // hard-coded in transformers' Qwen2Attention; o_proj has none
      spec.out_bias = false;
      break;
    case HfBiasRule::none:
      spec.qkv_bias = spec.out_bias = false;  // hard-coded bias=False (Phi-3's qkv_proj, GPT-J)
      break;
    case HfBiasRule::attention_bias: {
      const bool bias = reader.boolean("attention_bias").value_or(false);
      spec.qkv_bias = bias;
      spec.out_bias = bias;
      break;
    }
  }
  // The score scale: Gemma's query_pre_attn_scalar, Granite's attention_multiplier, else head_dim^-0.5.
  if (family == HfFamily::gemma2 || family == HfFamily::gemma3) {
    refuse_null(reader, config, "query_pre_attn_scalar", "a number");
  }
  spec.query_pre_attn_scalar = reader.number("query_pre_attn_scalar");
  if (family == HfFamily::granite) {
    refuse_null(reader, config, "attention_multiplier", "a number (the score scale)");
    spec.attention_multiplier = reader.number("attention_multiplier");
  }
  spec.softcap = reader.number("attn_logit_softcapping");
  spec.rope_style = architecture->rope_style;
  if (family == HfFamily::deepseek_v2 || family == HfFamily::deepseek_v3) read_latent_attention(reader, config, family, imported);
  spec.causal = true;
  spec.attention_sinks = architecture->attention_sinks;
  if (!architecture->not_modelled.empty()) imported.not_modelled.emplace_back(architecture->not_modelled);
  reader.finish();
  return imported;
}

ImportedConfig import_hf_config_file(const std::string& path, const HfImportOptions& options) {
  return import_hf_config_text(read_text_file(path, "--hf-config"), "hf config '" + path + "'", options);
}

}  // namespace attncheck
