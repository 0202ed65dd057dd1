#include "golden/hdf5_io.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/errors/input_error.hpp"
#include "core/resources/memory_room.hpp"

namespace attncheck::golden {

void fail(const std::string& file_name, const std::string& field, const std::string& value, const std::string& rule,
          const std::string& suggestion) {
  throw InputError(fmt::format("HDF5 file '{}'", file_name), {{field, value, rule, suggestion}});
}

namespace {

void silence_hdf5_once() {
  static const bool silenced = [] {
    H5::Exception::dontPrint();  // errors come back as exceptions and are reported as InputErrors
    return true;
  }();
  (void)silenced;
}

std::string type_name(const H5::DataType& type) {
  switch (type.getClass()) {
    case H5T_FLOAT:
      return fmt::format("float{}", 8 * type.getSize());
    case H5T_INTEGER:
      return fmt::format("int{}", 8 * type.getSize());
    case H5T_STRING:
      return "string";
    default:
      return "a non-numeric type";
  }
}

// The dataset's shape; InputError when its element count exceeds kMaxDatasetElements (checked without
// overflow), so a file cannot make the reader allocate what it merely declares.
Shape extent(const H5::DataSpace& space, const std::string& file_name, const std::string& path) {
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  space.getSimpleExtentDims(dims.data());
  hsize_t elements = 1;
  for (hsize_t d : dims) {
    if (d != 0 && elements > static_cast<hsize_t>(kMaxDatasetElements) / d) {
      elements = static_cast<hsize_t>(kMaxDatasetElements) + 1;
      break;
    }
    elements *= d;
  }
  if (elements > static_cast<hsize_t>(kMaxDatasetElements)) {
    fail(file_name, path, fmt::format("[{}]", fmt::join(dims, ", ")), "a dataset holds at most 2^28 values",
         "see golden/SCHEMA.md for the shapes");
  }
  return Shape(dims.begin(), dims.end());
}

// Every filter of a dataset's pipeline must be one this HDF5 library has (h5py's lzf is not): otherwise
// the data cannot be decoded, which must not read as "truncated or corrupt".
void check_filters(const H5::DSetCreatPropList& properties, const std::string& file_name, const std::string& path) {
  for (int i = 0; i < properties.getNfilters(); ++i) {
    unsigned int flags = 0, filter_config = 0;
    std::size_t parameters = 0;
    char name[128] = {};
    const H5Z_filter_t filter = properties.getFilter(i, flags, parameters, nullptr, sizeof name, name, filter_config);
    // Optional ones too: h5py marks lzf optional, and a chunk it compressed still cannot be read.
    if (H5Zfilter_avail(filter) <= 0) {
      fail(file_name, path, fmt::format("filter {} ({})", static_cast<int>(filter), name[0] != 0 ? name : "unnamed"),
           "is a compression filter this HDF5 library does not have, so the data cannot be decoded",
           "store it uncompressed, or with gzip or Fletcher-32 (h5py: compression='gzip')");
    }
  }
}

// Opens a dataset and checks its type class, size and shape.
H5::DataSet open_dataset(const H5::H5File& file, const std::string& path, const std::string& file_name,
                         H5T_class_t type_class, const std::optional<Shape>& expected_shape, Shape& shape) {
  if (!exists(file, path))
    fail(file_name, path, absence(file, path), "the schema requires this dataset", "see golden/SCHEMA.md");
  if (file.childObjType(path) != H5O_TYPE_DATASET) {
    fail(file_name, path, "a group", "the schema requires a dataset here", "see golden/SCHEMA.md");
  }
  try {
    H5::DataSet dataset = file.openDataSet(path);
    const H5::DataType type = dataset.getDataType();
    if (type.getClass() != type_class || type.getSize() != 8) {
      fail(file_name, path, type_name(type), fmt::format("must be {}", type_class == H5T_FLOAT ? "float64" : "int64"),
           type_class == H5T_FLOAT ? "write it as float64 (numpy: astype('<f8'))" : "write it as int64");
    }
    // Plain storage only: a virtual or external-storage dataset would read other files.
    const H5::DSetCreatPropList properties = dataset.getCreatePlist();
    check_filters(properties, file_name, path);
    const H5D_layout_t layout = properties.getLayout();
    if ((layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED && layout != H5D_COMPACT) ||
        properties.getExternalCount() != 0) {
      fail(file_name, path, "virtual or external storage", "datasets must be stored in the file itself",
           "rewrite the dataset with h5py or attncheck");
    }
    shape = extent(dataset.getSpace(), file_name, path);
    if (expected_shape && shape != *expected_shape) {
      fail(file_name, path, to_string(shape), fmt::format("shape must be {}", to_string(*expected_shape)),
           "see golden/SCHEMA.md for the layout");
    }
    return dataset;
  } catch (const H5::Exception& error) {
    fail(file_name, path, "unreadable", "the dataset must be readable", error.getDetailMsg());
  }
}

}  // namespace

namespace {

// Sums the values every dataset of the file declares (each object once, reached by hard links only:
// H5Ovisit neither follows soft nor external links), saturating at 2^60.
herr_t add_declared_values(hid_t object, const char* name, const H5O_info_t* info, void* total) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  const hid_t dataset = H5Dopen2(object, name, H5P_DEFAULT);
  if (dataset < 0) return -1;
  const hid_t space = H5Dget_space(dataset);
  const hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
  if (space >= 0) H5Sclose(space);
  // A chunk is read whole (its checksum covers it all): reading part of it buffers the chunk.
  std::uint64_t chunk_values = 0;
  if (const hid_t properties = H5Dget_create_plist(dataset); properties >= 0) {
    hsize_t chunk[H5S_MAX_RANK];
    const int rank = H5Pget_layout(properties) == H5D_CHUNKED ? H5Pget_chunk(properties, H5S_MAX_RANK, chunk) : -1;
    if (rank > 0) {
      chunk_values = 1;
      for (int axis = 0; axis < rank; ++axis) {
        chunk_values = chunk[axis] != 0 && chunk_values > (std::uint64_t{1} << 60) / chunk[axis]
                           ? std::uint64_t{1} << 60
                           : chunk_values * chunk[axis];
      }
    }
    H5Pclose(properties);
  }
  H5Dclose(dataset);
  if (points < 0) return -1;
  // One dataset beyond the per-dataset bound is refused by name when it is read (open_dataset), before
  // anything is allocated; it is left out here so that the message names it rather than the file.
  if (points > kMaxDatasetElements) return 0;
  auto& values = *static_cast<DeclaredValues*>(total);
  values.total = std::min<std::uint64_t>(values.total + static_cast<std::uint64_t>(points), std::uint64_t{1} << 60);
  // As declared, not capped by the dataset's size: HDF5 buffers the whole chunk (a 1-value dataset may
  // declare a chunk of gigabytes); saturating, as the sum.
  values.largest_chunk = std::max<std::uint64_t>(values.largest_chunk, std::min(chunk_values, std::uint64_t{1} << 60));
  return 0;
}

// Every dataset a file declares is read into 8-byte values at most once per schema path; their sum
// must fit in memory_room() before any is read: a small file can declare shapes of many gigabytes,
// and the per-dataset bound (kMaxDatasetElements) alone let a 475 KB golden take 4.5 GB.
void require_room_for_declared_data(const H5::H5File& file, const std::string& path) {
  const std::uint64_t values = declared_values(file, path).total;
  require_memory(fmt::format("HDF5 file '{}'", path), values * 8, [](std::uint64_t room) {
    return fmt::format(
        "its datasets together declare more values than fit in {}; a golden or candidate of a "
        "smaller case (or a larger --max-memory)",
        describe_bytes(room));
  });
}

}  // namespace

