#include "cli/png_image.hpp"

#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <stdexcept>

namespace attncheck::cli {
namespace {

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\xff\x00\xfe", 3)), "/wD+");
}

// The PNG read back with libpng's simplified API gives the same pixels.
TEST(PngImage, RoundTripsThroughLibpng) {
  RgbImage image{.width = 3, .height = 2};
  for (int i = 0; i < 18; ++i) image.pixels.push_back(static_cast<std::uint8_t>(i * 14));
  const std::string bytes = encode_png(image);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  png_image read;
  std::memset(&read, 0, sizeof read);
  read.version = PNG_IMAGE_VERSION;
  ASSERT_TRUE(png_image_begin_read_from_memory(&read, bytes.data(), bytes.size()));
  read.format = PNG_FORMAT_RGB;
  EXPECT_EQ(read.width, 3u);
  EXPECT_EQ(read.height, 2u);
  std::vector<std::uint8_t> pixels(PNG_IMAGE_SIZE(read));
  ASSERT_TRUE(png_image_finish_read(&read, nullptr, pixels.data(), 0, nullptr));
  EXPECT_EQ(pixels, image.pixels);
}

TEST(PngImage, RefusesAMismatchedBuffer) {
  EXPECT_THROW(encode_png(RgbImage{.width = 2, .height = 2, .pixels = std::vector<std::uint8_t>(11)}),
               std::runtime_error);
  EXPECT_THROW(encode_png(RgbImage{}), std::runtime_error);
}

}  // namespace
}  // namespace attncheck::cli
