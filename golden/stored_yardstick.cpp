#include "golden/stored_yardstick.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "golden/fnv_digest.hpp"
#include "golden/hdf5_io.hpp"
#include "golden/integrity.hpp"
#include "golden/sha256_fields.hpp"

namespace attncheck::golden {
namespace {

constexpr const char* kGroup = "/yardstick";

using Digest = FnvDigest;

// Every attribute by name (sorted), with its value: strings as text, anything else as its stored bytes.
void digest_attributes(const H5::H5Object& object, const std::string& path, const std::string& file, Digest& digest,
                       bool is_root = false) {
  std::vector<std::string> names = attribute_names(object, file, path);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    // The root's generator (what wrote the file) and integrity digest (which changes when a yardstick is
    // stored: golden/integrity.hpp) say nothing about the case.
    if (is_root && (name == "generator" || name == kIntegrityAttribute)) continue;
    const H5::Attribute attribute = object.openAttribute(name);
    const H5::DataType type = attribute.getDataType();
    digest.field(name);
    if (type.getClass() == H5T_STRING) {
      std::string value;
      attribute.read(attribute.getStrType(), value);
      digest.field(value);
    } else {
      std::vector<unsigned char> raw(attribute.getInMemDataSize());
      attribute.read(type, raw.data());
      digest.field(raw);
    }
  }
}

// A group's members by name, recursively: attributes, and for datasets (with_data) their shape and
// stored bytes, or (without) only their names.
void digest_group(const H5::Group& group, const std::string& path, const std::string& file, Digest& digest,
                  bool with_data) {
  if (with_data) digest_attributes(group, path, file, digest);
  const hsize_t count = group.getNumObjs();
  for (hsize_t i = 0; i < count; ++i) {
    const std::string name = group.getObjnameByIdx(i);
    const std::string child = path + "/" + name;
    digest.field(child);
    const H5O_type_t type = group.childObjType(name);
    if (type == H5O_TYPE_GROUP) {
      digest_group(group.openGroup(name), child, file, digest, with_data);
    } else if (type == H5O_TYPE_DATASET && with_data) {
      const H5::DataSet dataset = group.openDataSet(name);
      digest_attributes(dataset, child, file, digest);
      const H5::DataSpace space = dataset.getSpace();
      std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(space.getSimpleExtentNdims(), 0)));
      if (!dims.empty()) space.getSimpleExtentDims(dims.data());
      digest.bytes(dims.data(), dims.size() * sizeof(hsize_t));
      const H5::DataType data_type = dataset.getDataType();
      if (data_type.getClass() == H5T_INTEGER || data_type.getClass() == H5T_FLOAT) {
        const auto points = static_cast<std::size_t>(space.getSimpleExtentNpoints());
        if (points > static_cast<std::size_t>(kMaxDatasetElements)) {
          fail(file, child, fmt::format("{} values", points),
               fmt::format("a dataset holds at most {} values", kMaxDatasetElements), "see golden/SCHEMA.md");
        }
        std::vector<unsigned char> raw(points * data_type.getSize());
        dataset.read(raw.data(), data_type);
        digest.field(raw);
      }
    }
  }
}

}  // namespace

std::string contract_key(const YardstickContract& contract) {
  return fmt::format("{}.{}.{}", to_string(contract.precision), to_string(contract.rope_angles),
                     to_string(contract.tp_convention));
}

namespace {

std::string digest_of(const H5::H5File& file, const std::string& path) {
  Digest digest;
  try {
    digest_attributes(file.openGroup("/"), "/", path, digest, /*is_root=*/true);
    for (const char* group : {"/geometry", "/inputs", "/weights"}) {
      digest.field(group);
      if (exists(file, group)) digest_group(file.openGroup(group), group, path, digest, true);
    }
    digest.field("/expected");
    if (exists(file, "/expected")) digest_group(file.openGroup("/expected"), "/expected", path, digest, false);
  } catch (const H5::Exception& exception) {
    fail(path, "file", "unreadable", "every object of a golden file must be readable", exception.getDetailMsg());
  }
  return digest.hex();
}

}  // namespace

std::string case_digest(const std::string& path) {
  return digest_of(open_for_reading(path), path);
}

std::string binding_digest(const std::string& file_integrity, const YardstickContract& contract,
                           const std::string& version, const std::string& case_digest, const YardstickErrors& errors) {
  Sha256Fields digest;
  digest.field(kYardstickBindingVersion);
  digest.field(file_integrity);
  digest.field(contract_key(contract));
  digest.field(version);
  digest.field(case_digest);
  for (const auto& [name, error] : errors) {  // YardstickErrors' TensorNameOrder (SCHEMA.md says so)
    digest.field(name);
    digest.field(std::string_view(reinterpret_cast<const char*>(&error), sizeof error));
  }
  return std::string(kYardstickBindingVersion) + ":" + digest.hex();
}

