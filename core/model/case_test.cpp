#include "core/model/case.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"

namespace attncheck {
namespace {

Case valid_case() {
  const Geometry geometry = resolve_geometry({.hidden_size = 6, .num_heads = 2, .head_dim = 4, .qkv_bias = true});
  return generate_case(geometry, {.seed = 1, .batch = 2, .seq = 3});
}

// validate_case's error, which must name `field`.
void expect_rejected(const Case& test_case, const std::string& field) {
  try {
    validate_case(test_case);
    ADD_FAILURE() << "accepted; expected a violation of " << field;
  } catch (const InputError& error) {
    EXPECT_TRUE(error.names_field(field)) << error.what();
  }
}

TEST(ValidateCase, GeneratedCaseIsValid) {
  EXPECT_NO_THROW(validate_case(valid_case()));
}

TEST(ValidateCase, WrongShapesAreNamed) {
  Case test_case = valid_case();
  test_case.weights.q_proj = Tensor({8, 5});
  expect_rejected(test_case, "weights.q_proj");
  test_case = valid_case();
  test_case.inputs.x = Tensor({2, 3, 5});
  expect_rejected(test_case, "inputs.x");
  test_case = valid_case();
  test_case.weights.k_bias.reset();
  expect_rejected(test_case, "weights.k_bias");
  test_case = valid_case();
  test_case.weights.o_bias = Tensor({6});  // geometry has no out_bias
  expect_rejected(test_case, "weights.o_bias");
}

TEST(ValidateCase, NonFiniteValuesAreNamedWithTheirIndex) {
  Case test_case = valid_case();
  test_case.weights.v_proj.values[7] = std::numeric_limits<double>::quiet_NaN();
  expect_rejected(test_case, "weights.v_proj[flat 7]");
  test_case = valid_case();
  test_case.inputs.dout.values[0] = std::numeric_limits<double>::infinity();
  expect_rejected(test_case, "inputs.dout[flat 0]");
}

// check_finite scans in chunks of 4096 values: the first bad value is still the one named, wherever it falls.
TEST(ValidateCase, TheFirstNonFiniteValueIsNamedAcrossChunks) {
  for (const std::size_t bad : {std::size_t{0}, std::size_t{4095}, std::size_t{4096}, std::size_t{9000}, std::size_t{12296}}) {
    Tensor tensor({3, 4099});
    tensor.values[bad] = bad % 2 == 0 ? std::numeric_limits<double>::quiet_NaN() : -std::numeric_limits<double>::infinity();
    if (bad + 5000 < tensor.values.size()) tensor.values[bad + 5000] = std::numeric_limits<double>::infinity();
    ViolationList violations;
    check_finite(tensor, "t", violations);
    try {
      violations.throw_if_any("test");
      ADD_FAILURE() << "value " << bad << " not found";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("t[flat " + std::to_string(bad) + "]"), std::string::npos) << error.what();
    }
  }
  Tensor finite({3, 4099});
  finite.values.back() = std::numeric_limits<double>::max();
  ViolationList violations;
  check_finite(finite, "t", violations);
  EXPECT_NO_THROW(violations.throw_if_any("test"));
}

TEST(ValidateCase, PositionsKeyLengthsAndSchedules) {
  Case test_case = valid_case();
  test_case.inputs.positions[4] = -1;
  expect_rejected(test_case, "inputs.positions[1][1]");
  test_case = valid_case();
  test_case.inputs.positions.pop_back();
  expect_rejected(test_case, "inputs.positions");
  test_case = valid_case();
  test_case.inputs.key_lengths[1] = 4;
  expect_rejected(test_case, "inputs.key_lengths[1]");
  test_case = valid_case();
  test_case.inputs.decode = {.prefill = 1, .steps = {0}};
  expect_rejected(test_case, "inputs.decode.steps[0]");
  test_case.inputs.decode = {.prefill = 2, .steps = {2}};
  expect_rejected(test_case, "inputs.decode");
  // Steps that would overflow int64 when summed are rejected one by one, not wrapped around.
  constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();
  test_case.inputs.decode = {.prefill = 1, .steps = {kHuge, kHuge, 3}};
  expect_rejected(test_case, "inputs.decode.steps[0]");
  test_case.inputs.decode = {.prefill = kHuge, .steps = {1}};
  expect_rejected(test_case, "inputs.decode");
}

}  // namespace
}  // namespace attncheck
