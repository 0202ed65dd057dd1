// InputError: the one exception type for bad input (geometry, TP size, config files, CLI values).
// Each Violation names the field, the value it had, the rule it broke and a nearby valid value, so a
// user can fix the input from the message alone. The CLI maps InputError to exit code 2.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace attncheck {

struct Violation {
  std::string field;       // e.g. "num_kv_heads", or a config key path "text_config.hidden_size"
  std::string value;       // the offending value as the user wrote it (or "absent")
  std::string rule;        // the rule it breaks, stated positively
  std::string suggestion;  // a nearby valid value or the fix; empty only when none exists

  friend bool operator==(const Violation&, const Violation&) = default;
};

// "field = value: rule; suggestion"
std::string to_string(const Violation& violation);

class InputError : public std::runtime_error {
 public:
  // context says what was being read, e.g. "invalid geometry" or "hf config 'x.json'".
  InputError(std::string context, std::vector<Violation> violations);

  const std::string& context() const { return context_; }
  const std::vector<Violation>& violations() const { return violations_; }

  // True when some violation concerns this field (tests use it to pin which rule fired).
  bool names_field(const std::string& field) const;

 private:
  std::string context_;
  std::vector<Violation> violations_;
};

// Collects violations and throws them together, so one run reports every problem at once.
class ViolationList {
 public:
  void add(std::string field, std::string value, std::string rule, std::string suggestion);
  bool empty() const { return violations_.empty(); }
  std::size_t size() const { return violations_.size(); }
  void throw_if_any(const std::string& context) const;

 private:
  std::vector<Violation> violations_;
};

}  // namespace attncheck
