// Golden files, schema v1 and v2 (golden/SCHEMA.md): a Case and the reference's Result in HDF5, readable from
// any language. Weights are stored, or named by the documented generator; projection gradients are
// stored in full, or as sketches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/capabilities/case_outline.hpp"
#include "core/compare/compare.hpp"
#include "core/generation/input_generation.hpp"
#include "core/model/case.hpp"
#include "core/model/precision.hpp"
#include "core/model/result.hpp"
#include "core/tp/tp_convention.hpp"
#include "golden/integrity.hpp"

namespace attncheck::golden {

// The newest schema this attncheck reads and writes. A golden is written as version 1 unless its layer
// needs version 2 (RoPE scaling, or an attention_multiplier score scale: SCHEMA.md "Schema version 2"),
// so files of plain layers stay readable by version-1 readers; both versions are read.
inline constexpr std::int64_t kSchemaVersion = 3;
// Candidate files (/result) are unchanged since version 1.
inline constexpr std::int64_t kCandidateSchemaVersion = 1;

// 2 when the layer needs schema version 2's attributes, else 1.
std::int64_t schema_version_for(const Geometry& geometry);

// The weight generator a golden may name instead of storing its weights (SCHEMA.md, "Weight generator
// v1"; core/generation/input_generation.cpp; python/attncheck/generator.py).
inline constexpr const char* kWeightGenerator = "attncheck-splitmix64-v1";
// The same generator names x and dout (SCHEMA.md, "Input generator v1"), so long goldens cost kilobytes.
inline constexpr const char* kInputGenerator = "attncheck-splitmix64-v1";

struct Golden {
  Case test_case;
  std::int64_t schema_version = 1;  // as read; written as schema_version_for(the geometry)
  Result expected;                  // out, gradients (x and every weight), decode_out, rank_gradients when tp_size > 1
  std::uint64_t seed = 0;
  std::string generator;  // what wrote the file, e.g. "attncheck 0.1.0"
  // Write /weights as (kWeightGenerator, seed) instead of datasets. Valid only when the weights are
  // exactly generate_weights(geometry, seed) (write_golden checks). Set by read_golden from the file.
  bool weights_by_generator = false;
  // Write x and dout as (kInputGenerator, seed, activations) attributes of /inputs instead of datasets.
  // Valid only when they are exactly generate_activations(...) of that seed and distribution
  // (write_golden checks). Set by read_golden from the file.
  bool inputs_by_generator = false;
  ActivationDistribution activations = ActivationDistribution::uniform;
  // Store the projection gradients (q/k/v/o_proj, per rank too) as sketches (core/compare/sketch.hpp) under
  // /expected/sketches instead of in full. On read, `sketches` holds them ("grads/q_proj#sketch", ...)
  // and the matching tensors of `expected` are left empty.
  bool gradients_sketched = false;
  // Store out, grads/x and decode/out as per-token sketches ([batch, tokens, 4]) instead of in full;
  // on read, `sketches` holds them ("out#sketch", ...) and the matching tensors of `expected` are left
  // empty. Long sequences: a [1, 2048, 1024] activation is 16 MB in full, 64 KB sketched.
  bool activations_sketched = false;
  NamedTensors sketches;
  // /geometry@tp_convention: how expected.rank_gradients (and their sketches) are held, which shapes
  // them (core/tp/tp_convention.hpp; SCHEMA.md "TP conventions"). replicated-kv when the file omits it.
  TpConvention tp_convention = TpConvention::replicated_kv;
  // Set by read_golden: verified when the file carries an integrity digest (golden/integrity.hpp), which
  // then matched; absent when it carries none (an older or another writer's file: read as before).
  Integrity integrity = Integrity::absent;
  // The digest verified (empty unless `integrity` is verified): what every later use of the file is bound to.
  // A stored yardstick counts only when bound to this digest, not to whatever the path holds by then
  // (golden/stored_yardstick.hpp): a file replaced while an implementation runs lends it nothing.
  std::string verified_digest;
  // Set when read with GeneratedWeights::left_out from a file whose /weights names the generator: the seed it
  // names, and test_case.weights is empty (case_with_weights makes them).
  std::optional<std::uint64_t> weights_left_out_seed;
};

// What a golden holds an implementation to: named_tensors(expected), with sketches in place of the
// sketched gradients; without the per-rank gradients ("ranks/...") unless include_rank_gradients
// (an unsharded implementation has none). With a convention other than the golden's, the per-rank
// tensors are regrouped to it (core/compare/rank_regroup.hpp; InputError when it cannot partition the
// golden's plan).
NamedTensors expected_tensors(const Golden& golden, bool include_rank_gradients = true,
                              std::optional<TpConvention> convention = std::nullopt);

// The names and shapes expected_tensors(golden) holds (of a golden read from a file), without copying a tensor.
std::map<std::string, Shape, TensorNameOrder> expected_shapes(const Golden& golden);

// Writes /geometry, /inputs, /weights and /expected. expected must hold gradients; decode_out when the
// case has a schedule; rank_gradients (one per rank) when tp_size > 1, held as golden.tp_convention
// says (regroup_rank_gradients turns the reference's replicated-kv ones into another convention's).
void write_golden(const std::string& path, const Golden& golden);

// The parts of a case a case file holds: all of them, or less for an implementation that does not state
// some (core/capabilities/capabilities.hpp's Admission): without tensor_parallel the file is the unsharded
// case (tp_size 1, so no CP layout either), without decode it has no decode schedule, without
// context_parallel no layout. It is then the case the implementation is judged on, less those parts.
struct CaseFileParts {
  bool tensor_parallel = true;
  bool decode = true;
  bool context_parallel = true;
};

// A case file: a golden without /expected (geometry, inputs, stored weights), what an implementation
// in another process is given, so that it never sees the answers (SCHEMA.md, "Case files").
void write_case(const std::string& path, const Case& test_case, const std::string& generator,
                const CaseFileParts& parts = {});

// The outline of a golden's or case file's case (core/capabilities/case_outline.hpp): geometry, TP plan,
// context-parallel layout, positions, key lengths and decode schedule, without reading or generating a tensor:
// what decides whether an implementation is given the golden at all. InputError as read_case for what it reads.
// Its integrity digest is not verified here: read_golden verifies it, after the schema's own checks (whose
// messages are more specific), whenever the golden is given to any implementation. A golden no implementation is
// given is read no further: a decline costs its outline alone (hashing the whole file cost the plain worker's
// `run` 5% of its time for goldens it never ran). An edited outline can at most set a golden aside, which every
// report shows as "not stated", never as a pass.
CaseOutline read_case_outline(const std::string& path);

// Reads and checks the case of a case file or a golden file (its /expected, if any, is not read; its
// integrity digest, which covers /expected too, is verified when present).
Case read_case(const std::string& path);

// Reading a golden or case file allocates at most about what it declares and generates: its datasets' values,
// x and dout when /inputs names the generator, its weights (and the generator's o_proj transpose) when /weights
// does. read_golden and read_case check that sum against memory_room() (core/resources/memory_room.hpp)
// before reading anything large: InputError, exit 2, naming the estimate.
// Reads and checks a golden file: every required object present with the schema's type and shape,
// values finite, the geometry valid and its scale equal to the stored one, the TP size valid, and its
// integrity digest, when it carries one, equal to the file's (skip: `golden seal`, which replaces it).
// Throws InputError naming the file and the first problem of each kind.
enum class IntegrityCheck { verify, skip };
// Weights a golden names by the generator instead of storing them are generated (computed, the default), or
// left out (test_case.weights empty, Golden::weights_left_out_seed set; every attribute of /weights still checked):
// `compare` judges a candidate's answers against the golden's and needs the weights only to compute a yardstick,
// where case_with_weights makes them; a wide golden's are gigabytes (GPT-NeoX-20B: 1.2 GB). Stored weights are
// read and checked either way.
enum class GeneratedWeights { computed, left_out };
Golden read_golden(const std::string& path, IntegrityCheck integrity_check = IntegrityCheck::verify,
                   GeneratedWeights generated_weights = GeneratedWeights::computed);
// The golden's case with its weights: test_case itself when none were left out (no copy), else `completed`, made
// from it with the weights generated (a function of the geometry and the seed alone: no file is read again).
const Case& case_with_weights(const Golden& golden, std::optional<Case>& completed);

// A candidate file: an implementation's results under /result (same names as /expected) with what it
// declares about them (SCHEMA.md, "Candidate files").
struct CandidateDeclaration {
  Precision precision = Precision::fp64;  // /result@precision (required)
  std::optional<std::int64_t> tp_size;    // /result@tp_size; 1 excuses a candidate from per-rank gradients
  // /result@rope_angles (float32 when absent): the angle policy of its precision contract (SCHEMA.md).
  RopeAngles rope_angles = RopeAngles::float32;
  // /result@tp_convention (replicated-kv when absent): how its per-rank gradients are held; the golden's
  // are regrouped to it before comparing.
  TpConvention tp_convention = TpConvention::replicated_kv;
  // /result/declined: its string attributes, part -> reason (DeclinedParts, core/model/result.hpp).
  DeclinedParts declined;
};
struct Candidate : CandidateDeclaration {
  NamedTensors tensors;  // whatever /result holds among the names `expected` lists
};
// Writes every tensor under /result with the declaration's attributes (tp_size only when given).
void write_candidate(const std::string& path, const NamedTensors& tensors, const CandidateDeclaration& declaration,
                     const std::string& implementation);
// The same from a Result: tp_size its number of ranks (1 without per-rank gradients), replicated-kv.
void write_candidate(const std::string& path, const Result& result, Precision precision);
// /result's attributes alone: what a reader needs to know which tensors to expect (the golden's
// per-rank tensors regrouped to its convention) before reading them. InputError as read_candidate.
CandidateDeclaration read_candidate_declaration(const std::string& path);
// Reads the declaration and /result/<name> for every name in expected_names that the file has. Missing
// tensors, other shapes and NaN are left for compare() to report; a file that is not HDF5, a missing
// /result group or precision attribute, an unknown rope_angles or tp_convention, a declined part that is
// malformed or `out` or also present under /result, or a dataset that is not float64 is an InputError.
Candidate read_candidate(const std::string& path, const NamedTensors& expected_names);

}  // namespace attncheck::golden
