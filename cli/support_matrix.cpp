#include "cli/support_matrix.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace attncheck::cli {

bool is_ladder_golden(const std::string& file_name) {
  return file_name.starts_with("ladder_") && file_name.size() > 11 && std::isdigit(file_name[7]) &&
         std::isdigit(file_name[8]) && file_name[9] == '_' && file_name.ends_with(".h5");
}

std::string matrix_status(const PairVerdict& verdict) {
  switch (verdict.kind) {
    case PairVerdict::Kind::judged:
      if (!verdict.report.passed()) return "FAIL";
      return verdict.report.declined_count() > 0 ? "pass*" : "pass";
    case PairVerdict::Kind::unsupported:
      return "declined";
    case PairVerdict::Kind::not_stated:
      return "not stated";
    case PairVerdict::Kind::not_checked:
      return "not checked";
    case PairVerdict::Kind::raised:
    case PairVerdict::Kind::no_answer:
    case PairVerdict::Kind::broken_promise:
      break;
  }
  return "FAIL";
}

SupportMatrix::Rung ladder_rung(const std::string& file_name, const std::string& uses) {
  SupportMatrix::Rung rung{.golden = file_name, .number = file_name.substr(7, 2), .uses = uses};
  rung.name = file_name.substr(10, file_name.size() - 10 - 3);
  std::replace(rung.name.begin(), rung.name.end(), '-', ' ');
  std::replace(rung.name.begin(), rung.name.end(), '_', ' ');
  return rung;
}

std::string render_text(const SupportMatrix& matrix) {
  std::size_t name_width = 4;
  for (const SupportMatrix::Rung& rung : matrix.rungs) name_width = std::max(name_width, rung.name.size() + 4);
  std::vector<std::size_t> widths;
  for (const std::string& implementation : matrix.implementations) {
    widths.push_back(std::max<std::size_t>(implementation.size(), 11));
  }
  // Each line without trailing blanks (the last column is not padded).
  const auto line = [](std::string row) {
    row.erase(row.find_last_not_of(' ') + 1);
    return row + '\n';
  };
  std::string header = fmt::format("{:<{}}", "rung", name_width);
  for (std::size_t i = 0; i < widths.size(); ++i)
    header += fmt::format("  {:<{}}", matrix.implementations[i], widths[i]);
  std::string text = "support matrix (the conformance ladder, docs/LADDER.md):\n" + line(header);
  for (const SupportMatrix::Rung& rung : matrix.rungs) {
    std::string row = fmt::format("{:<{}}", fmt::format("{}  {}", rung.number, rung.name), name_width);
    for (std::size_t i = 0; i < widths.size(); ++i) {
      row += fmt::format("  {:<{}}", matrix_status(rung.verdicts.at(i)), widths[i]);
    }
    text += line(row);
  }
  text +=
      "(pass* judged on what it computed, some parts declined; not stated: outside its stated capabilities, "
      "not run; the table below has the reasons)\n\n";
  return text;
}

nlohmann::json render_json(const SupportMatrix& matrix) {
  nlohmann::json rungs = nlohmann::json::array();
  for (const SupportMatrix::Rung& rung : matrix.rungs) {
    nlohmann::json status = nlohmann::json::object(), why = nlohmann::json::object();
    for (std::size_t i = 0; i < matrix.implementations.size(); ++i) {
      const PairVerdict& verdict = rung.verdicts.at(i);
      status[matrix.implementations[i]] = json_verdict(verdict);
      if (!verdict.message.empty()) why[matrix.implementations[i]] = verdict.message;
    }
    rungs.push_back({{"golden", rung.golden},
                     {"rung", rung.number},
                     {"name", rung.name},
                     {"uses", rung.uses},
                     {"status", status},
                     {"why", why}});
  }
  return {{"implementations", matrix.implementations}, {"rungs", rungs}};
}

}  // namespace attncheck::cli
