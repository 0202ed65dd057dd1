#include "cli/heatmap_picture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cli/png_image.hpp"

namespace attncheck::cli {

namespace {

struct Stop {
  double at;  // position on the scale's segment, 0 .. 1
  Rgb colour;
};

// Within tolerance: log10 r from -4 to 0. Beyond: log10 r from 0 to 12 (heatmap_picture.hpp): an fp64
// candidate that is plainly wrong is ~1e10 x its tolerance, a low-precision one ~1e3.
constexpr Stop kWithin[] = {{0.0, {11, 16, 32}}, {1.0, {52, 86, 143}}};
constexpr Stop kBeyond[] = {
    {0.0, {215, 48, 31}}, {1.0 / 3, {252, 141, 89}}, {2.0 / 3, {253, 204, 138}}, {1.0, {255, 247, 236}}};
constexpr double kWithinDecades = 4.0, kBeyondDecades = 12.0;
constexpr Rgb kNonFinite = {255, 0, 255}, kNoElement = {255, 255, 255};

template <std::size_t N>
Rgb interpolate(const Stop (&stops)[N], double at) {
  at = std::clamp(at, 0.0, 1.0);
  for (std::size_t i = 1; i < N; ++i) {
    if (at <= stops[i].at) {
      const double f = (at - stops[i - 1].at) / (stops[i].at - stops[i - 1].at);
      Rgb colour{};
      for (int c = 0; c < 3; ++c) {
        colour[c] = static_cast<std::uint8_t>(
            std::lround(stops[i - 1].colour[c] + f * (stops[i].colour[c] - stops[i - 1].colour[c])));
      }
      return colour;
    }
  }
  return stops[N - 1].colour;
}

std::string hex(const Rgb& colour) {
  return fmt::format("#{:02x}{:02x}{:02x}", colour[0], colour[1], colour[2]);
}

// The smallest of 1, 2, 5 x 10^k that is >= x (x > 0).
std::int64_t nice_step(double x) {
  std::int64_t power = 1;
  while (true) {
    for (std::int64_t m : {1, 2, 5}) {
      if (static_cast<double>(m * power) >= x) return m * power;
    }
    power *= 10;
  }
}

struct Tick {
  double offset;  // pixels from the axis' start, at the tick
  std::string label;
};

// Ticks at groups (heads, batch rows, ranks; the middle of each labelled group) or, without groups, at
// round element indices; at least `spacing` pixels apart.
std::vector<Tick> axis_ticks(const HeatmapAxis& axis, int cell_pixels, double spacing) {
  std::vector<Tick> ticks;
  if (axis.extent <= 1 && axis.group == 0) return ticks;
  const auto pixel_of = [&](std::int64_t element) {
    return static_cast<double>(element) / static_cast<double>(axis.bin) * cell_pixels;
  };
  if (axis.group > 0) {
    const std::int64_t groups = (axis.extent + axis.group - 1) / axis.group;
    const double per_group = pixel_of(axis.group);
    const std::int64_t every = nice_step(std::max(1.0, spacing / std::max(per_group, 1e-9)));
    for (std::int64_t g = 0; g < groups; g += every) {
      const double first = pixel_of(g * axis.group), last = pixel_of(std::min(axis.extent, (g + 1) * axis.group));
      ticks.push_back({(first + last) / 2, std::to_string(g)});
    }
    return ticks;
  }
  const double total = static_cast<double>(axis.cells()) * cell_pixels;
  const std::int64_t step = nice_step(std::max(1.0, spacing * static_cast<double>(axis.extent) / total));
  for (std::int64_t element = 0; element < axis.extent; element += step) {
    ticks.push_back({pixel_of(element / axis.bin * axis.bin) + cell_pixels / 2.0, std::to_string(element)});
  }
  return ticks;
}

std::string axis_title(const HeatmapAxis& axis) {
  return axis.group > 0 ? axis.group_name : axis.title;
}

std::string bin_text(const HeatmapAxis& axis) {
  if (axis.bin == 1) return "";
  return fmt::format(" ({} {}s per cell)", axis.bin, axis.group > 1 ? axis.unit : axis.title);
}

std::string ratio_text(double ratio) {
  if (std::isinf(ratio)) return "non-finite";
  return fmt::format("{:.3g} x tolerance", ratio);
}

}  // namespace

Rgb error_colour(double ratio) {
  if (std::isnan(ratio)) return kNoElement;
  if (std::isinf(ratio)) return kNonFinite;
  if (ratio <= 1.0) {
    const double decades = ratio > 0.0 ? std::log10(ratio) : -kWithinDecades;
    return interpolate(kWithin, (decades + kWithinDecades) / kWithinDecades);
  }
  return interpolate(kBeyond, std::log10(ratio) / kBeyondDecades);
}

std::string html_escape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string heatmap_figure_html(const Heatmap& map) {
  const std::int64_t rows = map.rows.cells(), columns = map.columns.cells();
  // Whole pixels per cell, so that every cell is a crisp block of the PNG (no resampling by the browser).
  const int cell_width = static_cast<int>(std::clamp<std::int64_t>(720 / std::max<std::int64_t>(columns, 1), 1, 40));
  const int cell_height = static_cast<int>(std::clamp<std::int64_t>(360 / std::max<std::int64_t>(rows, 1), 1, 28));
  RgbImage image{.width = static_cast<int>(columns) * cell_width, .height = static_cast<int>(rows) * cell_height};
  image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * 3);
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      const Rgb colour = error_colour(map.at(y / cell_height, x / cell_width));
      std::copy(colour.begin(), colour.end(),
                image.pixels.begin() + (static_cast<std::size_t>(y) * image.width + x) * 3);
    }
  }
  constexpr int kLeft = 78, kTop = 10, kRight = 16, kBottom = 46, kMinimumWidth = 240;
  // Wide enough for the column axis' title too (about 6.5 pixels per character at 11 px).
  const std::string column_title = axis_title(map.columns);
  const int title_width = static_cast<int>(6.5 * static_cast<double>(column_title.size()));
  const int width = std::max({kLeft + image.width + kRight, kLeft + title_width + kRight, kMinimumWidth});
  const int height = kTop + image.height + kBottom;
  std::string svg =
      fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}">)"
                  R"(<image class="cells" x="{}" y="{}" width="{}" height="{}" href="data:image/png;base64,{}"/>)"
                  R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#9aa0a6"/>)",
                  width, height, width, height, kLeft, kTop, image.width, image.height, base64(encode_png(image)),
                  kLeft - 0.5, kTop - 0.5, image.width + 1, image.height + 1);
  for (const Tick& tick : axis_ticks(map.rows, cell_height, 13.0)) {
    const double y = kTop + tick.offset;
    svg += fmt::format(R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#5f6368"/>)"
                       R"(<text x="{}" y="{:.1f}" text-anchor="end" dominant-baseline="middle">{}</text>)",
                       kLeft - 4, y, kLeft - 1, y, kLeft - 6, y, html_escape(tick.label));
  }
  for (const Tick& tick : axis_ticks(map.columns, cell_width, map.columns.group > 0 ? 16.0 : 36.0)) {
    const double x = kLeft + tick.offset;
    svg += fmt::format(R"(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#5f6368"/>)"
                       R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)",
                       x, kTop + image.height + 1, x, kTop + image.height + 4, x, kTop + image.height + 16,
                       html_escape(tick.label));
  }
  // Centred under the cells, or from their left edge when they are narrower than the title.
  const bool narrow = image.width < title_width;
  svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="{}">{}</text>)", narrow ? kLeft : kLeft + image.width / 2,
                     kTop + image.height + 36, narrow ? "start" : "middle", html_escape(column_title));
  if (map.rows.extent > 1 || map.rows.group > 0) {
    svg += fmt::format(R"svg(<text transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>)svg",
                       kTop + image.height / 2, html_escape(axis_title(map.rows)));
  }
  if (map.worst_row >= 0) {
    // At least 10 pixels wide and tall, centred on the cell, so that a one-pixel cell is still found.
    const double w = std::max(cell_width, 10), h = std::max(cell_height, 10);
    const double x = kLeft + (map.worst_column + 0.5) * cell_width - w / 2;
    const double y = kTop + (map.worst_row + 0.5) * cell_height - h / 2;
    svg += fmt::format(
        R"(<rect class="worst" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="#00e676" )"
        R"(stroke-width="2"><title>worst: {}</title></rect>)",
        x, y, w, h, html_escape(map.worst_where));
  }
  svg += "</svg>";
  const std::string caption =
      fmt::format("<b>{}</b> <span class=\"status {}\">{}</span>: rows {}{}; columns {}{}", html_escape(map.title),
                  map.status == "ok" ? "ok" : "fail", html_escape(map.status),
                  html_escape(map.rows.extent > 1 ? map.rows.title : "-"), html_escape(bin_text(map.rows)),
                  html_escape(map.columns.title), html_escape(bin_text(map.columns)));
  const std::string worst = map.worst_row < 0 ? "no element compared"
                                              : fmt::format("worst cell (outlined in green): {} at {}",
                                                            ratio_text(map.worst_ratio), html_escape(map.worst_where));
  return fmt::format(
      "<figure class=\"heatmap\" data-tensor=\"{}\" data-rows=\"{}\" data-columns=\"{}\" data-row-bin=\"{}\" "
      "data-row-group=\"{}\" data-column-bin=\"{}\" data-column-group=\"{}\" data-worst-row=\"{}\" "
      "data-worst-column=\"{}\"><figcaption>{}</figcaption>{}<p class=\"worst-note\">{}</p></figure>\n",
      html_escape(map.title), rows, columns, map.rows.bin, map.rows.group, map.columns.bin, map.columns.group,
      map.worst_row, map.worst_column, caption, svg, worst);
}

