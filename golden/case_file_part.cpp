// Case files, and the case part of golden files (golden_file.hpp, SCHEMA.md "Case files"): root
// attributes, /geometry in either schema version and the TP plan it gives, /inputs stored or named by the
// generator, /weights, and the memory reading them takes.
#include "golden/case_file_part.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/compare/sketch.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/resources/memory_room.hpp"
#include "core/tp/tp_shard.hpp"
#include "golden/hdf5_error_translation.hpp"
#include "golden/hdf5_io.hpp"
#include "golden/integrity.hpp"

namespace attncheck::golden {

namespace {

// ---- geometry ----

bool needs_version_2(const Geometry& geometry) {
  return geometry.rope_scaling().type != RopeScalingType::none ||
         geometry.scale_source() == ScaleSource::attention_multiplier || geometry.attention_sinks() ||
         geometry.qk_norm_full_width();
}

// Schema version 2's /geometry attributes (SCHEMA.md "Schema version 2"), by name, for the checks that a
// version-1 file holds none of them.
constexpr std::string_view kVersion2Attributes[] = {"scale_source",
                                                    "attention_multiplier",
                                                    "attention_sinks",
                                                    "rope_scaling",
                                                    "rope_scaling_factor",
                                                    "rope_scaling_low_freq_factor",
                                                    "rope_scaling_high_freq_factor",
                                                    "rope_scaling_original_max_position_embeddings",
                                                    "rope_scaling_beta_fast",
                                                    "rope_scaling_beta_slow",
                                                    "rope_scaling_mscale",
                                                    "rope_scaling_mscale_all_dim",
                                                    "rope_scaling_truncate",
                                                    "rope_scaling_attention_factor"};

void write_version_2_geometry(H5::Group& group, const Geometry& geometry) {
  write_attribute(group, "scale_source", std::string(to_string(geometry.scale_source())));
  if (geometry.spec().attention_multiplier) {
    write_attribute(group, "attention_multiplier", *geometry.spec().attention_multiplier);
  }
  if (geometry.attention_sinks()) write_attribute(group, "attention_sinks", std::int64_t{1});
  const RopeScaling& scaling = geometry.rope_scaling();
  write_attribute(group, "rope_scaling", std::string(to_string(scaling.type)));
  const auto optional_number = [&](const char* name, const std::optional<double>& value) {
    if (value) write_attribute(group, name, *value);
  };
  optional_number("rope_scaling_factor", scaling.factor);
  optional_number("rope_scaling_low_freq_factor", scaling.low_freq_factor);
  optional_number("rope_scaling_high_freq_factor", scaling.high_freq_factor);
  if (scaling.original_max_position_embeddings) {
    write_attribute(group, "rope_scaling_original_max_position_embeddings", *scaling.original_max_position_embeddings);
  }
  optional_number("rope_scaling_beta_fast", scaling.beta_fast);
  optional_number("rope_scaling_beta_slow", scaling.beta_slow);
  optional_number("rope_scaling_mscale", scaling.mscale);
  optional_number("rope_scaling_mscale_all_dim", scaling.mscale_all_dim);
  if (scaling.type == RopeScalingType::yarn)
    write_attribute(group, "rope_scaling_truncate", std::int64_t{scaling.truncate});
  optional_number("rope_scaling_attention_factor", scaling.attention_factor);
  if (scaling.type == RopeScalingType::longrope) {
    const auto pairs = static_cast<std::int64_t>(scaling.short_factor.size());
    write_tensor(group, "rope_short_factor", Tensor({pairs}, scaling.short_factor));
    write_tensor(group, "rope_long_factor", Tensor({pairs}, scaling.long_factor));
  }
}

// Schema version 3's latent-attention attributes (SCHEMA.md "Schema version 3"), by name.
constexpr std::string_view kVersion3Attributes[] = {"attention",        "q_lora_rank", "kv_lora_rank",
                                                    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                                    "latent_norm_eps"};

void write_latent_geometry(H5::Group& group, const LatentAttentionSpec& latent) {
  write_attribute(group, "attention", std::string("latent"));
  write_attribute(group, "q_lora_rank", latent.q_lora_rank.value_or(0));  // 0: q_proj, no q latent
  write_attribute(group, "kv_lora_rank", latent.kv_lora_rank);
  write_attribute(group, "qk_nope_head_dim", latent.qk_nope_head_dim);
  write_attribute(group, "qk_rope_head_dim", latent.qk_rope_head_dim);
  write_attribute(group, "v_head_dim", latent.v_head_dim);
  write_attribute(group, "latent_norm_eps", latent.latent_norm_eps);
}

void write_geometry(H5::H5File& file, const Geometry& geometry, std::int64_t tp_size) {
  H5::Group group = file.createGroup("/geometry");
  write_attribute(group, "hidden_size", geometry.hidden_size());
  write_attribute(group, "num_attention_heads", geometry.num_heads());
  write_attribute(group, "num_key_value_heads", geometry.num_kv_heads());
  // Absent when the geometry omits head_dim: that absence is the regression case readers must keep.
  if (geometry.head_dim_source() == HeadDimSource::explicit_value)
    write_attribute(group, "head_dim", geometry.head_dim());
  write_attribute(group, "rotary_dim", geometry.rotary_dim());
  write_attribute(group, "rope_theta", geometry.rope_theta());
  write_attribute(group, "rope_style", std::string(to_string(geometry.rope_style())));
  write_attribute(group, "qk_norm", std::string(to_string(geometry.qk_norm())));
  write_attribute(group, "qk_norm_eps", geometry.qk_norm_eps());
  write_attribute(group, "qkv_bias", std::int64_t{geometry.qkv_bias()});
  write_attribute(group, "out_bias", std::int64_t{geometry.out_bias()});
  write_attribute(group, "scale", geometry.scale());
  if (geometry.spec().query_pre_attn_scalar) {
    write_attribute(group, "query_pre_attn_scalar", *geometry.spec().query_pre_attn_scalar);
  }
  if (geometry.softcap()) write_attribute(group, "softcap", *geometry.softcap());
  if (geometry.sliding_window()) write_attribute(group, "sliding_window", *geometry.sliding_window());
  write_attribute(group, "causal", std::int64_t{geometry.causal()});
  write_attribute(group, "tp_size", tp_size);
  if (needs_version_2(geometry) || geometry.is_latent()) write_version_2_geometry(group, geometry);
  if (geometry.is_latent()) write_latent_geometry(group, *geometry.latent());
}

std::int64_t required_integer(const H5::Group& group, const std::string& name, const std::string& file_name) {
  auto value = read_integer_attribute(group, name, file_name);
  if (!value)
    fail(file_name, "/geometry@" + name, "absent", "the schema requires this attribute", "see golden/SCHEMA.md");
  return *value;
}

bool required_flag(const H5::Group& group, const std::string& name, const std::string& file_name) {
  const std::int64_t value = required_integer(group, name, file_name);
  if (value != 0 && value != 1) fail(file_name, "/geometry@" + name, std::to_string(value), "must be 0 or 1", "");
  return value == 1;
}

// Schema version 3's attributes into `spec`: a latent layer's widths. head_dim and rotary_dim, which every
// version states, must then be the q/k width and the RoPE width, and are left to the latent spec.
void read_latent_geometry(const H5::Group& group, const std::string& file_name, GeometrySpec& spec) {
  const std::optional<std::string> attention = read_string_attribute(group, "attention", file_name);
  if (!attention || *attention != "latent") {
    fail(file_name, "/geometry@attention", attention.value_or("absent"),
         "schema version 3 is latent attention's: must be \"latent\"", "latent, or schema_version 2");
  }
  const auto width = [&](const char* name) { return required_integer(group, name, file_name); };
  LatentAttentionSpec latent;
  const std::int64_t q_lora_rank = width("q_lora_rank");
  if (q_lora_rank != 0) latent.q_lora_rank = q_lora_rank;
  latent.kv_lora_rank = width("kv_lora_rank");
  latent.qk_nope_head_dim = width("qk_nope_head_dim");
  latent.qk_rope_head_dim = width("qk_rope_head_dim");
  latent.v_head_dim = width("v_head_dim");
  const std::optional<double> eps = read_double_attribute(group, "latent_norm_eps", file_name);
  if (!eps) fail(file_name, "/geometry@latent_norm_eps", "absent", "schema version 3 requires it", "1e-06");
  latent.latent_norm_eps = *eps;
  if (spec.head_dim != latent.qk_head_dim()) {
    fail(file_name, "/geometry@head_dim", spec.head_dim ? std::to_string(*spec.head_dim) : "absent",
         fmt::format("must be the q/k head width qk_nope_head_dim + qk_rope_head_dim = {}", latent.qk_head_dim()),
         std::to_string(latent.qk_head_dim()));
  }
  if (spec.rotary_dim != latent.qk_rope_head_dim) {
    fail(file_name, "/geometry@rotary_dim", spec.rotary_dim ? std::to_string(*spec.rotary_dim) : "absent",
         fmt::format("must be qk_rope_head_dim = {}", latent.qk_rope_head_dim),
         std::to_string(latent.qk_rope_head_dim));
  }
  spec.head_dim.reset();
  spec.rotary_dim.reset();
  spec.latent = latent;
}

// Schema version 2's /geometry attributes into `spec`; returns the stated scale_source.
std::string read_version_2_geometry(const H5::H5File& file, const H5::Group& group, const std::string& file_name,
                                    GeometrySpec& spec) {
  const auto required_text = [&](const char* name) {
    const std::optional<std::string> value = read_string_attribute(group, name, file_name);
    if (!value) fail(file_name, std::string("/geometry@") + name, "absent", "schema version 2 requires it", "");
    return *value;
  };
  const std::string scale_source = required_text("scale_source");
  spec.attention_multiplier = read_double_attribute(group, "attention_multiplier", file_name);
  if (const auto sinks = read_integer_attribute(group, "attention_sinks", file_name)) {
    if (*sinks != 0 && *sinks != 1)
      fail(file_name, "/geometry@attention_sinks", std::to_string(*sinks), "must be 0 or 1", "1");
    spec.attention_sinks = *sinks == 1;
  }
  const std::string type = required_text("rope_scaling");
  const std::optional<RopeScalingType> parsed = parse_rope_scaling_type(type);
  if (!parsed)
    fail(file_name, "/geometry@rope_scaling", type, "must be none, linear, llama3, yarn or longrope", "none");
  RopeScaling& scaling = spec.rope_scaling;
  scaling.type = *parsed;
  scaling.factor = read_double_attribute(group, "rope_scaling_factor", file_name);
  scaling.low_freq_factor = read_double_attribute(group, "rope_scaling_low_freq_factor", file_name);
  scaling.high_freq_factor = read_double_attribute(group, "rope_scaling_high_freq_factor", file_name);
  scaling.original_max_position_embeddings =
      read_integer_attribute(group, "rope_scaling_original_max_position_embeddings", file_name);
  scaling.beta_fast = read_double_attribute(group, "rope_scaling_beta_fast", file_name);
  scaling.beta_slow = read_double_attribute(group, "rope_scaling_beta_slow", file_name);
  scaling.mscale = read_double_attribute(group, "rope_scaling_mscale", file_name);
  scaling.mscale_all_dim = read_double_attribute(group, "rope_scaling_mscale_all_dim", file_name);
  // Required for yarn (SCHEMA.md): absent, it would read as the default `true` and a layer that does not
  // truncate would be checked as one that does, the mismatch blamed on the implementation.
  if (const auto truncate = read_integer_attribute(group, "rope_scaling_truncate", file_name)) {
    if (*truncate != 0 && *truncate != 1) {
      fail(file_name, "/geometry@rope_scaling_truncate", std::to_string(*truncate), "must be 0 or 1", "1");
    }
    scaling.truncate = *truncate == 1;
    // Only yarn has a ramp to truncate: on any other type the attribute would be read and then ignored
    // (the geometry's check catches only a stated 0), so it is refused, as every field that means nothing.
    if (scaling.type != RopeScalingType::yarn) {
      fail(file_name, "/geometry@rope_scaling_truncate", std::to_string(*truncate),
           fmt::format("only rope_scaling yarn has it, not {}", to_string(scaling.type)), "leave it out");
    }
  } else if (scaling.type == RopeScalingType::yarn) {
    fail(file_name, "/geometry@rope_scaling_truncate", "absent", "rope_scaling yarn requires it (0 or 1)",
         "see golden/SCHEMA.md, \"Schema version 2\"");
  }
  scaling.attention_factor = read_double_attribute(group, "rope_scaling_attention_factor", file_name);
  for (const auto& [name, target] :
       {std::pair{"rope_short_factor", &scaling.short_factor}, std::pair{"rope_long_factor", &scaling.long_factor}}) {
    const std::string path = std::string("/geometry/") + name;
    if (!exists(file, path)) continue;
    // Read before the memory estimate (it needs the geometry), so its size is bounded by rotary_dim first:
    // one factor per rotated pair, rotary_dim within head_dim's limit.
    // Required, read before this; a latent layer's is its qk_rope_head_dim (read_latent_geometry moved it there).
    const std::int64_t rotary_dim = spec.latent ? spec.latent->qk_rope_head_dim : spec.rotary_dim.value_or(0);
    if (rotary_dim < 0 || rotary_dim > kMaxDimension) {
      fail(file_name, "/geometry@rotary_dim", std::to_string(rotary_dim),
           fmt::format("must lie in [0, {}] (head_dim's limit)", kMaxDimension), "");
    }
    Tensor factors = read_tensor(file, path, file_name, Shape{rotary_dim / 2}, false);
    *target = std::move(factors.values);
  }
  return scale_source;
}

TpPlan read_plan(const H5::H5File& file, const std::string& file_name, std::int64_t version) {
  const H5::Group group = open_group(file, "/geometry", file_name);
  GeometrySpec spec;
  spec.hidden_size = required_integer(group, "hidden_size", file_name);
  spec.num_heads = required_integer(group, "num_attention_heads", file_name);
  spec.num_kv_heads = required_integer(group, "num_key_value_heads", file_name);
  spec.head_dim = read_integer_attribute(group, "head_dim", file_name);
  spec.rotary_dim = required_integer(group, "rotary_dim", file_name);
  // Every attribute the schema marks required is required: a default would turn a damaged file into a
  // different layer, and the mismatch would be blamed on the implementation.
  auto required = [&](const auto& value, const char* name) {
    if (!value) fail(file_name, std::string("/geometry@") + name, "absent", "the schema requires this attribute", "");
    return *value;
  };
  spec.rope_theta = required(read_double_attribute(group, "rope_theta", file_name), "rope_theta");
  const std::string style = required(read_string_attribute(group, "rope_style", file_name), "rope_style");
  const auto rope_style = parse_rope_style(style);
  if (!rope_style) fail(file_name, "/geometry@rope_style", style, "must be half-split or interleaved", "half-split");
  spec.rope_style = *rope_style;
  const std::string norm = required(read_string_attribute(group, "qk_norm", file_name), "qk_norm");
  const auto qk_norm = parse_qk_norm(norm);
  if (!qk_norm) fail(file_name, "/geometry@qk_norm", norm, "must be none, rms, rms-one-plus or rms-full-width", "none");
  if (*qk_norm == QkNorm::rms_full_width && version < 2) {
    fail(file_name, "/geometry@qk_norm", norm, "schema version 1 has no whole-width QK-norm",
         "schema_version 2, as attncheck writes files of layers that need it");
  }
  spec.qk_norm = *qk_norm;
  spec.qk_norm_eps = required(read_double_attribute(group, "qk_norm_eps", file_name), "qk_norm_eps");
  spec.qkv_bias = required_flag(group, "qkv_bias", file_name);
  spec.out_bias = required_flag(group, "out_bias", file_name);
  spec.query_pre_attn_scalar = read_double_attribute(group, "query_pre_attn_scalar", file_name);
  spec.softcap = read_double_attribute(group, "softcap", file_name);
  spec.sliding_window = read_integer_attribute(group, "sliding_window", file_name);
  spec.causal = required_flag(group, "causal", file_name);
  const std::int64_t tp_size = required_integer(group, "tp_size", file_name);
  std::string scale_source;
  if (version >= 3) {
    read_latent_geometry(group, file_name, spec);
  } else {
    // A latent layer's attributes in an earlier version: the file disagrees with itself.
    for (const std::string& name : attribute_names(group, file_name, "/geometry")) {
      if (std::find(std::begin(kVersion3Attributes), std::end(kVersion3Attributes), name) !=
          std::end(kVersion3Attributes)) {
        fail(file_name, "/geometry@" + name, "present",
             fmt::format("schema version {} has no such attribute (latent attention is version 3's)", version),
             "schema_version 3, as attncheck writes files of latent-attention layers");
      }
    }
  }
  if (version >= 2) {
    scale_source = read_version_2_geometry(file, group, file_name, spec);
  } else {
    // A version-1 file holding version 2's attributes disagrees with itself: which layer is it?
    for (const std::string& name : attribute_names(group, file_name, "/geometry")) {
      if (std::find(std::begin(kVersion2Attributes), std::end(kVersion2Attributes), name) !=
          std::end(kVersion2Attributes)) {
        fail(file_name, "/geometry@" + name, "present", "schema version 1 has no such attribute",
             "schema_version 2, as attncheck writes files of layers that need it");
      }
    }
    for (const char* name : {"/geometry/rope_short_factor", "/geometry/rope_long_factor"}) {
      if (exists(file, name))
        fail(file_name, name, "present", "schema version 1 has no such dataset", "schema_version 2");
    }
  }

  try {
    const Geometry geometry = resolve_geometry(spec);
    // Bound what the reader allocates from declared sizes before it allocates anything.
    const std::int64_t parameters = make_tp_plan(geometry, 1).unsharded_params.total();
    if (parameters > kMaxDatasetElements) {
      fail(file_name, "/geometry", fmt::format("{} parameters", parameters),
           "a golden's layer holds at most 2^28 parameters", "check the head counts and widths");
    }
    const auto scale = read_double_attribute(group, "scale", file_name);
    if (!scale || *scale != geometry.scale()) {
      fail(file_name, "/geometry@scale", scale ? fmt::format("{}", *scale) : "absent",
           fmt::format("must equal the geometry's scale {} (head_dim^-0.5, query_pre_attn_scalar^-0.5 or "
                       "attention_multiplier)",
                       geometry.scale()),
           "store the scale the layer uses");
    }
    if (version >= 2 && scale_source != to_string(geometry.scale_source())) {
      fail(file_name, "/geometry@scale_source", scale_source,
           fmt::format("must name where the scale comes from: {}", to_string(geometry.scale_source())),
           "head_dim, query_pre_attn_scalar or attention_multiplier");
    }
    return make_tp_plan(geometry, tp_size);
  } catch (const InputError& error) {
    if (error.context().starts_with("HDF5 file")) throw;
    throw InputError(fmt::format("HDF5 file '{}': {}", file_name, error.context()), error.violations());
  }
}

}  // namespace

std::int64_t schema_version_for(const Geometry& geometry) {
  if (geometry.is_latent()) return 3;
  return needs_version_2(geometry) ? 2 : 1;
}

// ---- parameters ----

void write_parameters(H5::Group& group, const Parameters& parameters, bool skip_projections) {
  for_each_parameter(parameters, [&](std::string_view name, const Tensor& tensor) {
    if (skip_projections && sketchable("grads/" + std::string(name))) return;
    if (tensor.numel() == 0) return;
    write_tensor(group, std::string(name), tensor);
  });
}

Parameters read_parameters(const H5::H5File& file, const std::string& group_path, Parameters shapes,
                           const std::string& file_name, bool allow_non_finite, const std::string& sketch_prefix,
                           NamedTensors* sketches) {
  Parameters parameters = std::move(shapes);
  for_each_parameter(parameters, [&](std::string_view name, Tensor& tensor) {
    const std::string sketch_name = sketch_prefix + std::string(name);
    const bool sketched = sketches != nullptr && sketchable(sketch_name);
    if (element_count(tensor.shape) == 0) {
      const std::string path = sketched ? "/expected/sketches/" + sketch_name : group_path + "/" + std::string(name);
      if (exists(file, path)) {
        fail(file_name, path, "present", "this rank holds none of the tensor's lines under the golden's TP convention",
             "drop the dataset, or fix /geometry@tp_convention");
      }
      return;
    }
    if (sketched) {
      (*sketches)[sketch_name + std::string(kSketchSuffix)] =
          read_tensor(file, "/expected/sketches/" + sketch_name, file_name, sketch_shape(sketch_name, tensor.shape));
      tensor = Tensor();
      return;
    }
    tensor = read_tensor(file, group_path + "/" + std::string(name), file_name, tensor.shape, allow_non_finite);
  });
  // A stored tensor the geometry has no use for means the file and its geometry disagree.
  for (const char* optional_name : {"q_proj", "k_proj", "v_proj", "q_bias", "k_bias", "v_bias", "o_bias", "q_norm",
                                    "k_norm", "sinks", "q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa",
                                    "kv_a_layernorm", "kv_b_proj"}) {
    const std::string path = group_path + "/" + optional_name;
    bool wanted = false;
    for_each_parameter(parameters, [&](std::string_view name, const Tensor&) { wanted |= name == optional_name; });
    if (!wanted && exists(file, path)) {
      fail(file_name, path, "present",
           "the geometry has no such parameter (qkv_bias/out_bias/qk_norm/attention_sinks; latent attention's tensors "
           "only in a latent layer, q_proj there only without q_lora_rank)",
           "drop the dataset or fix the geometry attributes");
    }
  }
  return parameters;
}

namespace {

// ---- inputs named by the generator ----

// /inputs without x and dout: attributes generator, seed, activations; batch and seq from position_ids.
void read_generated_inputs(const H5::H5File& file, const H5::Group& group, const std::string& generator,
                           const std::string& path, Golden& golden) {
  if (generator != kInputGenerator) {
    fail(path, "/inputs@generator", generator, fmt::format("this attncheck knows {}", kInputGenerator),
         "store x and dout as datasets");
  }
  for (const char* name : {"x", "dout"}) {
    if (exists(file, std::string("/inputs/") + name)) {
      fail(path, std::string("/inputs/") + name, "present",
           "a file whose /inputs names a generator stores no x or dout",
           "drop the dataset, or the generator attributes");
    }
  }
  const auto seed = read_integer_attribute(group, "seed", path);
  if (!seed) fail(path, "/inputs@seed", "absent", "generated inputs must name their seed", "");
  const std::string distribution_name = read_string_attribute(group, "activations", path).value_or("");
  const auto distribution = parse_activation_distribution(distribution_name);
  if (!distribution) {
    fail(path, "/inputs@activations", distribution_name.empty() ? "absent" : distribution_name,
         "must be uniform, heavy-tailed or outliers", "uniform");
  }
  Inputs& inputs = golden.test_case.inputs;
  Shape position_shape;
  const std::vector<std::int64_t> positions =
      read_integers(file, "/inputs/position_ids", path, std::nullopt, &position_shape);
  const std::int64_t hidden = golden.test_case.geometry().hidden_size();
  if (position_shape.size() != 2 || position_shape[0] < 1 || position_shape[1] < 1) {
    fail(path, "/inputs/position_ids", to_string(position_shape), "shape must be [batch, seq] with batch, seq >= 1",
         "");
  }
  // Bound what is generated before generating it: golden make's limits on batch and seq, then x's size (its
  // memory was counted with everything else the file needs: require_room_for_reading).
  for (const auto& [extent, name] : {std::pair{position_shape[0], "batch"}, std::pair{position_shape[1], "seq"}}) {
    if (extent > kMaxBatchOrSeq) {
      fail(path, "/inputs/position_ids", to_string(position_shape),
           fmt::format("{} {} is beyond 2^20, the most attncheck generates (golden make's --{})", name, extent, name),
           "a golden of fewer tokens");
    }
  }
  if (position_shape[0] * position_shape[1] > kMaxDatasetElements / hidden) {
    fail(path, "/inputs/position_ids", to_string(position_shape),
         fmt::format("generated x would hold more than 2^28 values (hidden_size {})", hidden), "a shorter sequence");
  }
  inputs.batch = position_shape[0];
  inputs.seq = position_shape[1];
  inputs.positions = positions;
  golden.activations = *distribution;
  // The same 64 bits as the unsigned seed. write_golden names golden.seed: a file whose inputs and
  // root seeds differ is read faithfully, and `golden expand` stores such inputs.
  const auto input_seed = static_cast<std::uint64_t>(*seed);
  golden.inputs_by_generator = input_seed == golden.seed;
  const Shape shape{inputs.batch, inputs.seq, hidden};
  inputs.x = generate_activations("x", shape, *distribution, input_seed);
  inputs.dout = generate_activations("dout", shape, *distribution, input_seed);
}

}  // namespace

namespace {

// SCHEMA.md "Context-parallel layouts": /geometry@cp_size, @cp_scheme and, for the ring, @cp_chunks.
void write_context_parallel(H5::H5File& file, const CpSpec& cp) {
  H5::Group group = file.openGroup("/geometry");
  write_attribute(group, "cp_size", cp.cp_size);
  write_attribute(group, "cp_scheme", std::string(to_string(cp.scheme)));
  if (cp.scheme == CpScheme::ring) {
    write_attribute(group, "cp_chunks", std::string(cp.load_balanced ? "load-balanced" : "contiguous"));
  }
}

// The layout a file states, checked against its plan; none when it states none. Attributes that belong to a
// layout without the one that states it, a missing scheme or chunking, or a layout the plan cannot take: the
// file is refused, naming the attribute.
std::optional<CpSpec> read_context_parallel(const H5::H5File& file, const std::string& path, const TpPlan& plan) {
  const H5::Group group = file.openGroup("/geometry");
  const std::optional<std::int64_t> size = read_integer_attribute(group, "cp_size", path);
  const std::optional<std::string> scheme = read_string_attribute(group, "cp_scheme", path);
  const std::optional<std::string> chunks = read_string_attribute(group, "cp_chunks", path);
  if (!size) {
    if (scheme || chunks) {
      fail(path, "/geometry@cp_size", "absent", "cp_scheme and cp_chunks describe a context-parallel layout, "
           "which cp_size states", "add cp_size, or remove them");
    }
    return std::nullopt;
  }
  if (!scheme) fail(path, "/geometry@cp_scheme", "absent", "a context-parallel layout needs its scheme", "ulysses or ring");
  const std::optional<CpScheme> parsed = parse_cp_scheme(*scheme);
  if (!parsed) fail(path, "/geometry@cp_scheme", *scheme, "must be ulysses or ring", "ulysses or ring");
  CpSpec cp{.cp_size = *size, .scheme = *parsed};
  if (*parsed == CpScheme::ring) {
    if (!chunks) fail(path, "/geometry@cp_chunks", "absent", "the ring's chunking is required", "load-balanced or contiguous");
    if (*chunks != "load-balanced" && *chunks != "contiguous") {
      fail(path, "/geometry@cp_chunks", *chunks, "must be load-balanced or contiguous", "load-balanced");
    }
    cp.load_balanced = *chunks == "load-balanced";
  } else if (chunks) {
    fail(path, "/geometry@cp_chunks", *chunks, "Ulysses holds one contiguous chunk per CP rank: chunking is the ring's",
         "remove it");
  }
  try {
    (void)make_parallel_layout(plan.geometry, plan.tp_size, cp);
  } catch (const InputError& error) {
    throw InputError(fmt::format("HDF5 file '{}': /geometry's context-parallel layout: {}", path, error.context()),
                     error.violations());
  }
  return cp;
}

}  // namespace

void write_case_part(H5::H5File& file, const Case& test_case, const CasePartHeader& golden,
                     const CaseFileParts& parts) {
  write_attribute(file, "schema_version", schema_version_for(test_case.geometry()));
  write_attribute(file, "generator", golden.generator);
  write_attribute(file, "seed", static_cast<std::int64_t>(golden.seed));
  write_geometry(file, test_case.geometry(), parts.tensor_parallel ? test_case.plan.tp_size : 1);
  if (test_case.context_parallel && parts.context_parallel && parts.tensor_parallel) {
    write_context_parallel(file, *test_case.context_parallel);
  }

  const Inputs& inputs = test_case.inputs;
  H5::Group input_group = file.createGroup("/inputs");
  if (golden.inputs_by_generator) {
    for (const auto& [name, tensor] : {std::pair{"x", &inputs.x}, std::pair{"dout", &inputs.dout}}) {
      if (generate_activations(name, tensor->shape, golden.activations, golden.seed) != *tensor) {
        throw std::logic_error(fmt::format("write_golden: inputs_by_generator, but {} is not the generator's", name));
      }
    }
    write_attribute(input_group, "generator", std::string(kInputGenerator));
    write_attribute(input_group, "seed", static_cast<std::int64_t>(golden.seed));  // the same 64 bits
    write_attribute(input_group, "activations", std::string(to_string(golden.activations)));
  } else {
    write_tensor(input_group, "x", inputs.x);
    write_tensor(input_group, "dout", inputs.dout);
  }
  write_integers(input_group, "position_ids", inputs.positions, {inputs.batch, inputs.seq});
  write_integers(input_group, "key_lengths", inputs.key_lengths, {inputs.batch});
  if (!inputs.decode.empty() && parts.decode) {
    std::vector<std::int64_t> schedule = {inputs.decode.prefill};
    schedule.insert(schedule.end(), inputs.decode.steps.begin(), inputs.decode.steps.end());
    write_integers(input_group, "decode_schedule", schedule, {static_cast<std::int64_t>(schedule.size())});
  }
  H5::Group weight_group = file.createGroup("/weights");
  if (golden.weights_by_generator) {
    if (generate_weights(test_case.geometry(), golden.seed) != test_case.weights) {
      throw std::logic_error("write_golden: weights_by_generator, but the weights are not the generator's");
    }
    write_attribute(weight_group, "generator", std::string(kWeightGenerator));
    write_attribute(weight_group, "seed", static_cast<std::int64_t>(golden.seed));  // the same 64 bits
  } else {
    write_parameters(weight_group, test_case.weights);
  }
}

// Everything reading the file allocates, counted before anything large is: the values its datasets declare
// (read as 8-byte values), HDF5's buffer of the largest chunk while the integrity digest reads it in slabs
// (attncheck writes each dataset as one chunk: golden/hdf5_io.cpp), x and dout when /inputs names the generator (from position_ids'
// declared shape), the weights when /weights names it, with the generator's one temporary (o_proj's transpose,
// as large as o_proj). One sum against memory_room(), so that --max-memory bounds the whole read, not each part
// of it alone. cli.reading_memory measures the peak below it.
static void require_room_for_reading(const H5::H5File& file, const std::string& path, const Geometry& geometry,
                                     GeneratedWeights generated_weights) {
  const auto hidden = static_cast<long double>(geometry.hidden_size());
  const DeclaredValues declared = declared_values(file, path);
  long double bytes =
      8.0L * (static_cast<long double>(declared.total) + static_cast<long double>(declared.largest_chunk));
  std::string generated;
  if (exists(file, "/inputs") && read_string_attribute(file.openGroup("/inputs"), "generator", path) &&
      exists(file, "/inputs/position_ids") && file.childObjType("/inputs/position_ids") == H5O_TYPE_DATASET) {
    const H5::DataSpace space = file.openDataSet("/inputs/position_ids").getSpace();
    long double tokens = static_cast<long double>(space.getSimpleExtentNpoints());
    bytes += 2.0L * 8.0L * tokens * hidden;  // x and dout
    generated += ", x and dout generated";
  }
  if (generated_weights == GeneratedWeights::computed && exists(file, "/weights") &&
      read_string_attribute(file.openGroup("/weights"), "generator", path)) {
    const auto parameters = static_cast<long double>(make_tp_plan(geometry, 1).unsharded_params.total());
    bytes += 8.0L * (parameters + hidden * static_cast<long double>(geometry.query_width()));
    generated += ", weights generated";
  }
  require_memory(fmt::format("HDF5 file '{}' (its datasets{})", path, generated),
                 static_cast<std::uint64_t>(std::min(bytes, static_cast<long double>(std::uint64_t{1} << 62))),
                 [](std::uint64_t) { return std::string("a golden of a smaller layer or fewer tokens"); });
}

Golden read_case_part(const H5::H5File& file, const std::string& path, GeneratedWeights generated_weights) {
  const auto version = read_integer_attribute(file, "schema_version", path);
  if (!version || *version < 1 || *version > kSchemaVersion) {
    fail(path, "schema_version", version ? std::to_string(*version) : "absent",
         fmt::format("this attncheck reads schema versions 1 to {}", kSchemaVersion), "regenerate the file");
  }
  Golden golden{.test_case = Case{.plan = read_plan(file, path, *version), .inputs = {}, .weights = {}},
                .schema_version = *version,
                .expected = {}};
  require_room_for_reading(file, path, golden.test_case.geometry(), generated_weights);
  golden.test_case.context_parallel = read_context_parallel(file, path, golden.test_case.plan);
  // Required root attributes (SCHEMA.md "Root attributes"): refused when absent, never defaulted.
  const std::optional<std::string> generator = read_string_attribute(file, "generator", path);
  if (!generator) fail(path, "/@generator", "absent", "the schema requires it: what wrote the file", "e.g. attncheck 0.1.0");
  golden.generator = *generator;
  const std::optional<std::int64_t> seed = read_integer_attribute(file, "seed", path);
  if (!seed) {
    fail(path, "/@seed", "absent", "the schema requires it: the seed of the generated inputs and weights",
         "0 if nothing was generated");
  }
  golden.seed = static_cast<std::uint64_t>(*seed);

  Case& test_case = golden.test_case;
  const Geometry& geometry = test_case.geometry();
  Inputs& inputs = test_case.inputs;
  const H5::Group input_group = open_group(file, "/inputs", path);
  if (const auto input_generator = read_string_attribute(input_group, "generator", path)) {
    read_generated_inputs(file, input_group, *input_generator, path, golden);
  } else {
    inputs.x = read_tensor(file, "/inputs/x", path, std::nullopt);
    if (inputs.x.shape.size() != 3 || inputs.x.shape[2] != geometry.hidden_size() || inputs.x.shape[0] < 1 ||
        inputs.x.shape[1] < 1) {
      fail(path, "/inputs/x", to_string(inputs.x.shape),
           fmt::format("shape must be [batch, seq, hidden_size = {}] with batch, seq >= 1", geometry.hidden_size()),
           "");
    }
    inputs.batch = inputs.x.shape[0];
    inputs.seq = inputs.x.shape[1];
    inputs.positions = read_integers(file, "/inputs/position_ids", path, Shape{inputs.batch, inputs.seq});
    inputs.dout = read_tensor(file, "/inputs/dout", path, inputs.x.shape);
  }
  inputs.key_lengths = exists(file, "/inputs/key_lengths")
                           ? read_integers(file, "/inputs/key_lengths", path, Shape{inputs.batch})
                           : std::vector<std::int64_t>(static_cast<std::size_t>(inputs.batch), inputs.seq);
  if (exists(file, "/inputs/decode_schedule")) {
    const std::vector<std::int64_t> schedule = read_integers(file, "/inputs/decode_schedule", path, std::nullopt);
    if (schedule.empty() || (schedule.size() == 1 && schedule.front() == 0)) {
      fail(path, "/inputs/decode_schedule", schedule.empty() ? "[]" : "[0]",
           "must decode at least one token: [prefill, step, ...]; omit the dataset for no decoding", "");
    }
    inputs.decode.prefill = schedule.front();
    inputs.decode.steps.assign(schedule.begin() + 1, schedule.end());
  }
  const H5::Group weight_group = open_group(file, "/weights", path);
  if (const auto weight_generator = read_string_attribute(weight_group, "generator", path)) {
    if (*weight_generator != kWeightGenerator) {
      fail(path, "/weights@generator", *weight_generator, fmt::format("this attncheck knows {}", kWeightGenerator),
           "store the weights as datasets (attncheck golden expand)");
    }
    const auto weight_seed = read_integer_attribute(weight_group, "seed", path);
    if (!weight_seed) fail(path, "/weights@seed", "absent", "a generated-weights file must name its seed", "");
    // Weights named by the generator and also stored: which would count? Neither silently.
    if (weight_group.getNumObjs() > 0) {
      const std::string stored = weight_group.getObjnameByIdx(0);
      fail(path, "/weights/" + stored, "present",
           "a file whose /weights names a generator stores no weights (they would be ignored)",
           "drop the datasets, or the generator attributes (attncheck golden expand stores them all)");
    }
    // Left out, they cannot fail to generate later: read_plan bounds a golden's layer to 2^28 parameters, below
    // the generator's 2^31.
    if (generated_weights == GeneratedWeights::left_out) {
      golden.weights_left_out_seed = static_cast<std::uint64_t>(*weight_seed);
    } else {
      try {  // its memory was counted with everything else the file needs (require_room_for_reading)
        test_case.weights = generate_weights(geometry, static_cast<std::uint64_t>(*weight_seed));
      } catch (const InputError& error) {
        throw InputError(fmt::format("HDF5 file '{}': {}", path, error.context()), error.violations());
      }
    }
    // Rewritten with the flag kept, weights are named by golden.seed: only valid when the seeds agree (a
    // file whose weight seed differs is read faithfully, and rewritten with its weights stored).
    golden.weights_by_generator = static_cast<std::uint64_t>(*weight_seed) == golden.seed;
  } else {
    test_case.weights =
        read_parameters(file, "/weights", parameter_shapes(geometry, full_widths(geometry)), path, false);
  }
  try {
    if (golden.weights_left_out_seed) {
      validate_case_but_weights(test_case);
    } else {
      validate_case(test_case);
    }
  } catch (const InputError& error) {
    throw InputError(fmt::format("HDF5 file '{}': {}", path, error.context()), error.violations());
  }
  return golden;
}

void write_case(const std::string& path, const Case& test_case, const std::string& generator,
                const CaseFileParts& parts) {
  translating_hdf5_errors(path, "write failed", [&] {
    {
      H5::H5File file = create_for_writing(path);
      write_case_part(file, test_case, {.generator = generator}, parts);
    }
    seal_integrity(path);
  });
}

CaseOutline read_case_outline(const std::string& path) {
  return translating_hdf5_errors(path, "read failed", [&] {
    // Only its attributes and small integer datasets are read: nothing it declares is allocated.
    const H5::H5File file = open_for_reading(path, DeclaredData::counted_by_caller);
    const auto version = read_integer_attribute(file, "schema_version", path);
    if (!version || *version < 1 || *version > kSchemaVersion) {
      fail(path, "schema_version", version ? std::to_string(*version) : "absent",
           fmt::format("this attncheck reads schema versions 1 to {}", kSchemaVersion), "regenerate the file");
    }
    CaseOutline outline{.plan = read_plan(file, path, *version)};
    outline.context_parallel = read_context_parallel(file, path, outline.plan);
    Shape position_shape;
    outline.positions = read_integers(file, "/inputs/position_ids", path, std::nullopt, &position_shape);
    if (position_shape.size() != 2 || position_shape[0] < 1 || position_shape[1] < 1) {
      fail(path, "/inputs/position_ids", to_string(position_shape), "shape must be [batch, seq] with batch, seq >= 1",
           "");
    }
    outline.batch = position_shape[0];
    outline.seq = position_shape[1];
    outline.key_lengths = exists(file, "/inputs/key_lengths")
                              ? read_integers(file, "/inputs/key_lengths", path, Shape{outline.batch})
                              : std::vector<std::int64_t>(static_cast<std::size_t>(outline.batch), outline.seq);
    for (const std::int64_t keys : outline.key_lengths) {
      if (keys < 0 || keys > outline.seq) {
        fail(path, "/inputs/key_lengths", std::to_string(keys), "must lie in [0, seq]", std::to_string(outline.seq));
      }
    }
    if (exists(file, "/inputs/decode_schedule")) {
      const std::vector<std::int64_t> schedule = read_integers(file, "/inputs/decode_schedule", path, std::nullopt);
      if (!schedule.empty()) {
        outline.decode.prefill = schedule.front();
        outline.decode.steps.assign(schedule.begin() + 1, schedule.end());
      }
    }
    return outline;
  });
}

Case read_case(const std::string& path) {
  return translating_hdf5_errors(path, "read failed", [&] {
    const H5::H5File file = open_for_reading(path, DeclaredData::counted_by_caller);  // require_room_for_reading
    Case test_case = read_case_part(file, path).test_case;
    verify_integrity(file, path);  // after the schema's own checks, whose messages are more specific
    return test_case;
  });
}

}  // namespace attncheck::golden
