#include "cuda_impl/tp_comm.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "cuda_impl/cuda_check.hpp"

namespace attncheck::cuda_impl {
namespace {

void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw CudaError(std::string("NCCL ") + what + ": " + ncclGetErrorString(status));
}

void sum(const std::vector<ncclComm_t>& comms, const std::vector<float*>& buffers, std::size_t count,
         const std::vector<cudaStream_t>& streams) {
  if (buffers.size() != comms.size() || streams.size() != comms.size()) {
    throw std::invalid_argument("TpCommunicators: one buffer and one stream per rank");
  }
  check_nccl(ncclGroupStart(), "group start");
  for (std::size_t r = 0; r < comms.size(); ++r) {
    check_nccl(ncclAllReduce(buffers[r], buffers[r], count, ncclFloat, ncclSum, comms[r], streams[r]), "all-reduce");
  }
  check_nccl(ncclGroupEnd(), "group end");
}

}  // namespace

TpCommunicators::TpCommunicators(const TpPlan& plan) : world_(plan.tp_size), replica_(plan.tp_size) {
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "device count");
  if (devices < plan.tp_size) {
    throw CudaError("TpCommunicators: " + std::to_string(plan.tp_size) + " ranks need as many GPUs, this machine has " +
                    std::to_string(devices));
  }
  std::vector<int> device_list(plan.tp_size);
  std::iota(device_list.begin(), device_list.end(), 0);
  check_nccl(ncclCommInitAll(world_.data(), plan.tp_size, device_list.data()), "init all");
  // Split is collective over the world: one call per rank inside a group.
  check_nccl(ncclGroupStart(), "group start");
  for (int r = 0; r < plan.tp_size; ++r) {
    check_nccl(ncclCommSplit(world_[r], plan.ranks[r].replica_group, r, &replica_[r], nullptr), "split");
  }
  check_nccl(ncclGroupEnd(), "group end");
}

TpCommunicators::~TpCommunicators() {
  for (ncclComm_t comm : replica_) {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
  for (ncclComm_t comm : world_) {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
}

void TpCommunicators::world_sum(const std::vector<float*>& buffers, std::size_t count,
                                const std::vector<cudaStream_t>& streams) {
  sum(world_, buffers, count, streams);
}

void TpCommunicators::replica_sum(const std::vector<float*>& buffers, std::size_t count,
                                  const std::vector<cudaStream_t>& streams) {
  sum(replica_, buffers, count, streams);
}

ncclComm_t join_through_file(const std::string& id_file, int rank, int world_size, int device,
                             std::chrono::seconds timeout) {
  ncclUniqueId id{};
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "unique id");
    const std::string partial = id_file + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof(id.internal));
      if (!out) throw CudaError("join_through_file: cannot write " + partial);
    }
    std::filesystem::rename(partial, id_file);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::ifstream in(id_file, std::ios::binary);
      if (in.read(id.internal, sizeof(id.internal))) break;
      if (std::chrono::steady_clock::now() > deadline) {
        throw CudaError("join_through_file: rank " + std::to_string(rank) + " found no id in " + id_file +
                        " (is rank 0 running with the same file?)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  check_cuda(cudaSetDevice(device), "join_through_file: device");
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size, id, rank), "init rank");
  return comm;
}

}  // namespace attncheck::cuda_impl
