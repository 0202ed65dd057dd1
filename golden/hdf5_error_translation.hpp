// Internal to golden/ (callers elsewhere include golden/golden_file.hpp): how the public functions of
// golden_file.cpp, case_file_part.cpp and candidate_file.cpp turn whatever the HDF5 library throws, and
// running out of memory, into the InputError of the file they read or write.
#pragma once

#include <H5Cpp.h>

#include <new>
#include <string>

#include <fmt/format.h>

#include "core/resources/memory_room.hpp"
#include "golden/hdf5_io.hpp"

namespace attncheck::golden {

// HDF5's C++ exceptions do not derive from std::exception: any that the checked reads (hdf5_io.hpp) did
// not already turn into a named InputError (a damaged file can fail anywhere) is turned into one here, so
// no HDF5 failure escapes as a crash.
template <class Function>
auto translating_hdf5_errors(const std::string& path, const char* action, Function&& function) {
  try {
    return function();
  } catch (const H5::Exception& exception) {
    fail(path, "file", action, "the HDF5 library reported an error (damaged file, or no space to write?)",
         exception.getDetailMsg());
  } catch (const std::bad_alloc&) {
    throw NotEnoughMemory(fmt::format("HDF5 file '{}'", path),
                          {{"file", action, "the file describes more data than fits in memory (the allocator refused)",
                            "check its shapes, or give the process more memory"}});
  }
}

}  // namespace attncheck::golden
