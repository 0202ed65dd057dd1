#include "cli/junit_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tinyxml2.h>

#include <algorithm>
#include <map>

#include "cli/xml_text.hpp"
#include "core/errors/input_error.hpp"

namespace attncheck::cli {
namespace {

struct SuiteCounts {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  double seconds = 0.0;
};

void set_counts(tinyxml2::XMLElement* element, const SuiteCounts& counts) {
  element->SetAttribute("tests", counts.tests);
  element->SetAttribute("failures", counts.failures);
  element->SetAttribute("errors", counts.errors);
  element->SetAttribute("skipped", counts.skipped);
  element->SetAttribute("time", fmt::format("{:.3f}", counts.seconds).c_str());
}

// One testcase for a verdict, counted in its suite.
void add_testcase(tinyxml2::XMLDocument& document, tinyxml2::XMLElement* suite, SuiteCounts& suite_counts,
                  const PairVerdict& verdict, const std::string& classname, const std::string& case_name) {
  tinyxml2::XMLElement* testcase = document.NewElement("testcase");
  testcase->SetAttribute("classname", xml_text(classname).c_str());
  testcase->SetAttribute("name", xml_text(case_name).c_str());
  testcase->SetAttribute("time", fmt::format("{:.3f}", verdict.seconds).c_str());
  suite->InsertEndChild(testcase);
  ++suite_counts.tests;
  suite_counts.seconds += verdict.seconds;
  // Properties come first in a testcase (the JUnit schema's order): which yardstick set the tolerance
  // (stored, recomputed or computed), and the pair's memory against its layer's bytes (PairMemory).
  tinyxml2::XMLElement* properties = document.NewElement("properties");
  const auto add_property = [&](const char* name, const std::string& value) {
    tinyxml2::XMLElement* property = document.NewElement("property");
    property->SetAttribute("name", name);
    property->SetAttribute("value", xml_text(value).c_str());
    properties->InsertEndChild(property);
  };
  if (verdict.kind == PairVerdict::Kind::judged && !verdict.yardstick.empty()) {
    add_property("yardstick", verdict.yardstick);
  }
  if (verdict.memory) {
    add_property("peak_resident_added_bytes", std::to_string(verdict.memory->peak_added_bytes));
    add_property("layer_bytes", std::to_string(verdict.memory->layer_bytes));
    add_property("peak_over_layer_bytes", fmt::format("{:.2f}", verdict.memory->peak_over_layer()));
    add_property("peak_bound_bytes", std::to_string(verdict.memory->bound_bytes()));
    add_property("peak_within_bound", verdict.memory->within_bound() ? "yes" : "no");
    add_property("peak_measured",
                 verdict.memory->pairs_measured_together == 1
                     ? std::string("alone")
                     : fmt::format("shared: the peak of this golden's {} pairs, run {} at a time",
                                   verdict.memory->pairs_measured_together, verdict.memory->pairs_at_a_time));
  }
  if (properties->FirstChild() != nullptr) {
    testcase->InsertEndChild(properties);
  } else {
    document.DeleteNode(properties);
  }

  if (verdict.kind == PairVerdict::Kind::unsupported || verdict.kind == PairVerdict::Kind::not_stated) {
    const char* word = verdict.kind == PairVerdict::Kind::unsupported ? "unsupported: " : "not stated: ";
    tinyxml2::XMLElement* skipped = document.NewElement("skipped");
    skipped->SetAttribute("message", xml_text(word + verdict.message).c_str());
    testcase->InsertEndChild(skipped);
    ++suite_counts.skipped;
    return;
  }
  // Not checked (it did not fit in memory) is an error too: `run` exits 1 for it, and a CI reading the report
  // alone must not see it pass.
  if (verdict.kind == PairVerdict::Kind::raised || verdict.kind == PairVerdict::Kind::no_answer ||
      verdict.kind == PairVerdict::Kind::broken_promise || verdict.kind == PairVerdict::Kind::not_checked) {
    const char* word = verdict.kind == PairVerdict::Kind::raised           ? "raised: "
                       : verdict.kind == PairVerdict::Kind::no_answer      ? "no answer: "
                       : verdict.kind == PairVerdict::Kind::broken_promise ? "broken promise: "
                                                                           : "not checked: ";
    const char* type = verdict.kind == PairVerdict::Kind::raised           ? "crash"
                       : verdict.kind == PairVerdict::Kind::no_answer      ? "no-answer"
                       : verdict.kind == PairVerdict::Kind::broken_promise ? "broken-promise"
                                                                           : "not-checked";
    tinyxml2::XMLElement* error = document.NewElement("error");
    error->SetAttribute("message", xml_text(word + verdict.message).c_str());
    error->SetAttribute("type", type);
    testcase->InsertEndChild(error);
    ++suite_counts.errors;
    return;
  }
  const CompareReport& report = verdict.report;
  std::string failing, declined;
  const TensorReport* worst = nullptr;
  for (const TensorReport& tensor : report.tensors) {
    if (tensor.status == TensorStatus::declined) {
      declined += fmt::format("{} declined: {}\n", tensor.name, tensor.declined_reason);
    } else if (tensor.status != TensorStatus::ok) {
      failing +=
          fmt::format("{} {}: {:.3g} ulps of its scale, {} elements beyond tolerance; {}\n", tensor.name,
                      to_string(tensor.status), tensor.error_ulps, tensor.elements_over, failure_location(tensor));
      if (worst == nullptr || tensor.error_ulps > worst->error_ulps) worst = &tensor;
    }
  }
  if (!report.passed()) {
    tinyxml2::XMLElement* failure = document.NewElement("failure");
    failure->SetAttribute("type", "mismatch");
    failure->SetAttribute(
        "message", worst == nullptr ? "failed"
                                    : xml_text(fmt::format("worst {} {}: {:.3g} ulps; {} of {} tensors fail",
                                                           worst->name, to_string(worst->status), worst->error_ulps,
                                                           report.failed_count(), report.tensors.size()))
                                          .c_str());
    failure->SetText(xml_text(failing).c_str());
    testcase->InsertEndChild(failure);
    ++suite_counts.failures;
  }
  if (!declined.empty()) {  // shown beside the verdict, never as part of a pass
    tinyxml2::XMLElement* system_out = document.NewElement("system-out");
    system_out->SetText(xml_text(declined).c_str());
    testcase->InsertEndChild(system_out);
  }
}

}  // namespace

void write_junit(const std::string& path, const std::vector<PairVerdict>& verdicts, const SupportMatrix& matrix) {
  tinyxml2::XMLDocument document;
  document.InsertEndChild(document.NewDeclaration());
  tinyxml2::XMLElement* root = document.NewElement("testsuites");
  root->SetAttribute("name", "attncheck run");
  document.InsertEndChild(root);

  // One suite per implementation, in the order the run met them.
  std::vector<std::string> order;
  std::map<std::string, tinyxml2::XMLElement*> suites;
  std::map<std::string, SuiteCounts> counts;
  SuiteCounts total;
  for (const PairVerdict& verdict : verdicts) {
    if (!suites.count(verdict.implementation)) {
      order.push_back(verdict.implementation);
      tinyxml2::XMLElement* suite = document.NewElement("testsuite");
      suite->SetAttribute("name", xml_text(verdict.implementation).c_str());
      root->InsertEndChild(suite);
      suites[verdict.implementation] = suite;
    }
    add_testcase(document, suites[verdict.implementation], counts[verdict.implementation], verdict,
                 "attncheck." + verdict.implementation, verdict.golden);
  }
  // The support matrix: its rungs' verdicts again, one testcase per rung and implementation, named by the rung.
  if (!matrix.rungs.empty()) {
    const std::string suite_name = "support-matrix";
    order.push_back(suite_name);
    tinyxml2::XMLElement* suite = document.NewElement("testsuite");
    suite->SetAttribute("name", suite_name.c_str());
    root->InsertEndChild(suite);
    suites[suite_name] = suite;
    for (const SupportMatrix::Rung& rung : matrix.rungs) {
      for (std::size_t i = 0; i < matrix.implementations.size(); ++i) {
        add_testcase(document, suite, counts[suite_name], rung.verdicts.at(i),
                     "attncheck.support-matrix." + matrix.implementations[i],
                     fmt::format("{} {} ({})", rung.number, rung.name, matrix_status(rung.verdicts.at(i))));
      }
    }
  }
  for (const std::string& name : order) {
    set_counts(suites[name], counts[name]);
    total.tests += counts[name].tests;
    total.failures += counts[name].failures;
    total.errors += counts[name].errors;
    total.skipped += counts[name].skipped;
    total.seconds += counts[name].seconds;
  }
  set_counts(root, total);
  if (document.SaveFile(path.c_str()) != tinyxml2::XML_SUCCESS) {
    ViolationList violations;
    violations.add("--junit", path, "cannot be written", "a path in a writable folder");
    violations.throw_if_any("invalid option");
  }
}

}  // namespace attncheck::cli
