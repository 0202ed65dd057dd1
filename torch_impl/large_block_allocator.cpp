// large_block_allocator.hpp: a c10::Allocator over LibTorch's default CPU allocator. The raw interface
// (raw_deleter: data == context) is kept, as LibTorch's own allocator has it: the deleter finds a mapped
// block in a registry by its address (few: only blocks of 64 MiB or more), anything else is LibTorch's.
//
// A freed mapped block is kept for the next request of exactly its size (attention's [seq, seq] tensors
// come back once per head and step), which spares the kernel's zeroing of fresh pages (mapping every block
// of 32 MiB or more afresh took `attncheck run` from 77.6 to 82.7 s, sys 12 -> 25 s). A request no kept block fits unmaps every
// kept block first, so the mapped bytes never exceed the most that were live at once: the peak is the
// live peak, as without keeping. release_kept_large_blocks() unmaps what is kept when a run ends.
#include "torch_impl/large_block_allocator.hpp"

#include <sys/mman.h>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace attncheck::torch_impl {
namespace {

struct MappedBlocks {
  std::mutex mutex;
  std::unordered_map<void*, std::size_t> live;  // address -> bytes, of blocks LibTorch holds
  std::multimap<std::size_t, void*> kept;       // bytes -> address, of freed blocks kept for reuse
};

MappedBlocks& blocks() {
  static MappedBlocks instance;
  return instance;
}

void unmap_kept(MappedBlocks& mapped) {  // under mapped.mutex
  for (const auto& [bytes, data] : mapped.kept) munmap(data, bytes);
  mapped.kept.clear();
}

void release(void* data) {
  if (data == nullptr) return;
  MappedBlocks& mapped = blocks();
  {
    const std::lock_guard lock(mapped.mutex);
    const auto found = mapped.live.find(data);
    if (found != mapped.live.end()) {
      mapped.kept.emplace(found->second, data);
      mapped.live.erase(found);
      return;
    }
  }
  c10::GetDefaultCPUAllocator()->raw_deallocate(data);
}

void* map_block(std::size_t bytes) {
  MappedBlocks& mapped = blocks();
  const std::lock_guard lock(mapped.mutex);
  void* data = nullptr;
  if (const auto kept = mapped.kept.find(bytes); kept != mapped.kept.end()) {
    data = kept->second;
    mapped.kept.erase(kept);
  } else {
    unmap_kept(mapped);
    data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
      C10_THROW_ERROR(OutOfMemoryError, "attncheck's LibTorch allocator could not map " + std::to_string(bytes) +
                                            " bytes (mmap failed)");
    }
  }
  mapped.live.emplace(data, bytes);
  return data;
}

class LargeBlockAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t bytes) override {
    void* data = bytes < kLargeBlockBytes ? c10::GetDefaultCPUAllocator()->raw_allocate(bytes) : map_block(bytes);
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* destination, const void* source, std::size_t count) const override {
    default_copy_data(destination, source, count);
  }
};

}  // namespace

void install_large_block_allocator() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    static LargeBlockAllocator allocator;
    // Priority above the default's (0): c10 keeps the allocator of the highest priority set.
    c10::SetCPUAllocator(&allocator, 1);
  });
}

void release_kept_large_blocks() {
  MappedBlocks& mapped = blocks();
  const std::lock_guard lock(mapped.mutex);
  unmap_kept(mapped);
}

}  // namespace attncheck::torch_impl