DeclaredValues declared_values(const H5::H5File& file, const std::string& path) {
  DeclaredValues values;
  if (H5Ovisit2(file.getId(), H5_INDEX_NAME, H5_ITER_NATIVE, add_declared_values, &values, H5O_INFO_BASIC) < 0) {
    fail(path, "file", "damaged", "every object of the HDF5 file must be readable (truncated or corrupt?)",
         "regenerate it with `attncheck golden make`");
  }
  return values;
}

H5::H5File open_for_reading(const std::string& path, DeclaredData declared) {
  silence_hdf5_once();
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    fail(path, "file", path, "must be an existing regular file", "check the path");
  }
  if (H5::H5File::isHdf5(path) <= 0) {
    fail(path, "file", "not HDF5", "must be an HDF5 file (signature missing: truncated or not HDF5)",
         "regenerate it with `attncheck golden make`");
  }
  H5::H5File file;
  try {
    file.openFile(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& exception) {
    fail(path, "file", "damaged", "the HDF5 file must open (truncated or corrupt?)", exception.getDetailMsg());
  }
  if (declared == DeclaredData::checked_here) require_room_for_declared_data(file, path);
  return file;
}

H5::H5File create_for_writing(const std::string& path) {
  silence_hdf5_once();
  try {
    return H5::H5File(path, H5F_ACC_TRUNC);
  } catch (const H5::Exception& exception) {
    fail(path, "file", path, "must be writable", exception.getDetailMsg());
  }
}

