// Golden files (golden_file.hpp, SCHEMA.md): a case file's parts (case_file_part.hpp) and /expected, the
// reference's answers, written, read and checked; and what a golden holds an implementation to.
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
#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_convention.hpp"
#include "golden/case_file_part.hpp"
#include "golden/hdf5_error_translation.hpp"
#include "golden/hdf5_io.hpp"
#include "golden/integrity.hpp"

namespace attncheck::golden {

namespace {

// Creates the groups of an HDF5 path's parents ("/a/b/c" -> /a, /a/b).
void create_parents(H5::H5File& file, const std::string& path) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string parent = path.substr(0, slash);
    if (!exists(file, parent)) file.createGroup(parent);
  }
}

}  // namespace

static void write_golden_unchecked(const std::string& path, const Golden& golden) {
  const Case& test_case = golden.test_case;
  const Result& expected = golden.expected;
  if (!expected.gradients) throw std::logic_error("write_golden: the expected result needs gradients");
  if (golden.gradients_sketched && test_case.geometry().is_latent()) {
    throw std::logic_error("write_golden: projection sketches are q/k/v/o_proj's; a latent layer's are stored whole");
  }
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
  write_case_part(file, golden.test_case,
                  {.generator = golden.generator,
                   .seed = golden.seed,
                   .weights_by_generator = golden.weights_by_generator,
                   .inputs_by_generator = golden.inputs_by_generator,
                   .activations = golden.activations});
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

static Golden read_golden_unchecked(const std::string& path, IntegrityCheck integrity_check,
                                    GeneratedWeights generated_weights) {
  const H5::H5File file = open_for_reading(path, DeclaredData::counted_by_caller);  // require_room_for_reading
  Golden golden = read_case_part(file, path, generated_weights);
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
  golden.gradients_sketched = exists(file, "/expected/sketches/grads/q_proj") && !geometry.is_latent();
  NamedTensors* sketches = golden.gradients_sketched ? &golden.sketches : nullptr;
  // A sketch the file's form does not call for would be silently ignored: the file disagrees with itself.
  for (const char* name : {"grads/x", "decode/out"}) {
    if (!golden.activations_sketched && exists(file, std::string("/expected/sketches/") + name)) {
      fail(path, std::string("/expected/sketches/") + name, "present",
           "activation sketches come as out, grads/x and decode/out together (/expected/sketches/out is absent)",
           "store all three sketched, or none");
    }
  }
  for (const char* name : {"q_proj", "o_proj", "q_b_proj", "kv_b_proj", "q_a_proj", "kv_a_proj_with_mqa"}) {
    const std::string sketch_path = std::string("/expected/sketches/grads/") + name;
    if (geometry.is_latent() && exists(file, sketch_path)) {
      fail(path, sketch_path, "present",
           "a latent-attention golden stores its projection gradients whole (sketches are q/k/v/o_proj's, together)",
           "store the gradients in full");
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
  golden.integrity = integrity_check == IntegrityCheck::skip ? Integrity::absent
                                                              : verify_integrity(file, path, &golden.verified_digest);
  return golden;
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

void write_golden(const std::string& path, const Golden& golden) {
  translating_hdf5_errors(path, "write failed", [&] {
    write_golden_unchecked(path, golden);  // closes the file
    seal_integrity(path);
  });
}

Golden read_golden(const std::string& path, IntegrityCheck integrity_check, GeneratedWeights generated_weights) {
  return translating_hdf5_errors(path, "read failed",
                                 [&] { return read_golden_unchecked(path, integrity_check, generated_weights); });
}

const Case& case_with_weights(const Golden& golden, std::optional<Case>& completed) {
  if (!golden.weights_left_out_seed) return golden.test_case;
  if (!completed) {
    completed = golden.test_case;
    completed->weights = generate_weights(golden.test_case.geometry(), *golden.weights_left_out_seed);
  }
  return *completed;
}

}  // namespace attncheck::golden
