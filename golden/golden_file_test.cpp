// Golden files: write/read round trip, the omitted-head_dim case, re-deriving from the reference, and
// damaged files (each an InputError naming the object, never a crash).
#include "golden/golden_file.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/compare/compare.hpp"
#include "core/compare/sketch.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/resources/memory_room.hpp"
#include "golden/hdf5_io.hpp"
#include "reference/reference.hpp"

namespace attncheck::golden {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attncheck_golden_test_" + name + ".h5")).string();
}

Golden make_golden(const GeometrySpec& spec, std::int64_t tp_size, std::uint64_t seed) {
  const Geometry geometry = resolve_geometry(spec);
  const Case test_case = generate_case(geometry, {.seed = seed,
                                                  .batch = 2,
                                                  .seq = 5,
                                                  .pad_keys = true,
                                                  .decode = {.prefill = 3, .steps = {1, 1}},
                                                  .tp_size = tp_size});
  Result expected = tp_size > 1 ? reference::run_reference_tp(test_case) : reference::run_reference(test_case);
  return {.test_case = test_case, .expected = std::move(expected), .seed = seed, .generator = "attncheck test"};
}

// GQA with TP 4 over 2 KV heads... replicated twice, QK-norm, biases, window, padding and decoding.
const GeometrySpec kSpec = {.hidden_size = 10,
                            .num_heads = 4,
                            .num_kv_heads = 2,
                            .head_dim = 6,
                            .qk_norm = QkNorm::rms,
                            .qkv_bias = true,
                            .out_bias = true,
                            .sliding_window = 3};

std::string written(const std::string& name, const Golden& golden) {
  const std::string path = temp_path(name);
  write_golden(path, golden);
  return path;
}

// The layer a geometry describes: what the file must preserve. (GeometrySpec itself may differ: a
// file stores the resolved rotary_dim, not the rotary_pct it came from.)
void expect_same_layer(const Geometry& a, const Geometry& b) {
  EXPECT_EQ(a.hidden_size(), b.hidden_size());
  EXPECT_EQ(a.num_heads(), b.num_heads());
  EXPECT_EQ(a.num_kv_heads(), b.num_kv_heads());
  EXPECT_EQ(a.head_dim(), b.head_dim());
  EXPECT_EQ(a.head_dim_source(), b.head_dim_source());
  EXPECT_EQ(a.rotary_dim(), b.rotary_dim());
  EXPECT_EQ(a.rope_theta(), b.rope_theta());
  EXPECT_EQ(a.rope_style(), b.rope_style());
  EXPECT_EQ(a.qk_norm(), b.qk_norm());
  EXPECT_EQ(a.qk_norm_eps(), b.qk_norm_eps());
  EXPECT_EQ(a.qkv_bias(), b.qkv_bias());
  EXPECT_EQ(a.out_bias(), b.out_bias());
  EXPECT_EQ(a.scale(), b.scale());
  EXPECT_EQ(a.softcap(), b.softcap());
  EXPECT_EQ(a.sliding_window(), b.sliding_window());
  EXPECT_EQ(a.causal(), b.causal());
}

void expect_input_error_naming(const std::string& path, const std::string& field) {
  try {
    read_golden(path);
    ADD_FAILURE() << "read_golden accepted " << path << "; expected an error naming " << field;
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field(field)) << error.what();
  }
}

TEST(GoldenFile, RoundTripKeepsEveryValue) {
  const Golden golden = make_golden(kSpec, 4, 7);
  const Golden read = read_golden(written("round_trip", golden));
  expect_same_layer(read.test_case.geometry(), golden.test_case.geometry());
  EXPECT_EQ(read.test_case.plan.tp_size, 4);
  EXPECT_EQ(read.test_case.inputs, golden.test_case.inputs);
  EXPECT_EQ(read.test_case.weights, golden.test_case.weights);
  EXPECT_EQ(read.expected.out, golden.expected.out);
  EXPECT_EQ(read.expected.gradients, golden.expected.gradients);
  EXPECT_EQ(read.expected.decode_out, golden.expected.decode_out);
  EXPECT_EQ(read.expected.rank_gradients, golden.expected.rank_gradients);
  EXPECT_EQ(read.seed, 7u);
  EXPECT_EQ(read.generator, "attncheck test");
}

// Latent attention (schema version 3): q/k heads 5 + 2 wide, v heads 3, at TP 2, with and without q_lora_rank.
GeometrySpec latent_spec(std::optional<std::int64_t> q_lora_rank) {
  return {.hidden_size = 10,
          .num_heads = 4,
          .rope_scaling = {.type = RopeScalingType::yarn,
                           .factor = 40.0,
                           .original_max_position_embeddings = 4096,
                           .mscale = 1.0,
                           .mscale_all_dim = 1.0},
          .rope_style = RopeStyle::interleaved,
          .latent = LatentAttentionSpec{.q_lora_rank = q_lora_rank,
                                        .kv_lora_rank = 4,
                                        .qk_nope_head_dim = 5,
                                        .qk_rope_head_dim = 2,
                                        .v_head_dim = 3}};
}

