// Golden, case and candidate files (golden/golden_file.hpp). The bytes become a file in /dev/shm (RAM;
// the temp folder where there is none), read by the real path, open_for_reading with its sum of declared
// shapes, not a second path made for fuzzing, as a golden, as a case and as a candidate. (HDF5 refuses a
// memfd's /proc/self/fd path: it cannot resolve its real path.) --max-memory is 256 MiB here, so a file
// declaring more is refused before it is read.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/resources/memory_room.hpp"
#include "parser_fuzz/fuzz_input.hpp"
#include "golden/golden_file.hpp"

namespace {

// The names a candidate is read for: activations, gradients, decoding and per-rank tensors.
const attncheck::NamedTensors& candidate_names() {
  static const attncheck::NamedTensors names = {{"out", {}},
                                                {"grads/x", {}},
                                                {"grads/q_proj", {}},
                                                {"grads/k_norm", {}},
                                                {"decode/out", {}},
                                                {"ranks/0/grads/q_proj", {}},
                                                {"ranks/1/grads/o_proj", {}}};
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attncheck::set_max_memory(std::uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    const std::filesystem::path folder =
        std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return (folder / ("attncheck-fuzz-golden-" + std::to_string(getpid()) + ".h5")).string();
  }();
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!file) throw std::runtime_error("fuzz harness: " + path + " cannot be written");
  }
  attncheck::fuzz::expect_clean_refusal([&] { attncheck::golden::read_golden(path); });
  attncheck::fuzz::expect_clean_refusal([&] { attncheck::golden::read_case(path); });
  attncheck::fuzz::expect_clean_refusal([&] { attncheck::golden::read_candidate(path, candidate_names()); });
  std::filesystem::remove(path);
  return 0;
}
