// Integrity digests (golden/integrity.hpp): every golden attncheck writes carries one and reads back
// verified; a flipped attribute bit or a dataset whose type description changed (the same stored bytes
// read as other numbers) is an InputError naming /@integrity (exit 2), never another layer; a stored
// yardstick leaves it valid; a file without one is read as before; `seal` accepts a deliberate edit.
#include "golden/integrity.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "golden/golden_file.hpp"
#include "golden/hdf5_io.hpp"
#include "golden/stored_yardstick.hpp"
#include "reference/reference.hpp"

namespace attncheck::golden {
namespace {

std::string written_golden(const std::string& name) {
  const Geometry geometry =
      resolve_geometry({.hidden_size = 12, .num_heads = 2, .num_kv_heads = 1, .head_dim = 6, .qk_norm = QkNorm::rms});
  const Case test_case = generate_case(geometry, {.seed = 4, .batch = 1, .seq = 4, .tp_size = 2});
  const Golden golden{.test_case = test_case,
                      .expected = reference::run_reference_tp(test_case),
                      .seed = 4,
                      .generator = "attncheck test"};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("attncheck_integrity_test_" + name + ".h5")).string();
  write_golden(path, golden);
  return path;
}

// The InputError of reading `path`, or "" when it reads.
std::string read_error(const std::string& path) {
  try {
    read_golden(path);
    return "";
  } catch (const InputError& error) {
    return error.what();
  }
}

TEST(Integrity, AWrittenGoldenIsSealedAndReadsVerified) {
  const std::string path = written_golden("sealed");
  EXPECT_EQ(read_golden(path).integrity, Integrity::verified);
  const std::string stored = *read_string_attribute(open_for_reading(path).openGroup("/"), kIntegrityAttribute, path);
  EXPECT_TRUE(stored.starts_with("attncheck-integrity-v1:")) << stored;
  EXPECT_EQ(stored.size(), std::string("attncheck-integrity-v1:").size() + 64);
}

// Issue 20's example: rope_theta 10000 -> 10000.000000000002 (one bit) describes another layer.
TEST(Integrity, AFlippedAttributeBitIsRefusedNamingTheDigest) {
  const std::string path = written_golden("flipped_attribute");
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::Group geometry = file.openGroup("/geometry");
    const double theta = *read_double_attribute(geometry, "rope_theta", path);
    geometry.removeAttr("rope_theta");
    write_attribute(geometry, "rope_theta", std::nextafter(theta, 2 * theta));
  }
  const std::string error = read_error(path);
  EXPECT_NE(error.find("/@integrity"), std::string::npos) << error;
  EXPECT_NE(error.find("changed after it was written"), std::string::npos) << error;
  EXPECT_THROW(read_case(path), InputError);  // a case read (golden run) verifies it too
}

// The stored bytes of /inputs/x unchanged, its type description saying big-endian: they read as other
// numbers. The schema's reader converts them; the digest, over the values read, refuses the file.
TEST(Integrity, ADatatypeDescriptionFlipIsRefused) {
  const std::string path = written_golden("flipped_type");
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::DataSet x = file.openDataSet("/inputs/x");
    const H5::DataSpace space = x.getSpace();
    std::vector<double> values(static_cast<std::size_t>(space.getSimpleExtentNpoints()));
    x.read(values.data(), H5::PredType::IEEE_F64LE);
    file.unlink("/inputs/x");
    H5::DataSet flipped = file.createDataSet("/inputs/x", H5::PredType::IEEE_F64BE, space);
    flipped.write(values.data(), H5::PredType::IEEE_F64BE);  // the little-endian bytes, declared big-endian
  }
  const std::string error = read_error(path);
  EXPECT_NE(error.find("/@integrity"), std::string::npos) << error;
}

TEST(Integrity, AStoredYardstickLeavesTheDigestValid) {
  const std::string path = written_golden("yardstick");
  write_stored_yardstick(path, {Precision::bf16, RopeAngles::float64, TpConvention::replicated_kv}, "test-version",
                         {{"out", 0.5}}, read_golden(path).verified_digest);
  EXPECT_EQ(read_golden(path).integrity, Integrity::verified);
}

// A yardstick is stored only into the file it was computed from (issue 56.2): another file at the path (a
// different digest) is refused, nothing written; a bound one counts only over the digest its reader verified.
TEST(Integrity, AYardstickIsBoundToTheDigestItWasComputedFrom) {
  const std::string path = written_golden("yardstick-bound");
  const YardstickContract contract{Precision::fp32, RopeAngles::float32, TpConvention::replicated_kv};
  const std::string first = read_golden(path).verified_digest;
  ASSERT_FALSE(first.empty());
  const std::string other = "attncheck-integrity-v1:" + std::string(64, '0');
  EXPECT_THROW(write_stored_yardstick(path, contract, "test-version", {{"out", 0.5}}, other), InputError);
  EXPECT_FALSE(read_stored_yardstick(path, contract, "test-version", first).has_value());  // nothing written
  EXPECT_TRUE(write_stored_yardstick(path, contract, "test-version", {{"out", 0.5}}, first));
  EXPECT_TRUE(read_stored_yardstick(path, contract, "test-version", first)->bound);
  // Read by a check that verified another file's digest, the file at the path is not the one it read: nothing.
  EXPECT_FALSE(read_stored_yardstick(path, contract, "test-version", other).has_value());
  // Read by a check that verified none, the group is only a claim (recomputed and compared).
  const std::optional<StoredYardstick> unverified = read_stored_yardstick(path, contract, "test-version", "");
  ASSERT_TRUE(unverified.has_value());
  EXPECT_FALSE(unverified->bound);
}

TEST(Integrity, AFileWithoutADigestIsReadAsBefore) {
  const std::string path = written_golden("absent");
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    file.openGroup("/").removeAttr(kIntegrityAttribute);
  }
  EXPECT_EQ(read_golden(path).integrity, Integrity::absent);
}

TEST(Integrity, SealAcceptsADeliberateEdit) {
  const std::string path = written_golden("resealed");
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::Group root = file.openGroup("/");
    root.removeAttr("generator");
    write_attribute(root, "generator", std::string("edited by hand"));
  }
  EXPECT_NE(read_error(path), "");
  EXPECT_EQ(read_golden(path, IntegrityCheck::skip).integrity, Integrity::absent);
  seal_integrity(path);
  EXPECT_EQ(read_golden(path).integrity, Integrity::verified);
  EXPECT_EQ(read_golden(path).generator, "edited by hand");
}

TEST(Integrity, AnUnknownVersionIsRefusedNamingTheValidForm) {
  const std::string path = written_golden("version");
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::Group root = file.openGroup("/");
    root.removeAttr(kIntegrityAttribute);
    write_attribute(root, kIntegrityAttribute, std::string("attncheck-integrity-v9:00"));
  }
  const std::string error = read_error(path);
  EXPECT_NE(error.find("attncheck-integrity-v1:<64 hex digits>"), std::string::npos) << error;
}

// A soft link anywhere (even where the schema's reader does not look) is refused by the digest.
TEST(Integrity, ALinkIsRefusedByTheDigest) {
  const std::string path = written_golden("link");
  {
    H5::H5File file(path, H5F_ACC_RDWR);
    file.link(H5L_TYPE_SOFT, "/inputs/x", "/expected/alias");
  }
  const std::string error = read_error(path);
  EXPECT_NE(error.find("/expected/alias"), std::string::npos) << error;
}

}  // namespace
}  // namespace attncheck::golden
