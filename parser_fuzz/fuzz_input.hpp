// What every harness shares: the input as text, and the rule that bad input must be an InputError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/errors/input_error.hpp"

namespace attncheck::fuzz {

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `parse`; InputError (the documented answer to bad input: exit 2) is fine, and so is success.
// Anything else escapes and libFuzzer reports it with the input that caused it. With
// ATTNCHECK_FUZZ_VERBOSE set, each refusal is printed (to see why a seed does not get far).
template <typename Function>
void expect_clean_refusal(Function&& parse) {
  try {
    parse();
  } catch (const InputError& error) {
    if (std::getenv("ATTNCHECK_FUZZ_VERBOSE") != nullptr) std::cerr << "refused: " << error.what() << '\n';
  }
}

}  // namespace attncheck::fuzz
