#include "core/model/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "core/resources/fresh_pages.hpp"

namespace attncheck {

std::int64_t element_count(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  return count;
}

std::string to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

namespace {

// A zero-filled vector of `count` values; a large one's pages first faulted in on OpenMP's threads
// (core/resources/fresh_pages.hpp), since the zero-fill itself runs on one.
std::vector<double> zeros(std::int64_t count) {
  const auto size = static_cast<std::size_t>(count);
  prefault_next_block(size * sizeof(double));
  return std::vector<double>(size, 0.0);
}

}  // namespace

Tensor::Tensor(Shape tensor_shape) : shape(std::move(tensor_shape)), values(zeros(element_count(shape))) {}

Tensor::Tensor(Shape tensor_shape, std::vector<double> tensor_values)
    : shape(std::move(tensor_shape)), values(std::move(tensor_values)) {
  if (static_cast<std::int64_t>(values.size()) != element_count(shape)) {
    throw std::logic_error(fmt::format("Tensor: {} values for shape {}", values.size(), to_string(shape)));
  }
}

}  // namespace attncheck