TEST(GoldenFile, LatentAttentionRoundTripsAsSchemaVersion3) {
  for (const std::optional<std::int64_t> q_lora_rank : {std::optional<std::int64_t>(6), std::optional<std::int64_t>()}) {
    Golden golden = make_golden(latent_spec(q_lora_rank), 2, 31);
    golden.weights_by_generator = q_lora_rank.has_value();
    const std::string path = written(q_lora_rank ? "latent_q_lora" : "latent_q_proj", golden);
    {
      const H5::H5File file = open_for_reading(path);
      EXPECT_EQ(read_integer_attribute(file, "schema_version", path), 3);
      EXPECT_EQ(exists(file, "/weights/q_proj"), !q_lora_rank);
      EXPECT_FALSE(exists(file, "/weights/k_proj"));
    }
    const Golden read = read_golden(path);
    ASSERT_TRUE(read.test_case.geometry().is_latent());
    expect_same_layer(read.test_case.geometry(), golden.test_case.geometry());
    EXPECT_EQ(read.test_case.geometry().latent(), golden.test_case.geometry().latent());
    EXPECT_EQ(read.test_case.weights, golden.test_case.weights);
    EXPECT_EQ(read.expected.out, golden.expected.out);
    EXPECT_EQ(read.expected.gradients, golden.expected.gradients);
    EXPECT_EQ(read.expected.decode_out, golden.expected.decode_out);
    EXPECT_EQ(read.expected.rank_gradients, golden.expected.rank_gradients);
  }
}

TEST(GoldenFile, LatentAttentionFilesThatDisagreeWithThemselvesAreRefused) {
  const std::string path = written("latent_damaged", make_golden(latent_spec(6), 2, 32));
  const auto edit = [&](const std::string& name, const auto& change) {
    const std::string copy = temp_path(name);
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    {
      H5::H5File file(copy, H5F_ACC_RDWR);
      change(file);
    }
    return copy;
  };
  const auto replace = [](H5::H5File& file, const char* name, auto value) {
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr(name);
    write_attribute(group, name, value);
  };
  expect_input_error_naming(
      edit("latent_rank_absent", [](H5::H5File& file) { file.openGroup("/geometry").removeAttr("kv_lora_rank"); }),
      "/geometry@kv_lora_rank");
  expect_input_error_naming(edit("latent_head_dim", [&](H5::H5File& file) { replace(file, "head_dim", std::int64_t{3}); }),
                            "/geometry@head_dim");
  expect_input_error_naming(edit("latent_rotary", [&](H5::H5File& file) { replace(file, "rotary_dim", std::int64_t{4}); }),
                            "/geometry@rotary_dim");
  expect_input_error_naming(
      edit("latent_in_version_2",
           [&](H5::H5File& file) {
             file.removeAttr("schema_version");
             write_attribute(file, "schema_version", std::int64_t{2});
           }),
      "/geometry@attention");
  expect_input_error_naming(edit("latent_k_proj",
                                 [](H5::H5File& file) {
                                   H5::Group group = file.openGroup("/weights");
                                   write_tensor(group, "k_proj", Tensor({28, 10}));
                                 }),
                            "/weights/k_proj");
  // The plain fused-QKV convention cannot hold a latent layer's rank gradients.
  expect_input_error_naming(
      edit("latent_megatron",
           [&](H5::H5File& file) { replace(file, "tp_convention", std::string("megatron-equal-block")); }),
      "tp_convention");
}

// A context-parallel layout (SCHEMA.md "Context-parallel layouts") round-trips; attributes that contradict
// each other or the plan are refused, naming the attribute.
TEST(GoldenFile, ContextParallelLayoutsRoundTripAndContradictionsAreRefused) {
  const Geometry geometry = resolve_geometry(kSpec);
  const CpSpec ring{.cp_size = 2, .scheme = CpScheme::ring, .load_balanced = false};
  const Case test_case = generate_case(geometry, {.seed = 3, .batch = 2, .seq = 5, .tp_size = 2, .context_parallel = ring});
  const std::string path = written("context_parallel", {.test_case = test_case,
                                                        .expected = reference::run_reference_tp(test_case),
                                                        .seed = 3,
                                                        .generator = "attncheck test"});
  EXPECT_EQ(read_golden(path).test_case.context_parallel, ring);
  EXPECT_FALSE(read_golden(written("no_context_parallel", make_golden(kSpec, 2, 3))).test_case.context_parallel);
  const auto edit = [&](const std::string& name, const auto& change) {
    const std::string copy = temp_path(name);
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    {
      H5::H5File file(copy, H5F_ACC_RDWR);
      H5::Group group = file.openGroup("/geometry");
      change(group);
    }
    return copy;
  };
  const auto replace = [](H5::Group& group, const char* name, auto value) {
    group.removeAttr(name);
    write_attribute(group, name, value);
  };
  expect_input_error_naming(edit("cp_size_absent", [](H5::Group& group) { group.removeAttr("cp_size"); }),
                            "/geometry@cp_size");
  expect_input_error_naming(edit("cp_scheme_absent", [](H5::Group& group) { group.removeAttr("cp_scheme"); }),
                            "/geometry@cp_scheme");
  expect_input_error_naming(
      edit("cp_scheme_unknown", [&](H5::Group& group) { replace(group, "cp_scheme", std::string("zigzag")); }),
      "/geometry@cp_scheme");
  expect_input_error_naming(edit("cp_chunks_absent", [](H5::Group& group) { group.removeAttr("cp_chunks"); }),
                            "/geometry@cp_chunks");
  expect_input_error_naming(
      edit("cp_chunks_ulysses", [&](H5::Group& group) { replace(group, "cp_scheme", std::string("ulysses")); }),
      "/geometry@cp_chunks");
  // TP 2 leaves 2 query heads and 1 KV head per rank: Ulysses over 4 CP ranks would split a head.
  expect_input_error_naming(edit("cp_ulysses_impossible",
                                 [&](H5::Group& group) {
                                   replace(group, "cp_scheme", std::string("ulysses"));
                                   group.removeAttr("cp_chunks");
                                   replace(group, "cp_size", std::int64_t{4});
                                 }),
                            "cp_size");
}

