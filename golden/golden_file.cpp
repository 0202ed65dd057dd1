#include "golden/golden_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <vector>

#include "core/compare/rank_regroup.hpp"
#include "core/compare/sketch.hpp"
#include "core/compare/tolerance.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/model/rope_frequencies.hpp"
#include "core/resources/memory_room.hpp"
#include "core/tp/tp_convention.hpp"
#include "core/tp/tp_shard.hpp"
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
  if (needs_version_2(geometry)) write_version_2_geometry(group, geometry);
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
    const std::int64_t rotary_dim = spec.rotary_dim.value_or(0);  // required: read before this
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

// ---- parameters ----

// Writes every parameter tensor except, when skip_projections, the four projections. A tensor of 0 rows
// (a rank that holds none of its lines, core/tp/tp_convention.hpp) is not written: it does not exist.
void write_parameters(H5::Group& group, const Parameters& parameters, bool skip_projections = false) {
  for_each_parameter(parameters, [&](std::string_view name, const Tensor& tensor) {
    if (skip_projections && sketchable("grads/" + std::string(name))) return;
    if (tensor.numel() == 0) return;
    write_tensor(group, std::string(name), tensor);
  });
}

// Creates the groups of an HDF5 path's parents ("/a/b/c" -> /a, /a/b).
void create_parents(H5::H5File& file, const std::string& path) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string parent = path.substr(0, slash);
    if (!exists(file, parent)) file.createGroup(parent);
  }
}

// Reads every parameter the geometry calls for, with the shapes of `shapes` (parameter_shapes or
// held_parameter_shapes: shapes alone, so that nothing is allocated before it is read), from group_path. A tensor of 0 rows (a rank holding none of its lines) is not read
// and must not be stored. With sketches given, the four projections are read as sketches from
// /expected/sketches/<sketch_prefix><name> into it (as "<prefix><name>#sketch") and left empty here.
Parameters read_parameters(const H5::H5File& file, const std::string& group_path, Parameters shapes,
                           const std::string& file_name, bool allow_non_finite, const std::string& sketch_prefix = "",
                           NamedTensors* sketches = nullptr) {
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
  for (const char* optional_name : {"q_bias", "k_bias", "v_bias", "o_bias", "q_norm", "k_norm", "sinks"}) {
    const std::string path = group_path + "/" + optional_name;
    bool wanted = false;
    for_each_parameter(parameters, [&](std::string_view name, const Tensor&) { wanted |= name == optional_name; });
    if (!wanted && exists(file, path)) {
      fail(file_name, path, "present", "the geometry has no such parameter (qkv_bias/out_bias/qk_norm/attention_sinks)",
           "drop the dataset or fix the geometry attributes");
    }
  }
  return parameters;
}

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

std::int64_t schema_version_for(const Geometry& geometry) {
  return needs_version_2(geometry) ? 2 : 1;
}

