#include "cli/flag_validators.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

namespace attncheck::cli {

namespace {

constexpr double kLongestSeconds = 31536000.0;  // a year

std::string in_quotes(const std::string& text) {
  return "'" + text + "'";
}

// The text as a double, or an error message (empty on success).
std::string parse_finite(const std::string& text, double& value) {
  if (text.empty()) return "an empty value is not a number";
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) return in_quotes(text) + " is beyond the range of a double";
  if (error != std::errc() || end != text.data() + text.size()) return in_quotes(text) + " is not a number";
  if (!std::isfinite(value)) return in_quotes(text) + " is not finite";
  return {};
}

}  // namespace

const CLI::Validator& integer_validator() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc::result_out_of_range) return in_quotes(text) + " is out of range for a 64-bit integer";
        if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
          return in_quotes(text) + " is not an integer";
        }
        return {};
      },
      "INTEGER");
  return validator;
}

const CLI::Validator& unsigned_validator() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        std::uint64_t value = 0;
        if (!text.empty() && text.front() == '-') return in_quotes(text) + " is negative: must be in [0, 2^64 - 1]";
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc::result_out_of_range) return in_quotes(text) + " is beyond 2^64 - 1";
        if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
          return in_quotes(text) + " is not an unsigned integer";
        }
        return {};
      },
      "UINT");
  return validator;
}

const CLI::Validator& finite_number_validator() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        double value = 0.0;
        return parse_finite(text, value);
      },
      "FLOAT");
  return validator;
}

const CLI::Validator& seconds_validator() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        double value = 0.0;
        if (std::string error = parse_finite(text, value); !error.empty()) return error;
        if (value <= 0.0 || value > kLongestSeconds) {
          return in_quotes(text) + " seconds: must lie in (0, 31536000] (a year at most)";
        }
        return {};
      },
      "SECONDS");
  return validator;
}

}  // namespace attncheck::cli