namespace {

// What the link `name` in `parent` is and points to, for /yardstick's structure: "group" for a hard link to a
// group, else a description of what is there instead ("a dataset", "a soft link", ...).
std::string member_kind(const H5::Group& parent, const std::string& name) {
  H5L_info_t link{};
  if (H5Lget_info(parent.getId(), name.c_str(), &link, H5P_DEFAULT) < 0) return "unreadable";
  if (link.type == H5L_TYPE_SOFT) return "a soft link (links are not followed)";
  if (link.type != H5L_TYPE_HARD) return "an external link (links are not followed)";
  switch (parent.childObjType(name)) {
    case H5O_TYPE_GROUP:
      return "group";
    case H5O_TYPE_DATASET:
      return "a dataset";
    case H5O_TYPE_NAMED_DATATYPE:
      return "a named datatype";
    default:
      return "another kind of object";
  }
}

// /yardstick as the schema allows it (absent, or a group of contract groups holding attributes only), else
// InputError naming the object: HDF5 would otherwise throw from openGroup (an abort, not exit 2). Returns
// whether /yardstick exists.
bool check_structure(const H5::H5File& file, const std::string& path) {
  const H5::Group root = file.openGroup("/");
  if (H5Lexists(root.getId(), "yardstick", H5P_DEFAULT) <= 0) return false;
  const std::string rule = "the schema's /yardstick is a group of contract groups, each holding attributes only";
  const std::string advice = "delete /yardstick (h5py: del f['yardstick']) and store it again with `attncheck "
                             "golden yardstick`";
  if (const std::string kind = member_kind(root, "yardstick"); kind != "group") fail(path, kGroup, kind, rule, advice);
  const H5::Group group = file.openGroup(kGroup);
  const hsize_t count = group.getNumObjs();
  for (hsize_t i = 0; i < count; ++i) {
    const std::string name = group.getObjnameByIdx(i);
    const std::string member = std::string(kGroup) + "/" + name;
    if (const std::string kind = member_kind(group, name); kind != "group") fail(path, member, kind, rule, advice);
    if (group.openGroup(name).getNumObjs() > 0) {
      fail(path, member, fmt::format("a group holding {} objects", group.openGroup(name).getNumObjs()), rule, advice);
    }
  }
  return true;
}

}  // namespace

std::optional<StoredYardstick> read_stored_yardstick(const std::string& path, const YardstickContract& contract,
                                                     const std::string& version, const std::string& verified_digest) {
  const std::string group_path = std::string(kGroup) + "/" + contract_key(contract);
  const std::string where = path + ":" + group_path;
  const H5::H5File file = open_for_reading(path);
  try {
    if (!check_structure(file, path) || !exists(file.openGroup(kGroup), contract_key(contract))) return std::nullopt;
    // The file at the path now is not the one its reader verified (replaced while an implementation ran):
    // its yardstick is nothing to this check, which computes its own.
    if (!verified_digest.empty() &&
        read_string_attribute(file.openGroup("/"), kIntegrityAttribute, path + ":/") != verified_digest) {
      return std::nullopt;
    }
    const H5::Group group = file.openGroup(group_path);
    // The version first: the digest reads the whole case.
    if (read_string_attribute(group, "version", where) != version) return std::nullopt;
    const std::string digest = digest_of(file, path);
    if (read_string_attribute(group, "case_digest", where) != digest) return std::nullopt;
    StoredYardstick stored;
    for (const std::string& name : attribute_names(group, path, group_path)) {
      if (name == "version" || name == "case_digest" || name == "binding") continue;
      const std::optional<double> error = read_double_attribute(group, name, where);
      if (!error || !std::isfinite(*error) || *error < 0.0) {
        fail(path, group_path + "@" + name, error ? fmt::format("{}", *error) : "absent",
             "a stored yardstick error is a finite, non-negative float64",
             "recompute it with `attncheck golden yardstick`");
      }
      stored.errors[name] = *error;
    }
    const std::optional<std::string> binding = read_string_attribute(group, "binding", where);
    // Over the digest verified when the golden was read, not the path's attribute now.
    stored.bound = !verified_digest.empty() && binding &&
                   *binding == binding_digest(verified_digest, contract, version, digest, stored.errors);
    return stored;
  } catch (const H5::Exception& exception) {
    fail(path, kGroup, "unreadable", "a stored yardstick must be readable", exception.getDetailMsg());
  }
}

bool write_stored_yardstick(const std::string& path, const YardstickContract& contract, const std::string& version,
                            const YardstickErrors& errors, const std::string& computed_from) {
  std::string integrity;
  try {
    // One open for everything: the digest checked, the case digest taken and the group written are of one file.
    H5::H5File file(path, H5F_ACC_RDWR);
    check_structure(file, path);
    // A damaged file is refused here; one without a digest gets a yardstick without a binding, which every
    // check verifies by recomputing it (`golden seal` the file first to store a usable one).
    verify_integrity(file, path, &integrity);
    if (integrity != computed_from) {
      fail(path, "/@integrity",
           fmt::format("{} now, {} when its yardstick was computed", integrity.empty() ? "none" : integrity,
                       computed_from.empty() ? "none" : computed_from),
           "the file must be the one the yardstick was computed from: it was replaced or edited meanwhile",
           "run `attncheck golden yardstick` again on the file as it is now");
    }
    const std::string digest = digest_of(file, path);
    H5::Group root = exists(file, kGroup) ? file.openGroup(kGroup) : file.createGroup(kGroup);
    const std::string key = contract_key(contract);
    if (exists(root, key)) root.unlink(key);
    H5::Group group = root.createGroup(key);
    write_attribute(group, "version", version);
    write_attribute(group, "case_digest", digest);
    if (!integrity.empty()) {
      write_attribute(group, "binding", binding_digest(integrity, contract, version, digest, errors));
    }
    for (const auto& [name, error] : errors) write_attribute(group, name, error);
  } catch (const H5::Exception& exception) {
    fail(path, kGroup, "not writable", "the golden file must be readable and writable to store a yardstick in it",
         exception.getDetailMsg());
  }
  return !integrity.empty();
}

}  // namespace attncheck::golden
