// Candidate files (golden_file.hpp, SCHEMA.md "Candidate files"): an implementation's answers under
// /result with what it declares about them, written and read.
#include "golden/golden_file.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/compare/sketch.hpp"
#include "core/tp/tp_convention.hpp"
#include "golden/hdf5_error_translation.hpp"
#include "golden/hdf5_io.hpp"

namespace attncheck::golden {

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
