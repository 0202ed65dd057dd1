// `--html FILE` (compare, golden check, run, replay): one self-contained HTML page, no network and no
// script: a summary table of the (golden, implementation) pairs, then per pair its comparison table and
// a heatmap of error / tolerance for every failing tensor (every compared tensor with `--all`), drawn
// by core/compare/heatmap.hpp and cli/heatmap_picture.hpp, with the colour scale stated once at the top.
//
// Page layout:
//   <h1> attncheck report; the command line
//   colour scale (heatmap_picture.hpp)
//   <table class="summary">  golden | implementation | result | worst tensor | ulps | failing tensors,
//                            each row linking to its section
//   <section class="pair" id="pair-N">  per pair: heading, geometry, notes, <table class="tensors"> (the
//                            text report's columns plus tolerance), the tolerance rule, then
//                            <figure class="heatmap"> per map
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/junit_report.hpp"
#include "core/compare/heatmap.hpp"

namespace attncheck::cli {

struct HtmlSection {
  PairVerdict verdict;             // golden, implementation, verdict, report (judged) or message
  std::string description;         // the golden's geometry in one line
  std::vector<std::string> notes;  // e.g. "rank gradients not compared: ..."
  std::vector<Heatmap> maps;
};

struct HtmlReport {
  std::string command;  // what was run, shown at the top
  bool all = false;     // maps of every compared tensor, not only failing ones
  std::vector<HtmlSection> sections;
  SupportMatrix matrix;  // `run` over the ladder's goldens: shown first (cli/support_matrix.hpp)
};

// Adds `--html FILE` and `--all` (which needs --html) to a command.
void add_html_options(CLI::App& command, std::string& html, bool& all);

// Before any work: InputError (exit 2) naming --html unless `path` (when not empty) can be written.
// Creates the file empty if it does not exist.
void check_html_path(const std::string& path);

// Writes the page to `path`; InputError (exit 2) naming --html when the file cannot be written.
void write_html_report(const std::string& path, const HtmlReport& report);

// The page as text (write_html_report writes this).
std::string render_html(const HtmlReport& report);

}  // namespace attncheck::cli
