// Checked HDF5 reads and writes for golden files (HDF5 C++ API). Every failure to read what the schema
// promises (file not HDF5 or truncated, missing dataset or attribute, wrong rank, shape or type, a
// non-finite value) becomes an InputError naming the file, the object and what would be valid.
#pragma once

#include <H5Cpp.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/tensor.hpp"

namespace attncheck::golden {

// The most values one dataset may hold (2 GiB as float64): larger declared shapes are bad input.
inline constexpr std::int64_t kMaxDatasetElements = std::int64_t{1} << 28;

// Throws the InputError of a golden file: context "HDF5 file '<file_name>'", one violation.
[[noreturn]] void fail(const std::string& file_name, const std::string& field, const std::string& value,
                       const std::string& rule, const std::string& suggestion);

// The values every dataset of the file declares, summed (each object once, by hard links only; a dataset
// beyond kMaxDatasetElements left out: it is refused by name when read), saturating at 2^60, and the values of
// the largest chunk (HDF5 reads a chunk whole, its checksum covering it: reading part of one, as the integrity
// digest does in slabs, buffers all of it; attncheck writes every dataset as one chunk).
struct DeclaredValues {
  std::uint64_t total = 0;
  std::uint64_t largest_chunk = 0;
};
DeclaredValues declared_values(const H5::H5File& file, const std::string& path);

// Opens an existing file read-only; InputError when it is missing, not HDF5, or damaged, or when the values
// its datasets declare (declared_values, 8 bytes each) do not fit in memory_room().
// counted_by_caller: the caller checks the declared values itself, with more besides (case_file_part.cpp's
// require_room_for_reading adds the tensors a golden generates), before reading anything large.
enum class DeclaredData { checked_here, counted_by_caller };
H5::H5File open_for_reading(const std::string& path, DeclaredData declared = DeclaredData::checked_here);
// Creates (or truncates) a file; InputError when it cannot be written.
H5::H5File create_for_writing(const std::string& path);

bool exists(const H5::H5Location& location, const std::string& name);  // link exists (no error if not)
// Why exists() is false, for messages: "missing", or which component is a soft or external link.
std::string absence(const H5::H5Location& location, const std::string& name);
// Opens a group the schema requires: InputError when it is missing, a link, or a dataset.
H5::Group open_group(const H5::H5File& file, const std::string& path, const std::string& file_name);

// Datasets. Values are stored as little-endian IEEE float64 (or int64) whatever the machine.
void write_tensor(H5::Group& group, const std::string& name, const Tensor& tensor);
void write_integers(H5::Group& group, const std::string& name, const std::vector<std::int64_t>& values,
                    const Shape& shape);

// Reads a float64 dataset. expected_shape, when given, must match exactly. Non-finite values are
// refused unless allow_non_finite (a candidate's NaN is a comparison failure, not bad input).
Tensor read_tensor(const H5::H5File& file, const std::string& path, const std::string& file_name,
                   const std::optional<Shape>& expected_shape, bool allow_non_finite = false);
// Reads an int64 dataset; with expected_shape absent, any rank-1 length is accepted, or, when shape_read
// is given, any shape (returned there for the caller to check).
std::vector<std::int64_t> read_integers(const H5::H5File& file, const std::string& path, const std::string& file_name,
                                        const std::optional<Shape>& expected_shape, Shape* shape_read = nullptr);

// Scalar attributes.
void write_attribute(H5::H5Object& object, const std::string& name, std::int64_t value);
void write_attribute(H5::H5Object& object, const std::string& name, double value);
void write_attribute(H5::H5Object& object, const std::string& name, const std::string& value);
std::optional<std::int64_t> read_integer_attribute(const H5::H5Object& object, const std::string& name,
                                                   const std::string& where);
std::optional<double> read_double_attribute(const H5::H5Object& object, const std::string& name,
                                            const std::string& where);
std::optional<std::string> read_string_attribute(const H5::H5Object& object, const std::string& name,
                                                 const std::string& where);
// The names of an object's attributes, in HDF5's order; InputError beyond 4096 (no schema object has so
// many: a damaged or hostile file).
std::vector<std::string> attribute_names(const H5::H5Object& object, const std::string& where,
                                         const std::string& object_path);

}  // namespace attncheck::golden