TEST(GoldenFile, GeneratedWeightsAreNamedNotStoredAndComeBackExactly) {
  Golden golden = make_golden(kSpec, 2, 12);
  golden.weights_by_generator = true;
  const std::string path = written("generated", golden);
  {
    const H5::H5File file = open_for_reading(path);
    EXPECT_FALSE(exists(file, "/weights/q_proj"));
  }
  const Golden read = read_golden(path);
  EXPECT_TRUE(read.weights_by_generator);
  EXPECT_EQ(read.test_case.weights, golden.test_case.weights);
  EXPECT_LT(std::filesystem::file_size(path), std::filesystem::file_size(written("stored", make_golden(kSpec, 2, 12))));
  // Weights that are not the generator's cannot be written as generated.
  Golden edited_weights = golden;
  edited_weights.test_case.weights.q_proj.values[0] += 1.0;
  EXPECT_THROW(write_golden(temp_path("not_generated"), edited_weights), std::logic_error);
}

// What `compare` reads: the answers and the case without the weights the file names by the generator, which
// case_with_weights makes exactly; stored weights are read whatever is asked, and a weight generator the reader
// does not know is refused as before.
TEST(GoldenFile, GeneratedWeightsLeftOutComeBackFromTheirSeed) {
  Golden golden = make_golden(kSpec, 2, 12);
  golden.weights_by_generator = true;
  const std::string path = written("generated_left_out", golden);
  const Golden whole = read_golden(path);
  const Golden light = read_golden(path, IntegrityCheck::verify, GeneratedWeights::left_out);
  ASSERT_TRUE(light.weights_left_out_seed.has_value());
  EXPECT_EQ(*light.weights_left_out_seed, golden.seed);
  EXPECT_TRUE(light.test_case.weights.q_proj.values.empty());
  EXPECT_TRUE(light.test_case.weights.o_proj.values.empty());
  EXPECT_EQ(light.expected.out, whole.expected.out);
  ASSERT_TRUE(light.expected.gradients.has_value() && whole.expected.gradients.has_value());
  EXPECT_EQ(*light.expected.gradients, *whole.expected.gradients);
  EXPECT_EQ(light.test_case.inputs.x, whole.test_case.inputs.x);
  EXPECT_EQ(light.verified_digest, whole.verified_digest);
  EXPECT_FALSE(whole.weights_left_out_seed.has_value());
  std::optional<Case> completed;
  EXPECT_EQ(case_with_weights(light, completed).weights, whole.test_case.weights);
  std::optional<Case> untouched;
  EXPECT_EQ(&case_with_weights(whole, untouched), &whole.test_case);

  // A layer too large for a golden is refused before its weights, left out or not (2^28 parameters at most, so
  // weights left out can always be generated later: the generator takes 2^31).
  Golden generated_inputs = golden;
  generated_inputs.inputs_by_generator = true;
  const std::string too_large = written("too_large_to_generate", generated_inputs);
  {
    H5::H5File file(too_large, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr("hidden_size");
    write_attribute(group, "hidden_size", std::int64_t{65536});
    group.removeAttr("num_attention_heads");
    write_attribute(group, "num_attention_heads", std::int64_t{4096});  // q_proj and o_proj: 2 x 65536 x 24576
  }
  try {
    read_golden(too_large, IntegrityCheck::verify, GeneratedWeights::left_out);
    ADD_FAILURE() << "a layer of 3.2e9 parameters was read with its generated weights left out";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("/geometry")) << error.what();
  }

  const std::string stored = written("stored_not_left_out", make_golden(kSpec, 2, 12));
  const Golden stored_light = read_golden(stored, IntegrityCheck::verify, GeneratedWeights::left_out);
  EXPECT_FALSE(stored_light.weights_left_out_seed.has_value());
  EXPECT_EQ(stored_light.test_case.weights, golden.test_case.weights);

  {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/weights");
    group.removeAttr("generator");
    write_attribute(group, "generator", std::string("numpy-default-rng"));
  }
  try {
    read_golden(path, IntegrityCheck::skip, GeneratedWeights::left_out);
    ADD_FAILURE() << "an unknown weight generator was accepted when its weights were left out";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("/weights@generator")) << error.what();
  }
}

TEST(GoldenFile, SketchedGradientsRoundTripAndStillLocaliseHeads) {
  Golden golden = make_golden(kSpec, 4, 15);
  golden.weights_by_generator = true;
  golden.gradients_sketched = true;
  const std::string path = written("sketched", golden);
  const Golden read = read_golden(path);
  ASSERT_TRUE(read.gradients_sketched);
  const NamedTensors expected = expected_tensors(read);
  EXPECT_EQ(expected, expected_tensors(golden));  // the sketches written are the sketches read
  EXPECT_TRUE(expected.contains("grads/o_proj#sketch"));
  EXPECT_TRUE(expected.contains("ranks/3/grads/k_proj#sketch"));
  EXPECT_FALSE(expected.contains("grads/q_proj"));
  EXPECT_TRUE(expected.contains("grads/q_bias"));  // small gradients stay in full
  // A correct implementation's full gradients pass against the sketches ...
  EXPECT_TRUE(
      compare(read.test_case, expected, named_tensors(reference::run_reference_tp(read.test_case)), Precision::fp64)
          .passed());
  // ... and one with query heads 2 and 3 exchanged is caught, on the right heads.
  Case permuted = read.test_case;
  auto& q = permuted.weights.q_proj.values;
  std::swap_ranges(q.begin() + 2 * 6 * 10, q.begin() + 3 * 6 * 10, q.begin() + 3 * 6 * 10);
  const CompareReport report =
      compare(read.test_case, expected, named_tensors(reference::run_reference_tp(permuted)), Precision::fp64);
  EXPECT_FALSE(report.passed());
  const auto q_sketch = std::find_if(report.tensors.begin(), report.tensors.end(),
                                     [](const TensorReport& t) { return t.name == "grads/q_proj#sketch"; });
  ASSERT_NE(q_sketch, report.tensors.end());
  EXPECT_EQ(q_sketch->status, TensorStatus::mismatch);
  EXPECT_EQ(q_sketch->query_heads, (std::vector<std::int64_t>{2, 3}));
  // Through a candidate file, as `attncheck compare` reads it: the full gradients meet the sketches.
  const std::string candidate_path = temp_path("sketched_candidate");
  write_candidate(candidate_path, reference::run_reference_tp(read.test_case), Precision::fp64);
  const Candidate candidate = read_candidate(candidate_path, expected);
  EXPECT_EQ(candidate.tp_size, 4);
  EXPECT_TRUE(candidate.tensors.contains("grads/q_proj"));
  EXPECT_TRUE(compare(read.test_case, expected, candidate.tensors, Precision::fp64).passed());
  // A gradient padded with zero columns has the same sketch, but not the right shape.
  NamedTensors padded = candidate.tensors;
  Tensor& q_grad = padded["grads/q_proj"];
  Tensor wider({q_grad.shape[0], q_grad.shape[1] + 1});
  for (std::int64_t r = 0; r < q_grad.shape[0]; ++r) {
    std::copy_n(q_grad.values.begin() + r * q_grad.shape[1], q_grad.shape[1],
                wider.values.begin() + r * wider.shape[1]);
  }
  q_grad = wider;
  const CompareReport padded_report = compare(read.test_case, expected, padded, Precision::fp64);
  EXPECT_FALSE(padded_report.passed());
  EXPECT_LT(std::filesystem::file_size(path),
            std::filesystem::file_size(written("full_15", make_golden(kSpec, 4, 15))));
}

