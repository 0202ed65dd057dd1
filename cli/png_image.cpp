#include "cli/png_image.hpp"

#include <png.h>

#include <stdexcept>

namespace attncheck::cli {

namespace {

void append_to_string(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), length);
}

void flush_nothing(png_structp) {}

}  // namespace

std::string encode_png(const RgbImage& image) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3) {
    throw std::runtime_error("encode_png: the pixel buffer does not match the image's size");
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) throw std::runtime_error("encode_png: png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  std::string bytes;
  // libpng reports errors by longjmp; nothing with a destructor is created between here and the end.
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info == nullptr ? nullptr : &info);
    throw std::runtime_error("encode_png: libpng failed to encode the image");
  }
  png_set_write_fn(png, &bytes, append_to_string, flush_nothing);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const std::size_t stride = static_cast<std::size_t>(image.width) * 3;
  for (int row = 0; row < image.height; ++row) {
    png_write_row(png, const_cast<png_bytep>(image.pixels.data() + stride * static_cast<std::size_t>(row)));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return bytes;
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  text.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t count = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      group = (group << 8) | (j < count ? static_cast<std::uint8_t>(bytes[i + j]) : 0u);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      text.push_back(j <= count ? kAlphabet[(group >> (18 - 6 * j)) & 63u] : '=');
    }
  }
  return text;
}

}  // namespace attncheck::cli
