// CLI11 validators for every numeric flag. CLI11 alone saturates out-of-range integers, wraps "-1" into
// an unsigned seed, reads '' as "flag absent" and takes nan or inf as numbers; these run on the text the
// user typed, before conversion, so that each of those is refused (exit 2) with the text quoted.
#pragma once

#include <CLI/CLI.hpp>

namespace attncheck::cli {

// A signed 64-bit integer, written plainly ("12", "-3"); nothing else.
const CLI::Validator& integer_validator();
// An unsigned 64-bit integer (a seed), digits only: no sign, no wrap-around.
const CLI::Validator& unsigned_validator();
// A finite floating-point number: not empty, not nan or inf, not beyond double's range.
const CLI::Validator& finite_number_validator();
// A duration in seconds: finite and in (0, 31536000] (a year; longer would overflow no clock, but
// nobody means it).
const CLI::Validator& seconds_validator();

}  // namespace attncheck::cli
