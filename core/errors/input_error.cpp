#include "core/errors/input_error.hpp"

#include <algorithm>

namespace attncheck {

std::string to_string(const Violation& violation) {
  std::string text = violation.field + " = " + violation.value + ": " + violation.rule;
  if (!violation.suggestion.empty()) text += "; " + violation.suggestion;
  return text;
}

namespace {
std::string format_message(const std::string& context, const std::vector<Violation>& violations) {
  std::string message = context + ":";
  if (violations.size() == 1) return message + " " + to_string(violations.front());
  for (const Violation& violation : violations) message += "\n  - " + to_string(violation);
  return message;
}
}  // namespace

InputError::InputError(std::string context, std::vector<Violation> violations)
    : std::runtime_error(format_message(context, violations)),
      context_(std::move(context)),
      violations_(std::move(violations)) {}

bool InputError::names_field(const std::string& field) const {
  return std::any_of(violations_.begin(), violations_.end(),
                     [&](const Violation& violation) { return violation.field == field; });
}

void ViolationList::add(std::string field, std::string value, std::string rule, std::string suggestion) {
  violations_.push_back({std::move(field), std::move(value), std::move(rule), std::move(suggestion)});
}

void ViolationList::throw_if_any(const std::string& context) const {
  if (!violations_.empty()) throw InputError(context, violations_);
}

}  // namespace attncheck