// /geometry, /inputs and /weights: everything but the answers.
static void write_case_part(H5::H5File& file, const Golden& golden) {
  const Case& test_case = golden.test_case;
  write_attribute(file, "schema_version", schema_version_for(test_case.geometry()));
  write_attribute(file, "generator", golden.generator);
  write_attribute(file, "seed", static_cast<std::int64_t>(golden.seed));
  write_geometry(file, test_case.geometry(), test_case.plan.tp_size);

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
  if (!inputs.decode.empty()) {
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

static void write_golden_unchecked(const std::string& path, const Golden& golden) {
  const Case& test_case = golden.test_case;
  const Result& expected = golden.expected;
  if (!expected.gradients) throw std::logic_error("write_golden: the expected result needs gradients");
  // The per-rank gradients must be held as the convention says: InputError when it cannot partition
  // the plan, a logic error when a rank's shapes are another convention's.
  if (test_case.plan.tp_size > 1) {
    const std::vector<RankHoldings> holdings = rank_holdings(test_case.plan, golden.tp_convention);
    if (expected.rank_gradients.size() != holdings.size()) {
      throw std::logic_error("write_golden: one set of rank gradients per rank is needed");
    }
    for (std::size_t r = 0; r < holdings.size(); ++r) {
      // A golden read from a sketched file keeps its projections as sketches (those tensors left empty).
      std::vector<Shape> want, have;
      const Parameters held = held_parameter_shapes(test_case.geometry(), holdings[r]);
      for_each_parameter(held, [&](std::string_view, const Tensor& tensor) { want.push_back(tensor.shape); });
      for_each_parameter(expected.rank_gradients[r],
                         [&](std::string_view, const Tensor& tensor) { have.push_back(tensor.shape); });
      for (std::size_t i = 0; i < want.size() && i < have.size(); ++i) {
        if (golden.gradients_sketched && have[i].empty()) have[i] = want[i];
      }
      if (want != have) {
        throw std::logic_error(fmt::format("write_golden: rank {}'s gradients are not shaped as {} holds them", r,
                                           to_string(golden.tp_convention)));
      }
    }
  }
  H5::H5File file = create_for_writing(path);
  write_case_part(file, golden);
  {
    H5::Group geometry_group = file.openGroup("/geometry");
    write_attribute(geometry_group, "tp_convention", std::string(to_string(golden.tp_convention)));
  }

  H5::Group expected_group = file.createGroup("/expected");
  const bool activations_sketched = golden.activations_sketched;
  if (!activations_sketched) write_tensor(expected_group, "out", expected.out);
  H5::Group grads = file.createGroup("/expected/grads");
  if (!activations_sketched) write_tensor(grads, "x", expected.gradients->x);
  const bool sketched = golden.gradients_sketched;
  write_parameters(grads, expected.gradients->params, sketched);
  if (sketched || activations_sketched) {
    // From the full gradients when the Result has them, else the sketches a read golden carries.
    for (const auto& [name, tensor] : expected_tensors(golden)) {
      if (!name.ends_with(kSketchSuffix)) continue;
      const std::string base = name.substr(0, name.size() - kSketchSuffix.size());
      const std::string path_in_file = "/expected/sketches/" + base;
      create_parents(file, path_in_file);
      H5::Group parent = file.openGroup(path_in_file.substr(0, path_in_file.rfind('/')));
      write_tensor(parent, base.substr(base.rfind('/') + 1), tensor);
    }
  }
  if (expected.decode_out && !activations_sketched) {
    H5::Group decode = file.createGroup("/expected/decode");
    write_tensor(decode, "out", *expected.decode_out);
  }
  if (test_case.plan.tp_size > 1) {
    file.createGroup("/expected/ranks");
    for (std::size_t r = 0; r < expected.rank_gradients.size(); ++r) {
      file.createGroup(fmt::format("/expected/ranks/{}", r));
      H5::Group rank_grads = file.createGroup(fmt::format("/expected/ranks/{}/grads", r));
      write_parameters(rank_grads, expected.rank_gradients[r], sketched);
    }
  }
}

// Everything reading the file allocates, counted before anything large is: the values its datasets declare
// (read as 8-byte values), HDF5's buffer of the largest chunk while the integrity digest reads it in slabs
// (attncheck writes each dataset as one chunk: golden/hdf5_io.cpp), x and dout when /inputs names the generator (from position_ids'
// declared shape), the weights when /weights names it, with the generator's one temporary (o_proj's transpose,
// as large as o_proj). One sum against memory_room(), so that --max-memory bounds the whole read, not each part
// of it alone. cli.reading_memory measures the peak below it.
static void require_room_for_reading(const H5::H5File& file, const std::string& path, const Geometry& geometry) {
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
  if (exists(file, "/weights") && read_string_attribute(file.openGroup("/weights"), "generator", path)) {
    const auto parameters = static_cast<long double>(make_tp_plan(geometry, 1).unsharded_params.total());
    bytes += 8.0L * (parameters + hidden * static_cast<long double>(geometry.query_width()));
    generated += ", weights generated";
  }
  require_memory(fmt::format("HDF5 file '{}' (its datasets{})", path, generated),
                 static_cast<std::uint64_t>(std::min(bytes, static_cast<long double>(std::uint64_t{1} << 62))),
                 [](std::uint64_t) { return std::string("a golden of a smaller layer or fewer tokens"); });
}

// Everything but /expected: root attributes, geometry, inputs, weights; the case validated.
static Golden read_case_part(const H5::H5File& file, const std::string& path) {
  const auto version = read_integer_attribute(file, "schema_version", path);
  if (!version || *version < 1 || *version > kSchemaVersion) {
    fail(path, "schema_version", version ? std::to_string(*version) : "absent",
         fmt::format("this attncheck reads schema versions 1 to {}", kSchemaVersion), "regenerate the file");
  }
  Golden golden{.test_case = Case{.plan = read_plan(file, path, *version), .inputs = {}, .weights = {}},
                .schema_version = *version,
                .expected = {}};
  require_room_for_reading(file, path, golden.test_case.geometry());
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
    try {  // its memory was counted with everything else the file needs (require_room_for_reading)
      test_case.weights = generate_weights(geometry, static_cast<std::uint64_t>(*weight_seed));
    } catch (const InputError& error) {
      throw InputError(fmt::format("HDF5 file '{}': {}", path, error.context()), error.violations());
    }
    // Rewritten with the flag kept, weights are named by golden.seed: only valid when the seeds agree (a
    // file whose weight seed differs is read faithfully, and rewritten with its weights stored).
    golden.weights_by_generator = static_cast<std::uint64_t>(*weight_seed) == golden.seed;
  } else {
    test_case.weights =
        read_parameters(file, "/weights", parameter_shapes(geometry, full_widths(geometry)), path, false);
  }
  try {
    validate_case(test_case);
  } catch (const InputError& error) {
    throw InputError(fmt::format("HDF5 file '{}': {}", path, error.context()), error.violations());
  }
  return golden;
}

// Every member of /expected is compared or refused by name: a dataset nothing reads (a projection gradient
// stored in full beside its sketch, a stray /expected/ranks/01 or ranks/-1, a tensor the geometry lacks)
// would be an answer the file claims and no check ever looks at. Allowed: the datasets `golden`'s expected
// tensors were read from, their parent groups, and the groups the writer makes even when it stores nothing
// in them (/expected/grads, /expected/ranks/<r>/grads of a rank holding only sketched projections).
static void refuse_uncompared_expected(const H5::H5File& file, const std::string& path, const Golden& golden) {
  std::set<std::string> datasets, groups = {"/expected", "/expected/grads"};
  const auto add_parents = [&](const std::string& member) {
    for (std::size_t slash = member.find('/', 1); slash != std::string::npos; slash = member.find('/', slash + 1)) {
      groups.insert(member.substr(0, slash));
    }
  };
  for (const auto& [name, shape] : expected_shapes(golden)) {  // names alone: nothing copied
    const std::string member =
        name.ends_with(kSketchSuffix)
            ? "/expected/sketches/" + name.substr(0, name.size() - kSketchSuffix.size())
            : "/expected/" + name;
    datasets.insert(member);
    add_parents(member);
  }
  for (std::int64_t r = 0; golden.test_case.plan.tp_size > 1 && r < golden.test_case.plan.tp_size; ++r) {
    add_parents(fmt::format("/expected/ranks/{}/grads/", r));
  }
  const std::string rule_suffix = fmt::format(
      "/expected holds only what a check compares (out, grads/..., decode/out, sketches/..., ranks/0 .. {}): "
      "golden/SCHEMA.md",
      golden.test_case.plan.tp_size - 1);
  const std::function<void(const H5::Group&, const std::string&)> walk = [&](const H5::Group& group,
                                                                            const std::string& group_path) {
    const hsize_t count = group.getNumObjs();
    for (hsize_t i = 0; i < count; ++i) {
      const std::string name = group.getObjnameByIdx(i);
      const std::string member = group_path + "/" + name;
      H5L_info_t link{};
      if (H5Lget_info(group.getId(), name.c_str(), &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD) {
        fail(path, member, "a soft or external link", "links are not followed, so nothing would compare it",
             "store the object itself, or drop the link");
      }
      const H5O_type_t type = group.childObjType(name);
      if (type == H5O_TYPE_GROUP && groups.count(member) > 0) {
        walk(group.openGroup(name), member);
        continue;
      }
      if (type == H5O_TYPE_DATASET && datasets.count(member) > 0) continue;
      // The one ambiguity worth naming: a tensor both sketched and stored in full. Which would count?
      const std::string sketch = "/expected/sketches/" + member.substr(std::string("/expected/").size());
      if (type == H5O_TYPE_DATASET && datasets.count(sketch) > 0) {
        fail(path, member, "present beside its sketch " + sketch,
             "a tensor is stored in full or as a sketch, never both: only the sketch would be compared",
             "drop one of them (attncheck writes sketches alone with --sketch-gradients / --sketch-activations)");
      }
      fail(path, member,
           type == H5O_TYPE_GROUP ? "a group" : type == H5O_TYPE_DATASET ? "a dataset" : "another kind of object",
           "is not a tensor of this golden that any check compares; " + rule_suffix, "drop it");
    }
  };
  walk(file.openGroup("/expected"), "/expected");
}

static Golden read_golden_unchecked(const std::string& path, IntegrityCheck integrity_check) {
  const H5::H5File file = open_for_reading(path, DeclaredData::counted_by_caller);  // require_room_for_reading
  Golden golden = read_case_part(file, path);
  const Case& test_case = golden.test_case;
  const Geometry& geometry = test_case.geometry();
  const Inputs& inputs = test_case.inputs;
  if (!exists(file, "/expected")) {
    fail(path, "/expected", "missing", "a golden file holds the expected answers (a case file does not)",
         "regenerate it with attncheck golden make; `golden run` reads case files too");
  }
  // How /expected/ranks is held (SCHEMA.md, "TP conventions"); absent: replicated-kv.
  if (const auto convention = read_string_attribute(file.openGroup("/geometry"), "tp_convention", path)) {
    const auto parsed = parse_tp_convention(*convention);
    if (!parsed) {
      fail(path, "/geometry@tp_convention", *convention, "must name a TP convention: " + tp_convention_names(),
           std::string(to_string(TpConvention::replicated_kv)) + " (or omit the attribute)");
    }
    golden.tp_convention = *parsed;
  }
  Result& expected = golden.expected;
  expected.implementation = "golden";
  const Shape activation_shape{inputs.batch, inputs.seq, geometry.hidden_size()};
  // Each of out, grads/x, decode/out is stored in full or (long goldens) as a per-token sketch; the
  // projection gradients likewise. A file sketches all three activations or none.
  golden.activations_sketched = exists(file, "/expected/sketches/out");
  golden.gradients_sketched = exists(file, "/expected/sketches/grads/q_proj");
  NamedTensors* sketches = golden.gradients_sketched ? &golden.sketches : nullptr;
  // A sketch the file's form does not call for would be silently ignored: the file disagrees with itself.
  for (const char* name : {"grads/x", "decode/out"}) {
    if (!golden.activations_sketched && exists(file, std::string("/expected/sketches/") + name)) {
      fail(path, std::string("/expected/sketches/") + name, "present",
           "activation sketches come as out, grads/x and decode/out together (/expected/sketches/out is absent)",
           "store all three sketched, or none");
    }
  }
  for (const char* name : {"k_proj", "v_proj", "o_proj"}) {
    if (!golden.gradients_sketched && exists(file, std::string("/expected/sketches/grads/") + name)) {
      fail(path, std::string("/expected/sketches/grads/") + name, "present",
           "projection sketches come as q/k/v/o_proj together (/expected/sketches/grads/q_proj is absent)",
           "store all four sketched, or none");
    }
  }
  const auto read_activation = [&](const std::string& name, const Shape& shape) {
    if (!golden.activations_sketched) return read_tensor(file, "/expected/" + name, path, shape);
    if (exists(file, "/expected/" + name)) {
      fail(path, "/expected/" + name, "present", "a golden whose /expected/sketches/out exists sketches it too",
           "store it as /expected/sketches/" + name + " only");
    }
    golden.sketches[name + std::string(kSketchSuffix)] =
        read_tensor(file, "/expected/sketches/" + name, path, sketch_shape(name, shape));
    return Tensor();
  };
  expected.out = read_activation("out", activation_shape);
  expected.gradients =
      Gradients{.x = read_activation("grads/x", activation_shape),
                .params = read_parameters(file, "/expected/grads", parameter_shapes(geometry, full_widths(geometry)),
                                          path, false, "grads/", sketches)};
  if (!inputs.decode.empty()) {
    const Shape decode_shape{inputs.batch, inputs.decode.total(), geometry.hidden_size()};
    expected.decode_out = read_activation("decode/out", decode_shape);
  } else {
    // Expected decoding without a schedule would never be compared: the file disagrees with itself.
    for (const char* stored : {"/expected/decode/out", "/expected/sketches/decode/out"}) {
      if (exists(file, stored)) {
        fail(path, stored, "present", "there is no /inputs/decode_schedule, so nothing decodes",
             "restore /inputs/decode_schedule, or drop the expected decoding");
      }
    }
  }
  // Decoding reproduces the first rows of the full forward (up to fp64 rounding); sketched, the first
  // rows' sketches (a token's sketch depends on that token's row alone). Not when a longrope call chooses
  // other factors than the full forward (core/model/rope_frequencies.hpp): nothing checks those rows here.
  if (!inputs.decode.empty() && decode_call_with_other_frequencies(golden.test_case) < 0) {
    const Tensor& decoded =
        golden.activations_sketched ? golden.sketches.at("decode/out#sketch") : *expected.decode_out;
    const Tensor& full = golden.activations_sketched ? golden.sketches.at("out#sketch") : expected.out;
    const std::int64_t total = inputs.decode.total(), width = full.shape[2];
    double scale = 0.0;
    for (double value : full.values) scale = std::max(scale, std::fabs(value));
    for (std::int64_t b = 0; b < inputs.batch; ++b) {
      for (std::int64_t i = 0; i < total * width; ++i) {
        const double decoded_value = decoded.values[b * total * width + i];
        const double full_value = full.values[b * inputs.seq * width + i];
        if (std::fabs(decoded_value - full_value) > tolerance(Precision::fp64, TensorRole::output, scale)) {
          fail(path, golden.activations_sketched ? "/expected/sketches/decode/out" : "/expected/decode/out",
               fmt::format("{} at batch {} flat {}", decoded_value, b, i),
               fmt::format("must equal the first rows of /expected/out ({} there)", full_value), "regenerate the file");
        }
      }
    }
  }
  const TpPlan& plan = test_case.plan;
  // Per-rank gradients exist for ranks 0 .. tp_size - 1 of a TP > 1 golden, and nowhere else: any other
  // would go unchecked (a tp_size edited to 1 must not silently drop them).
  for (const std::string ranks : {"/expected/ranks", "/expected/sketches/ranks"}) {
    if (plan.tp_size == 1 && exists(file, ranks)) {
      fail(path, ranks, "present", "/geometry@tp_size is 1: a golden without TP holds no per-rank gradients",
           "restore /geometry@tp_size, or drop " + ranks);
    }
    if (plan.tp_size > 1 && exists(file, fmt::format("{}/{}", ranks, plan.tp_size))) {
      fail(path, fmt::format("{}/{}", ranks, plan.tp_size), "present",
           fmt::format("/geometry@tp_size is {}: ranks are 0 .. {}", plan.tp_size, plan.tp_size - 1),
           "restore /geometry@tp_size, or drop the extra ranks");
    }
  }
  if (plan.tp_size > 1) {
    // Each rank's gradients have the shapes of what it holds under the golden's TP convention.
    std::vector<RankHoldings> holdings;
    try {
      holdings = rank_holdings(plan, golden.tp_convention);
    } catch (const InputError& error) {
      throw InputError(fmt::format("HDF5 file '{}': /geometry@tp_convention: {}", path, error.context()),
                       error.violations());
    }
    for (int r = 0; r < plan.tp_size; ++r) {
      expected.rank_gradients.push_back(read_parameters(file, fmt::format("/expected/ranks/{}/grads", r),
                                                        held_parameter_shapes(geometry, holdings[r]), path, false,
                                                        fmt::format("ranks/{}/grads/", r), sketches));
    }
  }
  refuse_uncompared_expected(file, path, golden);
  // Last, after the schema's own checks, whose messages name what is wrong more precisely.
  golden.integrity = integrity_check == IntegrityCheck::skip ? Integrity::absent : verify_integrity(file, path);
  return golden;
}

static void write_candidate_unchecked(const std::string& path, const NamedTensors& tensors,
                                      const CandidateDeclaration& declaration, const std::string& implementation) {
  H5::H5File file = create_for_writing(path);
  write_attribute(file, "schema_version", kCandidateSchemaVersion);
  write_attribute(file, "generator", implementation);
  H5::Group group = file.createGroup("/result");
  write_attribute(group, "precision", std::string(to_string(declaration.precision)));
  // 1 for an unsharded implementation: the only way a candidate is excused from per-rank gradients.
  if (declaration.tp_size) write_attribute(group, "tp_size", *declaration.tp_size);
  if (declaration.precision != Precision::fp64) {
    write_attribute(group, "rope_angles", std::string(to_string(declaration.rope_angles)));
  }
  write_attribute(group, "tp_convention", std::string(to_string(declaration.tp_convention)));
  if (!declaration.declined.empty()) {
    H5::Group declined = file.createGroup("/result/declined");
    for (const auto& [part, reason] : declaration.declined) write_attribute(declined, part, reason);
  }
  for (const auto& [name, tensor] : tensors) {
    // Create the intermediate groups of "grads/x", "ranks/3/grads/q_proj".
    for (std::size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
      const std::string group_path = "/result/" + name.substr(0, slash);
      if (!exists(file, group_path)) file.createGroup(group_path);
    }
    H5::Group parent = file.openGroup(
        name.find('/') == std::string::npos ? std::string("/result") : "/result/" + name.substr(0, name.rfind('/')));
    write_tensor(parent, name.substr(name.rfind('/') + 1), tensor);
  }
}

static CandidateDeclaration read_declaration(const H5::H5File& file, const std::string& path) {
  if (!exists(file, "/result")) {
    fail(path, "/result", absence(file, "/result"), "a candidate file keeps its tensors under /result",
         "see golden/SCHEMA.md");
  }
  const H5::Group group = open_group(file, "/result", path);
  CandidateDeclaration declaration;
  const std::string precision = read_string_attribute(group, "precision", path).value_or("");
  const auto parsed = parse_precision(precision);
  if (!parsed) {
    fail(path, "/result@precision", precision.empty() ? "absent" : precision, "must be fp64, fp32, bf16 or fp16",
         "fp64");
  }
  declaration.precision = *parsed;
  declaration.tp_size = read_integer_attribute(group, "tp_size", path);
  if (const auto angles = read_string_attribute(group, "rope_angles", path)) {
    const auto parsed_angles = parse_rope_angles(*angles);
    if (!parsed_angles) fail(path, "/result@rope_angles", *angles, "must be float32 or float64", "float32");
    declaration.rope_angles = *parsed_angles;
  }
  if (const auto convention = read_string_attribute(group, "tp_convention", path)) {
    const auto parsed_convention = parse_tp_convention(*convention);
    if (!parsed_convention) {
      fail(path, "/result@tp_convention", *convention, "must name a TP convention: " + tp_convention_names(),
           std::string(to_string(TpConvention::replicated_kv)) + " (or omit the attribute)");
    }
    declaration.tp_convention = *parsed_convention;
  }
  // Declined parts (SCHEMA.md, "Candidate files"): well formed, never `out`, and none also supplied.
  if (exists(file, "/result/declined")) {
    const H5::Group declined = file.openGroup("/result/declined");
    for (const std::string& part : attribute_names(declined, path, "/result/declined")) {
      const std::string field = "/result/declined@" + part;
      const std::string reason = read_string_attribute(declined, part, path).value_or("");
      if (const std::string problem = declined_part_problem(part, reason); !problem.empty()) {
        fail(path, field, reason, problem, "decline grads/..., decode or ranks/... with a reason");
      }
      if (exists(file, "/result/" + part)) {
        fail(path, field, reason,
             fmt::format("a candidate supplies no part it declines, and /result/{} exists (it disagrees with itself)",
                         part),
             "drop /result/" + part + ", or the declined entry");
      }
      declaration.declined[part] = reason;
    }
  }
  return declaration;
}

static Candidate read_candidate_unchecked(const std::string& path, const NamedTensors& expected_names) {
  const H5::H5File file = open_for_reading(path);
  Candidate candidate;
  static_cast<CandidateDeclaration&>(candidate) = read_declaration(file, path);
  for (const auto& [expected_name, expected] : expected_names) {
    // A sketched expectation is met by the candidate's full gradient (compare() sketches it); a
    // candidate's own "#sketch" datasets are never read.
    const std::string name = expected_name.ends_with(kSketchSuffix)
                                 ? expected_name.substr(0, expected_name.size() - kSketchSuffix.size())
                                 : expected_name;
    const std::string dataset = "/result/" + name;
    if (exists(file, dataset)) {
      candidate.tensors[name] = read_tensor(file, dataset, path, std::nullopt, /*allow_non_finite=*/true);
    }
  }
  return candidate;
}

namespace {

NamedTensors all_expected_tensors(const Golden& golden) {
  NamedTensors tensors = named_tensors(golden.expected);
  if (!golden.gradients_sketched && !golden.activations_sketched) return tensors;
  if (!golden.sketches.empty()) {  // read from a file: the sketched tensors of `expected` are empty
    for (const auto& [name, tensor] : golden.sketches) {
      tensors.erase(name.substr(0, name.size() - kSketchSuffix.size()));
      tensors[name] = tensor;
    }
    return tensors;
  }
  NamedTensors sketched;  // about to be written: sketch the full gradients
  for (auto& [name, tensor] : tensors) {
    if ((golden.gradients_sketched && sketchable(name)) ||
        (golden.activations_sketched && sketchable_activation(name))) {
      sketched[name + std::string(kSketchSuffix)] = sketch(name, tensor);
    } else {
      sketched[name] = std::move(tensor);
    }
  }
  return sketched;
}

}  // namespace

std::map<std::string, Shape, TensorNameOrder> expected_shapes(const Golden& golden) {
  std::map<std::string, Shape, TensorNameOrder> shapes;
  for_each_named_tensor(golden.expected, [&](const std::string& name, const Tensor& tensor) { shapes[name] = tensor.shape; });
  for (const auto& [name, sketch] : golden.sketches) {  // in place of the tensors they sketch
    shapes.erase(name.substr(0, name.size() - kSketchSuffix.size()));
    shapes[name] = sketch.shape;
  }
  return shapes;
}

NamedTensors expected_tensors(const Golden& golden, bool include_rank_gradients,
                              std::optional<TpConvention> convention) {
  NamedTensors tensors = all_expected_tensors(golden);
  if (!include_rank_gradients) {
    std::erase_if(tensors, [](const auto& entry) { return entry.first.starts_with("ranks/"); });
    return tensors;
  }
  if (convention && *convention != golden.tp_convention) {
    return regroup_rank_tensors(tensors, golden.test_case.plan, golden.tp_convention, *convention);
  }
  return tensors;
}

// HDF5's C++ exceptions do not derive from std::exception: any that the checked reads above did not
// already turn into a named InputError (a damaged file can fail anywhere) is turned into one here, so
// no HDF5 failure escapes as a crash.
template <class Function>
auto translating_hdf5_errors(const std::string& path, const char* action, Function&& function) {
  try {
    return function();
  } catch (const H5::Exception& exception) {
    fail(path, "file", action, "the HDF5 library reported an error (damaged file, or no space to write?)",
         exception.getDetailMsg());
  } catch (const std::bad_alloc&) {
    fail(path, "file", action, "the file describes more data than fits in memory", "check its shapes");
  }
}

void write_golden(const std::string& path, const Golden& golden) {
  translating_hdf5_errors(path, "write failed", [&] {
    write_golden_unchecked(path, golden);  // closes the file
    seal_integrity(path);
  });
}

void write_case(const std::string& path, const Case& test_case, const std::string& generator) {
  translating_hdf5_errors(path, "write failed", [&] {
    {
      H5::H5File file = create_for_writing(path);
      write_case_part(file, Golden{.test_case = test_case, .expected = {}, .generator = generator});
    }
    seal_integrity(path);
  });
}

Golden read_golden(const std::string& path, IntegrityCheck integrity_check) {
  return translating_hdf5_errors(path, "read failed", [&] { return read_golden_unchecked(path, integrity_check); });
}

Case read_case(const std::string& path) {
  return translating_hdf5_errors(path, "read failed", [&] {
    const H5::H5File file = open_for_reading(path, DeclaredData::counted_by_caller);  // require_room_for_reading
    Case test_case = read_case_part(file, path).test_case;
    verify_integrity(file, path);  // after the schema's own checks, whose messages are more specific
    return test_case;
  });
}

void write_candidate(const std::string& path, const NamedTensors& tensors, const CandidateDeclaration& declaration,
                     const std::string& implementation) {
  translating_hdf5_errors(path, "write failed",
                          [&] { write_candidate_unchecked(path, tensors, declaration, implementation); });
}

void write_candidate(const std::string& path, const Result& result, Precision precision) {
  write_candidate(path, named_tensors(result),
                  {.precision = precision,
                   .tp_size = std::max<std::int64_t>(1, static_cast<std::int64_t>(result.rank_gradients.size()))},
                  result.implementation);
}

CandidateDeclaration read_candidate_declaration(const std::string& path) {
  return translating_hdf5_errors(path, "read failed", [&] { return read_declaration(open_for_reading(path), path); });
}

Candidate read_candidate(const std::string& path, const NamedTensors& expected_names) {
  return translating_hdf5_errors(path, "read failed", [&] { return read_candidate_unchecked(path, expected_names); });
}

}  // namespace attncheck::golden