TEST(GoldenFile, GeneratedInputsAndSketchedActivationsRoundTripAndStillLocaliseTokens) {
  Golden golden = make_golden(kSpec, 4, 16);
  golden.weights_by_generator = true;
  golden.inputs_by_generator = true;
  golden.gradients_sketched = true;
  golden.activations_sketched = true;
  const std::string path = written("generated_inputs", golden);
  const Golden read = read_golden(path);
  EXPECT_TRUE(read.inputs_by_generator);
  EXPECT_TRUE(read.activations_sketched);
  EXPECT_EQ(read.test_case.inputs, golden.test_case.inputs);  // x and dout regenerated exactly
  {
    const H5::H5File file(path, H5F_ACC_RDONLY);
    EXPECT_FALSE(exists(file, "/inputs/x"));
    EXPECT_FALSE(exists(file, "/expected/out"));
    EXPECT_FALSE(exists(file, "/expected/decode/out"));
  }
  const NamedTensors expected = expected_tensors(read);
  EXPECT_EQ(expected, expected_tensors(golden));
  for (const char* name : {"out#sketch", "grads/x#sketch", "decode/out#sketch"}) {
    ASSERT_TRUE(expected.contains(name)) << name;
    EXPECT_EQ(expected.at(name).shape.back(), 1 + kSketchProjections);
  }
  EXPECT_FALSE(expected.contains("out"));
  EXPECT_TRUE(
      compare(read.test_case, expected, named_tensors(reference::run_reference_tp(read.test_case)), Precision::fp64)
          .passed());
  // The last token of batch row 0 changed (its x moved; row 0 is never padded, and a last token is a key
  // of itself only): out's sketch fails there, and only there.
  Case moved = read.test_case;
  const std::int64_t hidden = moved.geometry().hidden_size(), seq = moved.inputs.seq;
  for (std::int64_t c = 0; c < hidden; ++c) moved.inputs.x.values[(seq - 1) * hidden + c] += 0.5;
  const CompareReport report =
      compare(read.test_case, expected, named_tensors(reference::run_reference_tp(moved)), Precision::fp64);
  const auto out = std::find_if(report.tensors.begin(), report.tensors.end(),
                                [](const TensorReport& t) { return t.name == "out#sketch"; });
  ASSERT_NE(out, report.tensors.end());
  EXPECT_EQ(out->status, TensorStatus::mismatch);
  EXPECT_EQ(out->batch_rows, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(out->positions, (std::vector<std::int64_t>{seq - 1}));
  EXPECT_LT(std::filesystem::file_size(path),
            std::filesystem::file_size(written("stored_16", make_golden(kSpec, 4, 16))));
  // Inputs that are not the generator's cannot be written as generated.
  Golden edited_inputs = golden;
  edited_inputs.test_case.inputs.dout.values[3] += 1.0;
  EXPECT_THROW(write_golden(temp_path("inputs_not_generated"), edited_inputs), std::logic_error);
}

TEST(GoldenFile, GeneratedInputsThatDisagreeWithThemselvesAreRefused) {
  Golden golden = make_golden(kSpec, 1, 17);
  golden.inputs_by_generator = true;
  golden.activations_sketched = true;
  const std::string path = written("generated_inputs_damaged", golden);
  const auto edit = [&](const std::string& name, const auto& change) {
    const std::string copy = temp_path(name);
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    {
      H5::H5File file(copy, H5F_ACC_RDWR);
      change(file);
    }
    return copy;
  };
  expect_input_error_naming(edit("input_generator",
                                 [](H5::H5File& file) {
                                   H5::Group group = file.openGroup("/inputs");
                                   group.removeAttr("generator");
                                   write_attribute(group, "generator", std::string("torch.randn"));
                                 }),
                            "/inputs@generator");
  expect_input_error_naming(edit("input_distribution",
                                 [](H5::H5File& file) {
                                   H5::Group group = file.openGroup("/inputs");
                                   group.removeAttr("activations");
                                   write_attribute(group, "activations", std::string("gaussian"));
                                 }),
                            "/inputs@activations");
  expect_input_error_naming(edit("input_seed", [](H5::H5File& file) { file.openGroup("/inputs").removeAttr("seed"); }),
                            "/inputs@seed");
  expect_input_error_naming(edit("input_x_too",
                                 [](H5::H5File& file) {
                                   H5::Group group = file.openGroup("/inputs");
                                   write_tensor(group, "x", Tensor({2, 5, 10}));
                                 }),
                            "/inputs/x");
  expect_input_error_naming(edit("positions_rank",
                                 [](H5::H5File& file) {
                                   ASSERT_GE(H5Ldelete(file.getId(), "/inputs/position_ids", H5P_DEFAULT), 0);
                                   H5::Group group = file.openGroup("/inputs");
                                   write_integers(group, "position_ids", {0, 1, 2}, {3});
                                 }),
                            "/inputs/position_ids");
  expect_input_error_naming(edit("full_and_sketched_out",
                                 [](H5::H5File& file) {
                                   H5::Group group = file.openGroup("/expected");
                                   write_tensor(group, "out", Tensor({2, 5, 10}));
                                 }),
                            "/expected/out");
  expect_input_error_naming(edit("sketch_shape",
                                 [](H5::H5File& file) {
                                   ASSERT_GE(H5Ldelete(file.getId(), "/expected/sketches/grads/x", H5P_DEFAULT), 0);
                                   H5::Group group = file.openGroup("/expected/sketches/grads");
                                   write_tensor(group, "x", Tensor({2, 5, 3}));
                                 }),
                            "/expected/sketches/grads/x");
}

TEST(GoldenFile, CandidatesDeclareTheirAnglePolicy) {
  const Golden golden = make_golden(kSpec, 1, 18);
  const NamedTensors expected = expected_tensors(golden, false);
  const NamedTensors tensors = named_tensors(golden.expected);
  const std::string declared = temp_path("angles_float64");
  write_candidate(declared, tensors, {.precision = Precision::bf16, .tp_size = 1, .rope_angles = RopeAngles::float64},
                  "test");
  EXPECT_EQ(read_candidate(declared, expected).rope_angles, RopeAngles::float64);
  const std::string silent = temp_path("angles_default");
  write_candidate(silent, tensors, {.precision = Precision::bf16, .tp_size = 1}, "test");
  EXPECT_EQ(read_candidate(silent, expected).rope_angles, RopeAngles::float32);  // the default, the looser
  {
    H5::H5File file(declared, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/result");
    group.removeAttr("rope_angles");
    write_attribute(group, "rope_angles", std::string("bfloat16"));
  }
  try {
    read_candidate(declared, expected);
    ADD_FAILURE() << "an unknown rope_angles was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("/result@rope_angles"), std::string::npos) << error.what();
  }
}

// SCHEMA.md "TP conventions": per-rank gradients held as megatron-equal-block round-trip with their
// holdings' shapes (a rank holding no row of a tensor stores none), the attribute absent means
// replicated-kv, and an unknown convention is refused naming the valid ones, in goldens and candidates.
TEST(GoldenFile, TpConventionsShapeThePerRankGradients) {
  // TP 4 over 2 KV heads of head_dim 6, 4 query heads: blocks of (4 + 4) * 6 / 4 = 12 fused rows, so
  // ranks 0 and 2 hold two query heads each, ranks 1 and 3 one KV group's K and V and nothing of q_proj.
  Golden golden = make_golden(kSpec, 4, 23);
  golden.tp_convention = TpConvention::megatron_equal_block;
  EXPECT_THROW(write_golden(temp_path("megatron_unregrouped"), golden), std::logic_error);  // shaped replicated
  golden.expected.rank_gradients = regroup_rank_gradients(golden.expected.rank_gradients, golden.test_case.plan,
                                                          TpConvention::replicated_kv, golden.tp_convention);
  const std::string path = written("megatron", golden);
  {
    const H5::H5File file = open_for_reading(path);
    EXPECT_FALSE(exists(file, "/expected/ranks/1/grads/q_proj"));
    EXPECT_FALSE(exists(file, "/expected/ranks/0/grads/k_bias"));
    EXPECT_TRUE(exists(file, "/expected/ranks/1/grads/k_bias"));
  }
  const Golden read = read_golden(path);
  EXPECT_EQ(read.tp_convention, TpConvention::megatron_equal_block);
  EXPECT_EQ(read.expected.rank_gradients, golden.expected.rank_gradients);
  EXPECT_EQ(read.expected.rank_gradients[1].q_proj.shape, (Shape{0, 10}));
  // Regrouped back, the expectations are the replicated-kv ones the reference computed.
  EXPECT_EQ(expected_tensors(read, true, TpConvention::replicated_kv),
            expected_tensors(make_golden(kSpec, 4, 23), true, TpConvention::replicated_kv));
  // A stored tensor of a rank that holds none of its rows: the file disagrees with its convention.
  const std::string extra = temp_path("megatron_extra_row");
  std::filesystem::copy_file(path, extra, std::filesystem::copy_options::overwrite_existing);
  {
    H5::H5File file(extra, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/expected/ranks/1/grads");
    write_tensor(group, "q_proj", Tensor({6, 10}));
  }
  expect_input_error_naming(extra, "/expected/ranks/1/grads/q_proj");
  // Without the attribute a golden is replicated-kv, and this one's per-rank shapes then disagree.
  const std::string absent = temp_path("megatron_attribute_absent");
  std::filesystem::copy_file(path, absent, std::filesystem::copy_options::overwrite_existing);
  {
    H5::H5File file(absent, H5F_ACC_RDWR);
    file.openGroup("/geometry").removeAttr("tp_convention");
  }
  expect_input_error_naming(absent, "/expected/ranks/0/grads/q_proj");
  const std::string unknown = temp_path("unknown_convention");
  std::filesystem::copy_file(path, unknown, std::filesystem::copy_options::overwrite_existing);
  {
    H5::H5File file(unknown, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr("tp_convention");
    write_attribute(group, "tp_convention", std::string("megatron"));
  }
  try {
    read_golden(unknown);
    ADD_FAILURE() << "an unknown tp_convention was accepted";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("/geometry@tp_convention")) << error.what();
    EXPECT_NE(std::string(error.what()).find("replicated-kv, megatron-equal-block"), std::string::npos) << error.what();
  }
  // Candidates: declared, or replicated-kv when silent; unknown names refused.
  const std::string candidate = temp_path("megatron_candidate");
  write_candidate(candidate, named_tensors(read.expected),
                  {.tp_size = 4, .tp_convention = TpConvention::megatron_equal_block}, "test");
  EXPECT_EQ(read_candidate_declaration(candidate).tp_convention, TpConvention::megatron_equal_block);
  {
    H5::H5File file(candidate, H5F_ACC_RDWR);
    file.openGroup("/result").removeAttr("tp_convention");
  }
  EXPECT_EQ(read_candidate_declaration(candidate).tp_convention, TpConvention::replicated_kv);
  {
    H5::H5File file(candidate, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/result");
    write_attribute(group, "tp_convention", std::string("column-parallel"));
  }
  try {
    read_candidate_declaration(candidate);
    ADD_FAILURE() << "an unknown candidate tp_convention was accepted";
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field("/result@tp_convention")) << error.what();
  }
}

// SCHEMA.md "Candidate files": /result/declined maps parts to reasons; a part that is `out`, malformed,
// or also present under /result is bad input.
TEST(GoldenFile, CandidatesDeclareDeclinedParts) {
  const Golden golden = make_golden(kSpec, 2, 29);  // decodes
  const NamedTensors expected = expected_tensors(golden);
  NamedTensors tensors = named_tensors(golden.expected);
  tensors.erase("decode/out");
  tensors.erase("ranks/1/grads/k_norm");
  const DeclinedParts declined = {{"decode", "no KV cache"}, {"ranks/1/grads/k_norm", "not gathered"}};
  const std::string path = temp_path("declined");
  write_candidate(path, tensors, {.tp_size = 2, .declined = declined}, "test");
  const Candidate candidate = read_candidate(path, expected);
  EXPECT_EQ(candidate.declined, declined);
  EXPECT_FALSE(candidate.tensors.contains("decode/out"));
  const auto refused = [&](const std::string& name, const std::function<void(H5::H5File&)>& edit,
                           const std::string& message) {
    const std::string copy = temp_path(name);
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    {
      H5::H5File file(copy, H5F_ACC_RDWR);
      edit(file);
    }
    try {
      read_candidate(copy, expected);
      ADD_FAILURE() << name << " was accepted";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  };
  refused(
      "declined_and_supplied",
      [&](H5::H5File& file) {
        H5::Group group = file.createGroup("/result/decode");
        write_tensor(group, "out", golden.expected.decode_out.value());
      },
      "/result/declined@decode");
  refused(
      "declined_out",
      [](H5::H5File& file) {
        H5::Group group = file.openGroup("/result/declined");
        write_attribute(group, "out", std::string("no forward"));
      },
      "out cannot be declined");
  refused(
      "declined_misspelt",
      [](H5::H5File& file) {
        H5::Group group = file.openGroup("/result/declined");
        write_attribute(group, "grads/q_nrm", std::string("typo"));
      },
      "/result/declined@grads/q_nrm");
}

TEST(GoldenFile, CaseFilesCarryNoAnswers) {
  const Golden golden = make_golden(kSpec, 2, 19);
  const std::string path = temp_path("case_file");
  write_case(path, golden.test_case, "attncheck test");
  {
    const H5::H5File file(path, H5F_ACC_RDONLY);
    EXPECT_FALSE(exists(file, "/expected"));
  }
  EXPECT_EQ(read_case(path).inputs, golden.test_case.inputs);
  EXPECT_EQ(read_case(path).weights, golden.test_case.weights);
  expect_input_error_naming(path, "/expected");  // not a golden
}

TEST(GoldenFile, UnknownWeightGeneratorIsRefused) {
  Golden golden = make_golden(kSpec, 1, 13);
  golden.weights_by_generator = true;
  const std::string path = written("unknown_generator", golden);
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::Group group = file.openGroup("/weights");
    group.removeAttr("generator");
    write_attribute(group, "generator", std::string("numpy-default-rng"));
  }
  expect_input_error_naming(path, "/weights@generator");
}

TEST(GoldenFile, OmittedHeadDimStaysOmitted) {
  GeometrySpec spec = {.hidden_size = 16, .num_heads = 4, .rotary_pct = 0.5};
  const Golden golden = make_golden(spec, 1, 8);
  const std::string path = written("omitted_head_dim", golden);
  {
    const H5::H5File file = open_for_reading(path);
    EXPECT_FALSE(read_integer_attribute(file.openGroup("/geometry"), "head_dim", path).has_value());
  }
  const Golden read = read_golden(path);
  EXPECT_EQ(read.test_case.geometry().head_dim_source(), HeadDimSource::derived);
  EXPECT_EQ(read.test_case.geometry().head_dim(), 4);
  EXPECT_EQ(read.test_case.geometry().rotary_dim(), 2);
}

TEST(GoldenFile, ReferenceRederivesTheExpectedValues) {
  const Golden read = read_golden(written("rederive", make_golden(kSpec, 2, 9)));
  const Result again = reference::run_reference_tp(read.test_case);
  EXPECT_EQ(again.out, read.expected.out);
  EXPECT_EQ(again.gradients, read.expected.gradients);
  EXPECT_EQ(again.rank_gradients, read.expected.rank_gradients);
}

TEST(GoldenFile, NotAFileNotHdf5AndTruncated) {
  expect_input_error_naming(temp_path("does_not_exist"), "file");
  const std::string text = temp_path("text");
  std::ofstream(text) << "not hdf5\n";
  expect_input_error_naming(text, "file");
  // The first half of a real golden: the signature survives, the data does not.
  const std::string whole = written("whole", make_golden(kSpec, 1, 10));
  const std::string truncated = temp_path("truncated");
  std::filesystem::copy_file(whole, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(whole) / 2);
  EXPECT_THROW(read_golden(truncated), InputError);
  // Cut anywhere: always an InputError, never a crash or a silently partial golden.
  for (int percent = 1; percent < 100; percent += 7) {
    std::filesystem::copy_file(whole, truncated, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(truncated, std::filesystem::file_size(whole) * percent / 100);
    EXPECT_THROW(read_golden(truncated), InputError) << percent << "%";
  }
}

// Opens a written golden for editing, applies edit, closes it.
template <class Edit>
std::string edited(const std::string& name, Edit edit) {
  const std::string path = written(name, make_golden(kSpec, 1, 11));
  H5::H5File file(path, H5F_ACC_RDWR);
  edit(file);
  return path;
}

TEST(GoldenFile, FlippedBitInDataIsAChecksumError) {
  const std::string path = written("flipped_bit", make_golden(kSpec, 1, 14));
  haddr_t address = 0;
  {
    const H5::H5File file = open_for_reading(path);
    const H5::DataSet dataset = file.openDataSet("/expected/grads/q_proj");
    const hsize_t origin[2] = {0, 0};
    unsigned filter_mask = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(dataset.getId(), origin, &filter_mask, &address, &size), 0);
  }
  {
    std::fstream bytes(path, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekg(static_cast<std::streamoff>(address + 40));
    const char byte = static_cast<char>(bytes.get() ^ 0x01);
    bytes.seekp(static_cast<std::streamoff>(address + 40));
    bytes.put(byte);
  }
  expect_input_error_naming(path, "/expected/grads/q_proj");
}

TEST(GoldenFile, ArrayAttributesMissingRequiredOnesAndHugeShapesAreRefused) {
  const std::string array_attribute = edited("array_attribute", [](H5::H5File& file) {
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr("causal");
    const hsize_t count = 4096;
    const std::vector<std::int64_t> values(count, 1);
    H5::Attribute attribute = group.createAttribute("causal", H5::PredType::STD_I64LE, H5::DataSpace(1, &count));
    attribute.write(H5::PredType::NATIVE_INT64, values.data());
  });
  expect_input_error_naming(array_attribute, "causal");
  const std::string no_theta =
      edited("no_theta", [](H5::H5File& file) { file.openGroup("/geometry").removeAttr("rope_theta"); });
  expect_input_error_naming(no_theta, "/geometry@rope_theta");
  // A declared shape of 2^44 values, no data written: refused before anything is allocated.
  const std::string huge = edited("huge", [](H5::H5File& file) {
    ASSERT_GE(H5Ldelete(file.getId(), "/inputs/x", H5P_DEFAULT), 0);
    const hsize_t dims[3] = {hsize_t{1} << 20, hsize_t{1} << 20, 16};
    const hsize_t chunk[3] = {1, 1, 16};
    H5::DSetCreatPropList properties;
    properties.setChunk(3, chunk);
    file.createDataSet("/inputs/x", H5::PredType::IEEE_F64LE, H5::DataSpace(3, dims), properties);
  });
  expect_input_error_naming(huge, "/inputs/x");
  // A soft link where a dataset should be is not followed.
  const std::string soft = edited("soft_link", [](H5::H5File& file) {
    ASSERT_GE(H5Ldelete(file.getId(), "/inputs/dout", H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/inputs/x", file.getId(), "/inputs/dout", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  expect_input_error_naming(soft, "/inputs/dout");
}

// Each dataset within its own bound, the file as a whole beyond the memory this process may take: the
// sum of every declared shape is checked when the file opens, before any dataset is read (issue 20:
// four datasets of 2^28 values in a 475 KB golden reached 4.5 GB before a refusal). --max-memory's
// bound (set_max_memory) stands in for a small machine.
TEST(GoldenFile, DeclaredShapesBeyondTheRoomAreRefusedBeforeReading) {
  const auto redeclared = [](const std::string& name, const std::vector<std::string>& paths) {
    return edited(name, [&](H5::H5File& file) {
      for (const std::string& path : paths) {
        ASSERT_GE(H5Ldelete(file.getId(), path.c_str(), H5P_DEFAULT), 0);
        const hsize_t dims[3] = {1, hsize_t{1} << 22, 64};  // 2^28 values: the per-dataset bound exactly
        const hsize_t chunk[3] = {1, 1024, 64};
        H5::DSetCreatPropList properties;
        properties.setChunk(3, chunk);
        file.createDataSet(path, H5::PredType::IEEE_F64LE, H5::DataSpace(3, dims), properties);
      }
    });
  };
  const std::string four =
      redeclared("declared_8_gib", {"/inputs/x", "/inputs/dout", "/expected/out", "/expected/grads/x"});
  EXPECT_LT(std::filesystem::file_size(four), std::uintmax_t{1} << 20);
  set_max_memory(std::uint64_t{4} << 30);
  try {
    read_golden(four);
    ADD_FAILURE() << "a golden declaring 8 GiB was read under a 4 GiB bound";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("not enough memory"), std::string::npos) << message;
    EXPECT_NE(message.find("8.0 GiB"), std::string::npos) << message;
    EXPECT_NE(message.find("limited by --max-memory"), std::string::npos) << message;
  }
  // The same bound for a candidate file, which goes through the same opening.
  try {
    read_candidate(four, {});
    ADD_FAILURE() << "a file declaring 8 GiB was read as a candidate under a 4 GiB bound";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("not enough memory"), std::string::npos) << error.what();
  }
  set_max_memory(std::nullopt);
}

TEST(GoldenFile, StraySketchesAreRefused) {
  // A sketch of grads/x in a golden that stores out in full would be ignored: refused instead.
  const std::string activation = edited("stray_activation_sketch", [](H5::H5File& file) {
    file.createGroup("/expected/sketches");
    H5::Group grads = file.createGroup("/expected/sketches/grads");
    write_tensor(grads, "x", Tensor({2, 5, 4}));
  });
  expect_input_error_naming(activation, "/expected/sketches/grads/x");
  const std::string projection = edited("stray_projection_sketch", [](H5::H5File& file) {
    file.createGroup("/expected/sketches");
    H5::Group grads = file.createGroup("/expected/sketches/grads");
    write_tensor(grads, "k_proj", Tensor({12, 4}));
  });
  expect_input_error_naming(projection, "/expected/sketches/grads/k_proj");
}

// A file that disagrees with itself is refused, never read with a check silently dropped: per-rank
// gradients in a golden whose tp_size was edited to 1 (or a rank beyond tp_size), expected decoding
// without a schedule, weights both named by the generator and stored.
TEST(GoldenFile, FilesThatDisagreeWithThemselvesAreRefused) {
  const std::string tp4 = written("ranks_consistent", make_golden(kSpec, 4, 21));
  ASSERT_NO_THROW(read_golden(tp4));
  {
    H5::H5File file(tp4, H5F_ACC_RDWR);
    H5::Group geometry = file.openGroup("/geometry");
    geometry.removeAttr("tp_size");
    write_attribute(geometry, "tp_size", std::int64_t{1});
  }
  expect_input_error_naming(tp4, "/expected/ranks");

  const std::string extra_rank = written("ranks_extra", make_golden(kSpec, 2, 22));
  {
    H5::H5File file(extra_rank, H5F_ACC_RDWR);
    file.createGroup("/expected/ranks/2");
  }
  expect_input_error_naming(extra_rank, "/expected/ranks/2");

  const std::string no_schedule = edited("decode_without_schedule", [](H5::H5File& file) {
    ASSERT_GE(H5Ldelete(file.getId(), "/inputs/decode_schedule", H5P_DEFAULT), 0);
  });
  expect_input_error_naming(no_schedule, "/expected/decode/out");

  Golden generated = make_golden(kSpec, 1, 23);
  generated.weights_by_generator = true;
  const std::string named_and_stored = written("weights_named_and_stored", generated);
  ASSERT_NO_THROW(read_golden(named_and_stored));
  {
    H5::H5File file(named_and_stored, H5F_ACC_RDWR);
    H5::Group weights = file.openGroup("/weights");
    write_tensor(weights, "q_proj", Tensor({24, 10}));
  }
  expect_input_error_naming(named_and_stored, "/weights/q_proj");
}

TEST(GoldenFile, MissingDatasetIsNamed) {
  const std::string path = edited(
      "missing", [](H5::H5File& file) { ASSERT_GE(H5Ldelete(file.getId(), "/weights/k_proj", H5P_DEFAULT), 0); });
  expect_input_error_naming(path, "/weights/k_proj");
}

TEST(GoldenFile, WrongShapeIsNamed) {
  const std::string path = edited("shape", [](H5::H5File& file) {
    ASSERT_GE(H5Ldelete(file.getId(), "/expected/grads/v_proj", H5P_DEFAULT), 0);
    H5::Group group = file.openGroup("/expected/grads");
    write_tensor(group, "v_proj", Tensor({10, 12}));
  });
  expect_input_error_naming(path, "/expected/grads/v_proj");
}

TEST(GoldenFile, WrongDtypeIsNamed) {
  const std::string path = edited("dtype", [](H5::H5File& file) {
    ASSERT_GE(H5Ldelete(file.getId(), "/inputs/dout", H5P_DEFAULT), 0);
    const hsize_t dims[3] = {2, 5, 10};
    const std::vector<float> values(100, 0.5f);
    H5::DataSet dataset = file.createDataSet("/inputs/dout", H5::PredType::IEEE_F32LE, H5::DataSpace(3, dims));
    dataset.write(values.data(), H5::PredType::NATIVE_FLOAT);
  });
  expect_input_error_naming(path, "/inputs/dout");
}

TEST(GoldenFile, NanIsNamedWithItsIndex) {
  const std::string path = edited("nan", [](H5::H5File& file) {
    H5::DataSet dataset = file.openDataSet("/weights/q_proj");
    std::vector<double> values(static_cast<std::size_t>(dataset.getSpace().getSimpleExtentNpoints()));
    dataset.read(values.data(), H5::PredType::NATIVE_DOUBLE);
    values[5] = std::numeric_limits<double>::quiet_NaN();
    dataset.write(values.data(), H5::PredType::NATIVE_DOUBLE);
  });
  expect_input_error_naming(path, "/weights/q_proj[flat 5]");
}

TEST(GoldenFile, GeometryThatDisagreesWithItselfIsRefused) {
  const std::string wrong_scale = edited("scale", [](H5::H5File& file) {
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr("scale");
    write_attribute(group, "scale", 0.5);
  });
  expect_input_error_naming(wrong_scale, "/geometry@scale");
  const std::string bad_tp = edited("tp", [](H5::H5File& file) {
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr("tp_size");
    write_attribute(group, "tp_size", std::int64_t{3});
  });
  expect_input_error_naming(bad_tp, "tp_size");
  const std::string stray_bias = edited("stray", [](H5::H5File& file) {
    H5::Group group = file.openGroup("/geometry");
    group.removeAttr("out_bias");
    write_attribute(group, "out_bias", std::int64_t{0});
  });
  expect_input_error_naming(stray_bias, "/weights/o_bias");
}

}  // namespace
}  // namespace attncheck::golden
