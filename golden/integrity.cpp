#include "golden/integrity.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "golden/hdf5_io.hpp"
#include "golden/sha256_fields.hpp"

namespace attncheck::golden {
namespace {

// Values per read when a dataset is streamed into the digest (8 MiB as float64).
constexpr hsize_t kValuesPerSlab = hsize_t{1} << 20;

std::vector<hsize_t> dimensions(const H5::DataSpace& space) {
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(space.getSimpleExtentNdims(), 0)));
  if (!dims.empty()) space.getSimpleExtentDims(dims.data());
  return dims;
}

// The shape as text, "" for a scalar: "2,6,64".
std::string shape_text(const std::vector<hsize_t>& dims) {
  // fmt::join rather than string concatenation: GCC 12 at -O3 reports a false -Wrestrict in the latter.
  return fmt::format("{}", fmt::join(dims, ","));
}

// "integer", "float" or "string"; InputError for anything else, which no golden holds.
std::string kind_of(const H5::DataType& type, const std::string& file, const std::string& object) {
  switch (type.getClass()) {
    case H5T_INTEGER:
      return "integer";
    case H5T_FLOAT:
      return "float";
    case H5T_STRING:
      return "string";
    default:
      fail(file, object, fmt::format("HDF5 type class {}", static_cast<int>(type.getClass())),
           "a golden holds integers, floats and strings only", "see golden/SCHEMA.md");
  }
}

// A selection of a dataset's numbers, converted by HDF5 to int64 or float64 (little-endian), appended.
void append_numbers(const H5::DataSet& dataset, const std::string& kind, const H5::DataSpace& memory,
                    const H5::DataSpace& file_space, std::vector<unsigned char>& out) {
  const std::size_t old = out.size(), count = static_cast<std::size_t>(memory.getSimpleExtentNpoints());
  out.resize(old + count * 8);
  dataset.read(out.data() + old, kind == "integer" ? H5::PredType::NATIVE_INT64 : H5::PredType::NATIVE_DOUBLE, memory,
               file_space);
}

void digest_attributes(const H5::H5Object& object, const std::string& object_path, const std::string& file,
                       Sha256Fields& digest, bool is_root) {
  std::vector<std::string> names = attribute_names(object, file, object_path);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (is_root && name == kIntegrityAttribute) continue;
    const std::string where = object_path + "@" + name;
    const H5::Attribute attribute = object.openAttribute(name);
    const std::string kind = kind_of(attribute.getDataType(), file, where);
    const H5::DataSpace space = attribute.getSpace();
    const std::vector<hsize_t> dims = dimensions(space);
    digest.field(name);
    digest.field(kind);
    digest.field(shape_text(dims));
    if (kind == "string") {
      if (!dims.empty()) {
        fail(file, where, fmt::format("a string attribute of shape [{}]", shape_text(dims)),
             "a golden's string attributes are scalars", "see golden/SCHEMA.md");
      }
      std::string value;
      attribute.read(attribute.getStrType(), value);
      value.erase(std::find(value.begin(), value.end(), '\0'), value.end());  // fixed-length padding
      digest.field(value);
    } else {
      const auto count = static_cast<std::size_t>(space.getSimpleExtentNpoints());
      std::vector<unsigned char> values(count * 8);
      attribute.read(kind == "integer" ? H5::PredType::NATIVE_INT64 : H5::PredType::NATIVE_DOUBLE, values.data());
      digest.field(values);
    }
  }
}

// A dataset's values, read in slabs of whole rows of its first dimension so that memory stays bounded.
void digest_dataset(const H5::DataSet& dataset, const std::string& dataset_path, const std::string& file,
                    Sha256Fields& digest) {
  digest_attributes(dataset, dataset_path, file, digest, false);
  const std::string kind = kind_of(dataset.getDataType(), file, dataset_path);
  const H5::DataSpace space = dataset.getSpace();
  const std::vector<hsize_t> dims = dimensions(space);
  digest.field(kind);
  digest.field(shape_text(dims));
  if (kind == "string") {
    fail(file, dataset_path, "a string dataset", "a golden's datasets hold integers or floats", "see golden/SCHEMA.md");
  }
  const auto points = static_cast<std::uint64_t>(space.getSimpleExtentNpoints());
  if (points > static_cast<std::uint64_t>(kMaxDatasetElements)) {
    fail(file, dataset_path, fmt::format("{} values", points),
         fmt::format("a dataset holds at most {} values", kMaxDatasetElements), "see golden/SCHEMA.md");
  }
  // The values as one field: its length first (as every field), then the slabs' bytes.
  const std::uint64_t size = points * 8;
  digest.bytes(&size, sizeof size);
  if (points == 0) return;
  if (dims.empty()) {
    std::vector<unsigned char> value;
    append_numbers(dataset, kind, H5::DataSpace(H5S_SCALAR), space, value);
    digest.bytes(value.data(), value.size());
    return;
  }
  const hsize_t row_values = points / dims[0];
  const hsize_t rows_per_slab = std::max<hsize_t>(1, kValuesPerSlab / std::max<hsize_t>(row_values, 1));
  std::vector<unsigned char> slab;
  for (hsize_t first = 0; first < dims[0]; first += rows_per_slab) {
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = first;
    count[0] = std::min(rows_per_slab, dims[0] - first);
    H5::DataSpace file_space = dataset.getSpace();
    file_space.selectHyperslab(H5S_SELECT_SET, count.data(), start.data());
    const H5::DataSpace memory(static_cast<int>(count.size()), count.data());
    slab.clear();
    append_numbers(dataset, kind, memory, file_space, slab);
    digest.bytes(slab.data(), slab.size());
  }
}

