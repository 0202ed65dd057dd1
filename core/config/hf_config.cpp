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

// Which kind of attention layer `layer` is, from layer_types, Gemma 2's and 3's patterns, Qwen2/3's
// use_sliding_window / max_window_layers, or a model-wide sliding_window (Mistral, Phi-3).
LayerKind layer_kind(ConfigReader& reader, HfFamily family, std::int64_t layer) {
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
      return layer >= reader.integer("max_window_layers").value_or(0) ? LayerKind::sliding : LayerKind::full;
    case HfFamily::mistral:
    case HfFamily::phi3:
      // Phi3Attention passes config.sliding_window to every layer.
      return reader.find("sliding_window") != nullptr ? LayerKind::sliding : LayerKind::full;
    case HfFamily::llama:
    case HfFamily::gemma:
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
bool layer_has_rope(ConfigReader& reader, HfFamily family, std::int64_t layer) {
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
  const std::int64_t interval = reader.integer("no_rope_layer_interval").value_or(4);
  if (interval < 1) {
    reader.reject("no_rope_layer_interval", std::to_string(interval), "must be >= 1", "4 (SmolLM3)");
    return true;
  }
  return (layer + 1) % interval != 0;
}

struct RopeSettings {
  double theta = 10000.0;
  std::optional<double> partial_rotary_factor;  // stated inside rope_parameters (transformers v5)
  RopeScaling scaling;
};

// The parameters of a RoPE scaling object (rope_scaling, or rope_parameters in transformers v5) as
// transformers' compute functions read them; `key` names it in messages. Types not modelled (dynamic
// NTK and any other) are refused by name, as is a parameter the type does not have.
RopeScaling read_rope_scaling(ConfigReader& reader, const nlohmann::json& object, const std::string& key,
                              HfFamily family) {
  RopeScaling scaling;
  if (!object.is_object()) {
    reader.reject(key, ConfigReader::describe(object), "must be an object with rope_type and its parameters",
                  "e.g. {\"rope_type\": \"llama3\", \"factor\": 8, ...}");
    return scaling;
  }
  ConfigReader nested = reader.child(object, key);
  std::string type = nested.text("rope_type").value_or(nested.text("type").value_or("default"));
  if (family == HfFamily::phi3 && (type == "su" || type == "yarn")) type = "longrope";  // Phi3Config's renaming
  if (type == "default") return scaling;
  const std::optional<RopeScalingType> parsed = parse_rope_scaling_type(type);
  if (!parsed || *parsed == RopeScalingType::none) {
    const bool dynamic = type.find("dynamic") != std::string::npos;
    nested.reject("rope_type", "\"" + type + "\"",
                  dynamic ? "dynamic NTK scaling (frequencies recomputed from the longest sequence seen so far) is "
                            "not modelled by attncheck"
                          : "is not a RoPE scaling attncheck models",
                  "one of default, linear, llama3, yarn, longrope");
    return scaling;
  }
  scaling.type = *parsed;
  static const std::vector<std::string> kKnown = {"rope_type",        "type",
                                                  "rope_theta",       "partial_rotary_factor",
                                                  "factor",           "low_freq_factor",
                                                  "high_freq_factor", "original_max_position_embeddings",
                                                  "beta_fast",        "beta_slow",
                                                  "mscale",           "mscale_all_dim",
                                                  "truncate",         "attention_factor",
                                                  "short_factor",     "long_factor"};
  for (const auto& [name, value] : object.items()) {
    if (std::find(kKnown.begin(), kKnown.end(), name) == kKnown.end()) {
      nested.reject(name, ConfigReader::describe(value), "is not a RoPE parameter attncheck knows",
                    "remove it, or describe the layer with flags");
    }
  }
  scaling.factor = nested.number("factor");
  scaling.low_freq_factor = nested.number("low_freq_factor");
  scaling.high_freq_factor = nested.number("high_freq_factor");
  scaling.original_max_position_embeddings = nested.integer("original_max_position_embeddings");
  scaling.beta_fast = nested.number("beta_fast");
  scaling.beta_slow = nested.number("beta_slow");
  scaling.mscale = nested.number("mscale");
  scaling.mscale_all_dim = nested.number("mscale_all_dim");
  scaling.truncate = nested.boolean("truncate").value_or(true);
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
  return scaling;
}

// What transformers' standardize_rope_params and the compute functions fill in from the rest of the
// config: original_max_position_embeddings (a top-level key wins, as Phi-3 saves it there; else the
// object's own; else max_position_embeddings) and, for yarn and longrope without a factor,
// max_position_embeddings / original_max_position_embeddings.
void complete_rope_scaling(ConfigReader& reader, RopeScaling& scaling, ImportedConfig& imported) {
  if (scaling.type != RopeScalingType::llama3 && scaling.type != RopeScalingType::yarn &&
      scaling.type != RopeScalingType::longrope) {
    return;
  }
  const std::optional<std::int64_t> max_positions = reader.integer("max_position_embeddings");
  if (const std::optional<std::int64_t> top = reader.integer("original_max_position_embeddings")) {
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

// RoPE base, v5's partial_rotary_factor and the scaling for this layer.
RopeSettings rope_for(ConfigReader& reader, HfFamily family, LayerKind kind, ImportedConfig& imported) {
  const bool gemma_local = family == HfFamily::gemma3 && kind == LayerKind::sliding;
  RopeSettings rope;
  std::optional<double> theta;
  if (const nlohmann::json* parameters = reader.find("rope_parameters")) {
    // transformers v5: {"rope_type", "rope_theta", ...}, or one such object per layer kind. Anything
    // else is refused, never read as "no RoPE settings" (a base of 10000 where the file says 1e6).
    const nlohmann::json* chosen = parameters;
    std::string key = "rope_parameters";
    if (parameters->is_object() && parameters->contains(to_string(kind))) {
      chosen = &(*parameters)[std::string(to_string(kind))];
      key = fmt::format("rope_parameters.{}", to_string(kind));
    }
    if (!chosen->is_object()) {
      reader.reject(key, ConfigReader::describe(*chosen), "must be an object of RoPE settings",
                    "e.g. {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}");
      reader.finish();
    }
    ConfigReader nested = reader.child(*chosen, key);
    theta = nested.number("rope_theta");
    // A file may also state rope_theta beside rope_parameters (v4 style): used when the object omits it,
    // refused when the two disagree.
    const std::optional<double> outer_theta = reader.number("rope_theta");
    if (!theta) {
      theta = outer_theta;
    } else if (outer_theta && *outer_theta != *theta) {
      reader.reject("rope_theta", format_number(*outer_theta),
                    fmt::format("disagrees with {}.rope_theta = {}", key, format_number(*theta)),
                    "state the RoPE base once, or the same in both places");
    }
    rope.partial_rotary_factor = nested.number("partial_rotary_factor");
    rope.scaling = read_rope_scaling(reader, *chosen, key, family);
  } else if (gemma_local) {
    // Gemma 3's sliding layers use plain RoPE on their own base; rope_scaling is for its full layers.
    theta = reader.number("rope_local_base_freq");
    imported.notes.push_back("RoPE base from rope_local_base_freq, unscaled (Gemma 3 sliding layers)");
  } else {
    theta = reader.number(family == HfFamily::gpt_neox && reader.find("rope_theta") == nullptr ? "rotary_emb_base"
                                                                                               : "rope_theta");
    if (const nlohmann::json* scaling = reader.find("rope_scaling")) {
      rope.scaling = read_rope_scaling(reader, *scaling, "rope_scaling", family);
    }
  }
  complete_rope_scaling(reader, rope.scaling, imported);
  rope.theta = theta.value_or(10000.0);
  return rope;
}

// Fills transformers' defaults for keys the file omits and notes which.
void apply_defaults(nlohmann::json& config, const HfArchitecture& architecture, ImportedConfig& imported) {
  std::vector<std::string> filled;
  for (const auto& [key, value] : architecture.defaults().items()) {
    if (config.contains(key)) continue;
    // transformers v5 keeps the RoPE base inside rope_parameters: a default beside it would read as a
    // second, disagreeing statement of the base.
    if (key == "rope_theta" && config.contains("rope_parameters")) continue;
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
  const LayerKind kind = layer_kind(reader, family, options.layer);
  const bool has_rope = layer_has_rope(reader, family, options.layer);
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

  const RopeSettings rope = rope_for(reader, family, kind, imported);
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
  if (spec.qk_norm != QkNorm::none) spec.qk_norm_eps = reader.number("rms_norm_eps").value_or(1e-6);
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
  spec.query_pre_attn_scalar = reader.number("query_pre_attn_scalar");
  if (family == HfFamily::granite) spec.attention_multiplier = reader.number("attention_multiplier");
  spec.softcap = reader.number("attn_logit_softcapping");
  spec.rope_style = architecture->rope_style;
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
