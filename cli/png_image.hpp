// PNG images for the HTML report's heatmaps, encoded with libpng into memory, and base64 for embedding
// them as data: URIs (the report is one self-contained file).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::cli {

// An 8-bit RGB image: pixels row-major, 3 bytes each (red, green, blue).
struct RgbImage {
  int width = 0, height = 0;
  std::vector<std::uint8_t> pixels;  // width * height * 3
};

// The PNG file's bytes; std::runtime_error if libpng fails.
std::string encode_png(const RgbImage& image);

// RFC 4648 base64 with padding.
std::string base64(std::string_view bytes);

}  // namespace attncheck::cli
