// One heatmap (core/compare/heatmap.hpp) as an HTML figure: an inline SVG holding the cells as an
// embedded PNG, axis ticks and titles, the worst cell outlined, and a caption; plus the colour scale.
//
// Colour scale (stated in the report by colour_scale_html()): a cell's ratio r = error / tolerance,
//   r <= 1 (within tolerance): near-black #0b1020 for r <= 1e-4 (and 0) to muted blue #34568f at r = 1,
//                              linear in log10 r;
//   r > 1 (beyond tolerance):  #d7301f just beyond, #fc8d59 at 1e4, #fdcc8a at 1e8, #fff7ec at >= 1e12,
//                              linear in log10 r between those stops;
//   non-finite where the expected value is finite: magenta #ff00ff; no element (a rank that holds no
//   line of that head): white.
// So a failing head lights up red-to-white and everything within tolerance stays dark.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/compare/heatmap.hpp"

namespace attncheck::cli {

using Rgb = std::array<std::uint8_t, 3>;

Rgb error_colour(double ratio);

// <figure class="heatmap" data-tensor=... data-rows=... data-columns=... ...> with an <svg> whose
// <image class="cells"> spans exactly the cells, and a <rect class="worst"> around the worst cell.
std::string heatmap_figure_html(const Heatmap& map);

// The colour scale as a labelled bar (HTML and CSS, no script).
std::string colour_scale_html();

// Text for HTML: & < > " ' escaped.
std::string html_escape(std::string_view text);

}  // namespace attncheck::cli
