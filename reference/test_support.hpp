// Helpers shared by the reference tests: error measures, a finite-difference checker, and small
// random geometries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/generation/input_generation.hpp"
#include "core/model/case.hpp"
#include "core/model/geometry.hpp"
#include "core/model/result.hpp"

namespace attncheck::testing {

// max |actual - expected| / max |expected| (absolute error when expected is all zeros). Shapes must
// match; a NaN anywhere gives +inf.
double relative_error(const Tensor& actual, const Tensor& expected);

// Calls fn(name, actual, expected) for x and every parameter gradient present in both.
void for_each_gradient_pair(const Gradients& actual, const Gradients& expected,
                            const std::function<void(const std::string&, const Tensor&, const Tensor&)>& fn);

// sum(out * dout): the loss whose gradients a Result holds.
double loss(const Tensor& out, const Tensor& dout);

// Central finite differences (fourth order: (-f(+2h) + 8f(+h) - 8f(-h) + f(-2h)) / 12h) of the loss
// with respect to x and every parameter, through the forward pass of `forward`. h = 2^-16, so every
// perturbed value is exact; measured: truncation error dominated at 2^-10 and 2^-12 on the outlier case
// (up to 2e-4 relative), while at 2^-16 the worst tensor over all cases was 6e-10 against the 1e-7 bound.
Gradients finite_difference_gradients(const Case& test_case, const std::function<Tensor(const Case&)>& forward);

// A small geometry with random options, drawn from `seed`: GQA/MQA/MHA, head_dim unrelated to
// hidden/num_heads, partial rotary, both RoPE styles, QK-norm kinds, biases, softcap, window, causal.
GeometrySpec random_small_geometry(std::uint64_t seed);

std::string describe(const Geometry& geometry);  // one line, for failure messages

}  // namespace attncheck::testing