bool exists(const H5::H5Location& location, const std::string& name) {
  // H5Lexists needs every intermediate group to exist, so walk the path one component at a time. Only
  // hard links count: a soft or external link could send the reader to another file, or a FIFO.
  std::string prefix;
  std::size_t start = name.front() == '/' ? 1 : 0;
  if (start == 1) prefix = "/";
  while (start <= name.size()) {
    const std::size_t end = name.find('/', start);
    prefix += name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (H5Lexists(location.getId(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    H5L_info_t info;  // HDF5 1.10 API
    if (H5Lget_info(location.getId(), prefix.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD) {
      return false;
    }
    if (end == std::string::npos) break;
    prefix += '/';
    start = end + 1;
  }
  return true;
}

std::string absence(const H5::H5Location& location, const std::string& name) {
  std::string prefix = name.front() == '/' ? "/" : "";
  std::size_t start = prefix.size();
  while (start <= name.size()) {
    const std::size_t end = name.find('/', start);
    prefix += name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (H5Lexists(location.getId(), prefix.c_str(), H5P_DEFAULT) <= 0) return "missing";
    H5L_info_t info;  // HDF5 1.10 API
    if (H5Lget_info(location.getId(), prefix.c_str(), &info, H5P_DEFAULT) < 0) return "missing";
    if (info.type == H5L_TYPE_SOFT) return fmt::format("{}: a soft link (links are not followed)", prefix);
    if (info.type != H5L_TYPE_HARD) return fmt::format("{}: an external link (links are not followed)", prefix);
    if (end == std::string::npos) break;
    prefix += '/';
    start = end + 1;
  }
  return "present";
}

H5::Group open_group(const H5::H5File& file, const std::string& path, const std::string& file_name) {
  if (!exists(file, path))
    fail(file_name, path, absence(file, path), "the schema requires this group", "see golden/SCHEMA.md");
  if (file.childObjType(path) != H5O_TYPE_GROUP) {
    fail(file_name, path, "a dataset", "the schema requires a group here", "see golden/SCHEMA.md");
  }
  return file.openGroup(path);
}

// Every dataset is one chunk with a Fletcher-32 checksum, so a flipped bit in the data is a read error
// (an InputError), never a silently different value.
H5::DSetCreatPropList checksummed(const std::vector<hsize_t>& dims) {
  H5::DSetCreatPropList properties;
  if (!dims.empty() && std::all_of(dims.begin(), dims.end(), [](hsize_t d) { return d > 0; })) {
    properties.setChunk(static_cast<int>(dims.size()), dims.data());
    properties.setFletcher32();
  }
  return properties;
}

void write_tensor(H5::Group& group, const std::string& name, const Tensor& tensor) {
  const std::vector<hsize_t> dims(tensor.shape.begin(), tensor.shape.end());
  const H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  H5::DataSet dataset = group.createDataSet(name, H5::PredType::IEEE_F64LE, space, checksummed(dims));
  dataset.write(tensor.data(), H5::PredType::NATIVE_DOUBLE);
}

void write_integers(H5::Group& group, const std::string& name, const std::vector<std::int64_t>& values,
                    const Shape& shape) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  const H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  H5::DataSet dataset = group.createDataSet(name, H5::PredType::STD_I64LE, space, checksummed(dims));
  dataset.write(values.data(), H5::PredType::NATIVE_INT64);
}

Tensor read_tensor(const H5::H5File& file, const std::string& path, const std::string& file_name,
                   const std::optional<Shape>& expected_shape, bool allow_non_finite) {
  Shape shape;
  H5::DataSet dataset = open_dataset(file, path, file_name, H5T_FLOAT, expected_shape, shape);
  Tensor tensor(shape);
  try {
    dataset.read(tensor.data(), H5::PredType::NATIVE_DOUBLE);
  } catch (const H5::Exception& exception) {
    fail(file_name, path, "unreadable", "the data must be readable (truncated, or corrupt: a checksum mismatch)",
         exception.getDetailMsg());
  }
  if (!allow_non_finite) {
    for (std::size_t i = 0; i < tensor.values.size(); ++i) {
      if (!std::isfinite(tensor.values[i])) {
        fail(file_name, fmt::format("{}[flat {}]", path, i), fmt::format("{}", tensor.values[i]),
             "every value must be finite", "regenerate the file");
      }
    }
  }
  return tensor;
}

std::vector<std::int64_t> read_integers(const H5::H5File& file, const std::string& path, const std::string& file_name,
                                        const std::optional<Shape>& expected_shape, Shape* shape_read) {
  Shape shape;
  H5::DataSet dataset = open_dataset(file, path, file_name, H5T_INTEGER, expected_shape, shape);
  if (shape_read != nullptr) *shape_read = shape;
  if (!expected_shape && shape_read == nullptr && shape.size() != 1) {
    fail(file_name, path, to_string(shape), "must be a vector (rank 1)", "see golden/SCHEMA.md");
  }
  std::vector<std::int64_t> values(static_cast<std::size_t>(element_count(shape)));
  try {
    dataset.read(values.data(), H5::PredType::NATIVE_INT64);
  } catch (const H5::Exception& exception) {
    fail(file_name, path, "unreadable", "the data must be readable (truncated, or corrupt: a checksum mismatch)",
         exception.getDetailMsg());
  }
  return values;
}

void write_attribute(H5::H5Object& object, const std::string& name, std::int64_t value) {
  H5::Attribute attribute = object.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR));
  attribute.write(H5::PredType::NATIVE_INT64, &value);
}

void write_attribute(H5::H5Object& object, const std::string& name, double value) {
  H5::Attribute attribute = object.createAttribute(name, H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR));
  attribute.write(H5::PredType::NATIVE_DOUBLE, &value);
}

