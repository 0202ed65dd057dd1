// Internal to golden/ (callers elsewhere include golden/golden_file.hpp): the case part of golden and case
// files (root attributes, /geometry, /inputs, /weights), which golden_file.cpp completes with /expected, and
// the parameter groups that /weights and /expected hold alike. Defined in case_file_part.cpp.
#pragma once

#include <H5Cpp.h>

#include <string>

#include "core/compare/compare.hpp"
#include "core/model/parameters.hpp"
#include "golden/golden_file.hpp"

namespace attncheck::golden {

// /geometry, /inputs and /weights: everything but the answers. The case is written as `parts` narrows it
// (a case file for an implementation that does not state some of its parts); goldens write it whole.
struct CasePartHeader {  // the root attributes, and how inputs and weights are stored (Golden's fields of the same
                         // names)
  std::string generator;
  std::uint64_t seed = 0;
  bool weights_by_generator = false;
  bool inputs_by_generator = false;
  ActivationDistribution activations = ActivationDistribution::uniform;
};
void write_case_part(H5::H5File& file, const Case& test_case, const CasePartHeader& golden,
                     const CaseFileParts& parts = {});

// Everything but /expected: root attributes, geometry, inputs, weights (generated ones left out as asked:
// read_golden); the case validated.
Golden read_case_part(const H5::H5File& file, const std::string& path,
                      GeneratedWeights generated_weights = GeneratedWeights::computed);

// Writes every parameter tensor except, when skip_projections, the four projections. A tensor of 0 rows
// (a rank that holds none of its lines, core/tp/tp_convention.hpp) is not written: it does not exist.
void write_parameters(H5::Group& group, const Parameters& parameters, bool skip_projections = false);

// Reads every parameter the geometry calls for, with the shapes of `shapes` (parameter_shapes or
// held_parameter_shapes: shapes alone, so that nothing is allocated before it is read), from group_path. A tensor of 0 rows (a rank holding none of its lines) is not read
// and must not be stored. With sketches given, the four projections are read as sketches from
// /expected/sketches/<sketch_prefix><name> into it (as "<prefix><name>#sketch") and left empty here.
Parameters read_parameters(const H5::H5File& file, const std::string& group_path, Parameters shapes,
                           const std::string& file_name, bool allow_non_finite, const std::string& sketch_prefix = "",
                           NamedTensors* sketches = nullptr);

}  // namespace attncheck::golden
