// A golden's integrity digest (golden/SCHEMA.md, "Integrity digest"): SHA-256 (OpenSSL) over a canonical form of
// everything the file defines: every attribute and dataset, numbers as the values they read as (so a flipped bit in a
// datatype's description, which makes the same bytes read as other numbers, changes it too), but not the digest itself
// nor /yardstick (stored yardsticks carry their own digest of the case). attncheck writes it into every golden and case
// file and verifies it whenever it reads one, so that a flipped bit is bad input (exit 2), not a different layer or an
// implementation blamed for the file's damage.
#pragma once

#include <H5Cpp.h>

#include <string>

namespace attncheck::golden {

inline constexpr const char* kIntegrityAttribute = "integrity";  // root attribute, a string
inline constexpr const char* kIntegrityVersion = "attncheck-integrity-v1";

// "attncheck-integrity-v1:<64 hex digits>" of the file as it is now. InputError (naming the object)
// for what no golden holds: a link other than a hard one, an attribute or dataset that is neither
// integer, float nor a scalar string.
std::string integrity_digest(const H5::H5File& file, const std::string& path);

// Writes the digest of the file at `path` as its root attribute `integrity` (replacing one); returns it.
std::string seal_integrity(const std::string& path);

// A file without the attribute was written before attncheck-integrity-v1 or by another writer: it is
// read as before, and the caller says so. A file with one must carry a known version whose digest
// equals the file's, else InputError naming both digests (the file changed after it was sealed).
// digest: set to the verified digest (the attribute as stored) when verified, cleared otherwise.
enum class Integrity { verified, absent };
Integrity verify_integrity(const H5::H5File& file, const std::string& path, std::string* digest = nullptr);

}  // namespace attncheck::golden