std::string colour_scale_html() {
  // The bar, one width per decade: within tolerance on the left quarter, beyond on the rest.
  constexpr double kWithinShare = 100.0 * kWithinDecades / (kWithinDecades + kBeyondDecades);
  std::string gradient = "linear-gradient(to right";
  for (const Stop& stop : kWithin) gradient += fmt::format(", {} {:.2f}%", hex(stop.colour), stop.at * kWithinShare);
  for (const Stop& stop : kBeyond) {
    gradient += fmt::format(", {} {:.2f}%", hex(stop.colour), kWithinShare + stop.at * (100.0 - kWithinShare));
  }
  gradient += ")";
  std::string labels;
  const std::pair<double, const char*> marks[] = {
      {0, "&le;1e-4 (and 0)"}, {12.5, "1e-2"}, {25, "1 = tolerance"}, {50, "1e4"}, {75, "1e8"}, {100, "&ge;1e12"}};
  for (const auto& [at, text] : marks) {
    labels += fmt::format("<span style=\"left:{}%\">{}</span>", at, text);
  }
  return fmt::format(
      "<div class=\"scale\"><p>Colour of a cell: the largest |actual &minus; expected| / tolerance over the "
      "elements it covers, on a log scale; within tolerance (&le; 1) dark blue, beyond it red to white. "
      "<span class=\"swatch\" style=\"background:{}\"></span> non-finite where the expected value is finite; "
      "<span class=\"swatch\" style=\"background:{}\"></span> no element (a rank that holds no line of "
      "that head). The worst cell is outlined in green.</p>"
      "<div class=\"bar\" style=\"background:{}\"></div><div class=\"bar-labels\">{}</div></div>\n",
      hex(kNonFinite), hex(kNoElement), gradient, labels);
}

}  // namespace attncheck::cli