// Members by name (sorted bytewise), recursively: each member's path and kind, then its content.
void digest_group(const H5::Group& group, const std::string& group_path, const std::string& file,
                  Sha256Fields& digest) {
  const bool is_root = group_path.empty();
  digest_attributes(group, is_root ? "/" : group_path, file, digest, is_root);
  std::vector<std::string> names;
  const hsize_t count = group.getNumObjs();
  for (hsize_t i = 0; i < count; ++i) names.push_back(group.getObjnameByIdx(i));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string member = group_path + "/" + name;
    if (is_root && name == "yardstick") continue;
    H5L_info_t link{};
    if (H5Lget_info(group.getId(), name.c_str(), &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD) {
      fail(file, member, "a soft or external link", "a golden's objects are groups and datasets (hard links)",
           "store the object itself");
    }
    digest.field(member);
    const H5O_type_t type = group.childObjType(name);
    if (type == H5O_TYPE_GROUP) {
      digest.field("group");
      digest_group(group.openGroup(name), member, file, digest);
    } else if (type == H5O_TYPE_DATASET) {
      digest.field("dataset");
      digest_dataset(group.openDataSet(name), member, file, digest);
    } else {
      fail(file, member, "a named datatype or another object", "a golden's objects are groups and datasets",
           "see golden/SCHEMA.md");
    }
  }
}

}  // namespace

std::string integrity_digest(const H5::H5File& file, const std::string& path) {
  Sha256Fields digest;
  digest.field(kIntegrityVersion);
  try {
    digest_group(file.openGroup("/"), "", path, digest);
  } catch (const H5::Exception& exception) {
    fail(path, "file", "unreadable", "every object of a golden file must be readable", exception.getDetailMsg());
  }
  return std::string(kIntegrityVersion) + ":" + digest.hex();
}

std::string seal_integrity(const std::string& path) {
  std::string digest;
  {
    const H5::H5File file = open_for_reading(path);
    digest = integrity_digest(file, path);
  }
  try {
    H5::H5File file(path, H5F_ACC_RDWR);
    H5::Group root = file.openGroup("/");
    if (root.attrExists(kIntegrityAttribute)) root.removeAttr(kIntegrityAttribute);
    write_attribute(root, kIntegrityAttribute, digest);
  } catch (const H5::Exception& exception) {
    fail(path, std::string("/@") + kIntegrityAttribute, "not written", "the file must be writable",
         exception.getDetailMsg());
  }
  return digest;
}

Integrity verify_integrity(const H5::H5File& file, const std::string& path, std::string* digest) {
  if (digest != nullptr) digest->clear();
  const std::string where = std::string("/@") + kIntegrityAttribute;
  const std::optional<std::string> stored = read_string_attribute(file.openGroup("/"), kIntegrityAttribute, "/");
  if (!stored) return Integrity::absent;
  const std::string prefix = std::string(kIntegrityVersion) + ":";
  if (!stored->starts_with(prefix)) {
    fail(path, where, "'" + *stored + "'", fmt::format("'{}<64 hex digits>'", prefix),
         "a digest of another version (a newer attncheck wrote it), or a damaged one");
  }
  const std::string computed = integrity_digest(file, path);
  if (computed != *stored) {
    fail(path, where, fmt::format("{} stored, {} computed from the file", *stored, computed),
         "the file's content must be what was sealed: it changed after it was written (a flipped bit, a "
         "truncation repaired by a tool, an edit)",
         "make the golden again (attncheck golden make), or, if the edit was deliberate, `attncheck golden seal` it");
  }
  if (digest != nullptr) *digest = computed;
  return Integrity::verified;
}

}  // namespace attncheck::golden