void write_attribute(H5::H5Object& object, const std::string& name, const std::string& value) {
  const H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  H5::Attribute attribute = object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  attribute.write(type, value);
}

namespace {

// Opens attribute `name` if present and checks its type class; nullopt when absent.
std::optional<H5::Attribute> open_attribute(const H5::H5Object& object, const std::string& name,
                                            const std::string& where, H5T_class_t type_class, const char* wanted) {
  if (H5Aexists(object.getId(), name.c_str()) <= 0) return std::nullopt;
  try {
    H5::Attribute attribute = object.openAttribute(name);
    const H5::DataType type = attribute.getDataType();
    if (type.getClass() != type_class) {
      fail(where, name, type_name(type), fmt::format("attribute must be {}", wanted), "see golden/SCHEMA.md");
    }
    // One value: reading an array attribute into a scalar would overrun it.
    if (attribute.getSpace().getSimpleExtentNpoints() != 1) {
      fail(where, name, fmt::format("{} values", attribute.getSpace().getSimpleExtentNpoints()),
           fmt::format("attribute must be a single {} (a scalar dataspace)", wanted), "see golden/SCHEMA.md");
    }
    return attribute;
  } catch (const H5::Exception& exception) {
    fail(where, name, "unreadable", "the attribute must be readable", exception.getDetailMsg());
  }
}

}  // namespace

std::optional<std::int64_t> read_integer_attribute(const H5::H5Object& object, const std::string& name,
                                                   const std::string& where) {
  auto attribute = open_attribute(object, name, where, H5T_INTEGER, "an integer");
  if (!attribute) return std::nullopt;
  std::int64_t value = 0;
  attribute->read(H5::PredType::NATIVE_INT64, &value);
  return value;
}

std::optional<double> read_double_attribute(const H5::H5Object& object, const std::string& name,
                                            const std::string& where) {
  auto attribute = open_attribute(object, name, where, H5T_FLOAT, "a float");
  if (!attribute) return std::nullopt;
  double value = 0.0;
  attribute->read(H5::PredType::NATIVE_DOUBLE, &value);
  return value;
}

std::optional<std::string> read_string_attribute(const H5::H5Object& object, const std::string& name,
                                                 const std::string& where) {
  auto attribute = open_attribute(object, name, where, H5T_STRING, "a string");
  if (!attribute) return std::nullopt;
  std::string value;
  attribute->read(attribute->getStrType(), value);
  return value;
}

std::vector<std::string> attribute_names(const H5::H5Object& object, const std::string& where,
                                         const std::string& object_path) {
  constexpr int kMostAttributes = 4096;
  std::vector<std::string> names;
  try {
    const int count = object.getNumAttrs();
    if (count > kMostAttributes) {
      fail(where, object_path, fmt::format("{} attributes", count),
           fmt::format("at most {} attributes are read", kMostAttributes), "see golden/SCHEMA.md");
    }
    for (int i = 0; i < count; ++i) names.push_back(object.openAttribute(static_cast<unsigned>(i)).getName());
  } catch (const H5::Exception& exception) {
    fail(where, object_path, "unreadable", "its attributes must be readable", exception.getDetailMsg());
  }
  return names;
}

}  // namespace attncheck::golden
