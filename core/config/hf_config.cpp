#include "core/config/hf_config.hpp"

#include <fmt/format.h>

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

// Which kind of attention layer `layer` is, from layer_types, Gemma 3's pattern, Qwen2/3's
// use_sliding_window / max_window_layers, or a model-wide sliding_window (Mistral).
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
      // transformers: a window only with use_sliding_window, and only from max_window_layers on.
      if (!reader.boolean("use_sliding_window").value_or(false) || reader.find("sliding_window") == nullptr) {
        return LayerKind::full;
      }
      return layer >= reader.integer("max_window_layers").value_or(0) ? LayerKind::sliding : LayerKind::full;
    case HfFamily::mistral:
      return reader.find("sliding_window") != nullptr ? LayerKind::sliding : LayerKind::full;
    case HfFamily::llama:
    case HfFamily::gemma:
    case HfFamily::gpt_neox:
      return LayerKind::full;  // these architectures ignore a sliding_window key
  }
  return LayerKind::full;
}

struct RopeSettings {
  double theta = 10000.0;
  std::optional<double> partial_rotary_factor;  // stated inside rope_parameters (transformers v5)
};

// RoPE base (and v5's partial_rotary_factor) for this layer; rejects RoPE scaling, which attncheck
// does not model.
RopeSettings rope_for(ConfigReader& reader, HfFamily family, LayerKind kind, ImportedConfig& imported) {
  const bool gemma_local = family == HfFamily::gemma3 && kind == LayerKind::sliding;
  RopeSettings rope;
  std::optional<double> theta;
  std::string scaling_key = "rope_scaling";
  const nlohmann::json* scaling = nullptr;
  if (const nlohmann::json* parameters = reader.find("rope_parameters")) {
    // transformers v5: {"rope_type", "rope_theta", ...}, or one such object per layer kind.
    const nlohmann::json* chosen = parameters;
    scaling_key = "rope_parameters";
    if (parameters->is_object() && parameters->contains(to_string(kind))) {
      chosen = &(*parameters)[std::string(to_string(kind))];
      scaling_key = fmt::format("rope_parameters.{}", to_string(kind));
    }
    ConfigReader nested = reader.child(*chosen, scaling_key);
    theta = nested.number("rope_theta");
    rope.partial_rotary_factor = nested.number("partial_rotary_factor");
    if (nested.text("rope_type").value_or("default") != "default") scaling = chosen;
  } else if (gemma_local) {
    theta = reader.number("rope_local_base_freq");
    imported.notes.push_back("RoPE base from rope_local_base_freq (Gemma 3 sliding layers)");
  } else {
    theta = reader.number(family == HfFamily::gpt_neox && reader.find("rope_theta") == nullptr ? "rotary_emb_base"
                                                                                               : "rope_theta");
    scaling = reader.find("rope_scaling");
  }
  // Gemma 3's sliding layers use plain RoPE; rope_scaling applies to its full layers only.
  if (scaling != nullptr && !gemma_local) {
    const nlohmann::json* type = nullptr;
    if (scaling->is_object()) {
      if (scaling->contains("rope_type"))
        type = &(*scaling)["rope_type"];
      else if (scaling->contains("type"))
        type = &(*scaling)["type"];
    }
    if (type == nullptr || *type != "default") {
      reader.reject(scaling_key, ConfigReader::describe(*scaling),
                    "RoPE scaling other than the default is not modelled by attncheck",
                    "remove the scaling, or import a layer that does not use it (Gemma 3 sliding layers)");
    }
  }
  rope.theta = theta.value_or(10000.0);
  return rope;
}

// Fills transformers' defaults for keys the file omits and notes which.
void apply_defaults(nlohmann::json& config, const HfArchitecture& architecture, ImportedConfig& imported) {
  std::vector<std::string> filled;
  for (const auto& [key, value] : architecture.defaults().items()) {
    if (config.contains(key)) continue;
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
  const std::optional<HfArchitecture> architecture = hf_architecture(model_type);
  if (!architecture) {
    reader.reject("model_type", model_type.empty() ? "absent" : "\"" + model_type + "\"",
                  "must name an architecture attncheck models (its defaults, QK-norm and layer kinds differ): " +
                      supported_model_types(),
                  "describe other models with --hidden/--heads/--kv-heads/--head-dim flags");
    reader.finish();
  }
  const HfFamily family = architecture->family;
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
  if (options.layer < 0 || options.layer >= layers) {
    reader.violations().add("layer", std::to_string(options.layer),
                            fmt::format("must be a layer index in [0, {})", layers), "nearby valid: layer = 0");
    reader.finish();
  }
  const LayerKind kind = layer_kind(reader, family, options.layer);
  imported.notes.push_back(fmt::format("layer {}: {}", options.layer, to_string(kind)));
  if (kind == LayerKind::sliding) {
    spec.sliding_window = reader.integer("sliding_window");
    if (!spec.sliding_window) {
      reader.reject("sliding_window", "absent", "is required for a sliding_attention layer",
                    "add \"sliding_window\", e.g. 4096");
    }
  }

  const RopeSettings rope = rope_for(reader, family, kind, imported);
  spec.rope_theta = rope.theta;
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

  spec.qk_norm = architecture->qk_norm;
  if (spec.qk_norm != QkNorm::none) spec.qk_norm_eps = reader.number("rms_norm_eps").value_or(1e-6);
  if (family == HfFamily::qwen2) {
    spec.qkv_bias = true;  // hard-coded in transformers' Qwen2Attention; o_proj has none
    spec.out_bias = false;
  } else {
    const bool bias = reader.boolean("attention_bias").value_or(false);
    spec.qkv_bias = bias;
    spec.out_bias = bias;
  }
  spec.query_pre_attn_scalar = reader.number("query_pre_attn_scalar");
  spec.softcap = reader.number("attn_logit_softcapping");
  spec.rope_style = RopeStyle::half_split;  // every architecture above uses rotate_half
  spec.causal = true;
  reader.finish();
  return imported;
}

ImportedConfig import_hf_config_file(const std::string& path, const HfImportOptions& options) {
  return import_hf_config_text(read_text_file(path, "--hf-config"), "hf config '" + path + "'", options);
}

}  // namespace attncheck
