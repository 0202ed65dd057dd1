#include "cli/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli/heatmap_picture.hpp"
#include "core/errors/input_error.hpp"

namespace attncheck::cli {

namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #202124; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 6px; }
code, td, th { font-family: ui-monospace, monospace; font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #dadce0; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f1f3f4; }
tr.fail td { background: #fde8e6; } tr.declined td { background: #fef7e0; }
.status.fail, .result-FAIL, .result-raised { color: #c5221f; font-weight: bold; }
.result-pass { color: #188038; font-weight: bold; }
.maps { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
figure.heatmap { margin: 0; padding: 8px; border: 1px solid #dadce0; border-radius: 4px; width: min-content; }
figure.heatmap figcaption { margin-bottom: 4px; }
figure.heatmap svg { display: block; font: 11px system-ui, sans-serif; fill: #3c4043; }
figure.heatmap svg image { image-rendering: pixelated; }
.worst-note { margin: 4px 0 0; font-size: 12px; }
.scale { max-width: 900px; margin: 12px 0 20px; }
.scale .bar { height: 16px; border: 1px solid #9aa0a6; }
.scale .bar-labels { position: relative; height: 18px; font-size: 11px; }
.scale .bar-labels span { position: absolute; transform: translateX(-50%); white-space: nowrap; }
.scale .bar-labels span:first-child { transform: none; } .scale .bar-labels span:last-child { transform: translateX(-100%); }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #9aa0a6; vertical-align: middle; }
)";

std::string result_of(const PairVerdict& verdict) {
  switch (verdict.kind) {
    case PairVerdict::Kind::raised:
      return "raised";
    case PairVerdict::Kind::no_answer:
      return "no answer";
    case PairVerdict::Kind::unsupported:
      return "unsupported";
    case PairVerdict::Kind::not_stated:
      return "not stated";
    case PairVerdict::Kind::not_checked:
      return "not checked";
    case PairVerdict::Kind::broken_promise:
      return "broken promise";
    case PairVerdict::Kind::judged:
      break;
  }
  if (!verdict.report.passed()) return "FAIL";
  return verdict.report.declined_count() > 0 ? "pass*" : "pass";
}

std::string number(double value) {
  return std::isfinite(value) ? fmt::format("{:.3g}", value) : (std::isnan(value) ? "nan" : "inf");
}

const TensorReport* worst_tensor(const CompareReport& report) {
  const TensorReport* worst = nullptr;
  for (const TensorReport& t : report.tensors) {
    if (t.status == TensorStatus::declined) continue;
    if (worst == nullptr || t.error_ulps > worst->error_ulps) worst = &t;
  }
  return worst;
}

std::string summary_table(const HtmlReport& report) {
  std::string html =
      "<table class=\"summary\"><tr><th>golden</th><th>implementation</th><th>result</th><th>worst tensor</th>"
      "<th>ulps</th><th>failing tensors</th></tr>\n";
  for (std::size_t i = 0; i < report.sections.size(); ++i) {
    const PairVerdict& verdict = report.sections[i].verdict;
    const std::string result = result_of(verdict);
    std::string worst = "-", ulps = "-", failing = "-";
    if (verdict.kind == PairVerdict::Kind::judged) {
      if (const TensorReport* t = worst_tensor(verdict.report)) {
        worst = html_escape(t->name);
        ulps = number(t->error_ulps);
      }
      failing = fmt::format("{} of {}", verdict.report.failed_count(),
                            verdict.report.failed_count() + verdict.report.passed_count());
    } else {
      worst = html_escape(verdict.message);
    }
    html += fmt::format(
        "<tr class=\"{}\"><td><a href=\"#pair-{}\">{}</a></td><td>{}</td><td class=\"result-{}\">{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>\n",
        failed(verdict) ? "fail" : "", i, html_escape(verdict.golden), html_escape(verdict.implementation),
        result == "pass*" ? "pass" : result, result, worst, ulps, failing);
  }
  return html + "</table>\n";
}

std::string tensor_table(const CompareReport& report) {
  std::string html =
      "<table class=\"tensors\"><tr><th>tensor</th><th>status</th><th>max error</th><th>ulps</th><th>tolerance</th>"
      "<th>worst at</th><th>beyond tolerance</th></tr>\n";
  for (const TensorReport& t : report.tensors) {
    const bool compared = t.status != TensorStatus::missing && t.status != TensorStatus::wrong_shape &&
                          t.status != TensorStatus::declined;
    std::string detail;
    if (t.status == TensorStatus::declined) {
      detail = "declined: " + t.declined_reason;
    } else if (t.status == TensorStatus::missing) {
      detail = "expected shape " + to_string(t.expected_shape);
    } else if (t.status == TensorStatus::wrong_shape) {
      detail = fmt::format("shape {}, expected {}", to_string(t.actual_shape), to_string(t.expected_shape));
    } else if (t.status != TensorStatus::ok) {
      detail = fmt::format("{} elements: {} ({})", t.elements_over, failure_location(t), worst_values(t));
    }
    const char* row_class =
        t.status == TensorStatus::ok ? "" : (t.status == TensorStatus::declined ? "declined" : "fail");
    html += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        row_class, html_escape(t.name), html_escape(to_string(t.status)), compared ? number(t.max_error) : "-",
        compared ? number(t.error_ulps) : "-", number(t.tolerance), compared ? to_string(t.worst_index) : "-",
        html_escape(detail));
  }
  return html + "</table>\n";
}

// The support matrix: a row per rung, a column per implementation.
std::string matrix_html(const SupportMatrix& matrix) {
  if (matrix.rungs.empty()) return "";
  std::string html = "<h2>Support matrix</h2>\n<table class=\"summary\"><tr><th>rung</th>";
  for (const std::string& implementation : matrix.implementations) {
    html += fmt::format("<th>{}</th>", html_escape(implementation));
  }
  html += "</tr>\n";
  for (const SupportMatrix::Rung& rung : matrix.rungs) {
    html += fmt::format("<tr><td title=\"{}\">{} {}</td>", html_escape(rung.uses), html_escape(rung.number),
                        html_escape(rung.name));
    for (const PairVerdict& verdict : rung.verdicts) {
      const std::string status = matrix_status(verdict);
      html += fmt::format("<td class=\"result-{}\" title=\"{}\">{}</td>", status == "pass*" ? "pass" : status,
                          html_escape(verdict.message), html_escape(status));
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::string section_html(const HtmlSection& section, std::size_t index, bool all) {
  const PairVerdict& verdict = section.verdict;
  const std::string result = result_of(verdict);
  std::string html = fmt::format(
      "<section class=\"pair\" id=\"pair-{}\"><h2>{} vs {}: <span class=\"result-{}\">{}</span></h2>\n", index,
      html_escape(verdict.golden), html_escape(verdict.implementation), result == "pass*" ? "pass" : result, result);
  if (!section.description.empty()) html += fmt::format("<p>{}</p>\n", html_escape(section.description));
  for (const std::string& note : section.notes) html += fmt::format("<p><i>{}</i></p>\n", html_escape(note));
  if (verdict.kind != PairVerdict::Kind::judged) {
    return html + fmt::format("<p>{}: {}</p></section>\n", result, html_escape(verdict.message));
  }
  html += tensor_table(verdict.report);
  html += fmt::format("<p>Tolerance: {}.</p>\n", html_escape(tolerance_rule(verdict.report)));
  if (section.maps.empty()) {
    html += all ? "<p>No tensor had values to draw.</p>\n"
                : "<p>No tensor fails, so there is no map (<code>--all</code> draws every tensor).</p>\n";
  } else {
    html += "<div class=\"maps\">\n";
    for (const Heatmap& map : section.maps) html += heatmap_figure_html(map);
    html += "</div>\n";
  }
  return html + "</section>\n";
}

}  // namespace

std::string render_html(const HtmlReport& report) {
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attncheck report</title>"
      "<style>{}</style></head><body>\n<h1>attncheck report</h1>\n<p><code>{}</code></p>\n",
      kStyle, html_escape(report.command));
  html += matrix_html(report.matrix);
  html += colour_scale_html();
  html += summary_table(report);
  for (std::size_t i = 0; i < report.sections.size(); ++i) html += section_html(report.sections[i], i, report.all);
  return html + "</body></html>\n";
}

void add_html_options(CLI::App& command, std::string& html, bool& all) {
  CLI::Option* html_option = command.add_option(
      "--html", html,
      "also write a self-contained HTML report: the summary, and a heatmap of error / tolerance for every failing "
      "tensor");
  command.add_flag("--all", all, "with --html: draw every compared tensor, not only the failing ones")
      ->needs(html_option);
}

namespace {

void refuse_html_path(const std::string& path, const std::string& problem) {
  ViolationList violations;
  violations.add("--html", path, problem, "a file path in a writable folder, e.g. report.html");
  violations.throw_if_any("invalid option");
}

}  // namespace

void check_html_path(const std::string& path) {
  if (path.empty()) return;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) refuse_html_path(path, "is a folder, not a file");
  std::ofstream file(path, std::ios::binary | std::ios::app);
  if (!file) refuse_html_path(path, "cannot be written");
}

void write_html_report(const std::string& path, const HtmlReport& report) {
  const std::string html = render_html(report);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file.write(html.data(), static_cast<std::streamsize>(html.size()));
  if (!file) refuse_html_path(path, "cannot be written");
}

}  // namespace attncheck::cli
