// NCCL communicators for tensor parallelism, one rank per GPU (issue 7, DESIGN §3's TP semantics):
//   world    every rank: the row-parallel o_proj partials and dx, and the q_norm / k_norm gradients,
//            are all-reduced (summed) over it;
//   replica  the ranks holding the same replicated KV head (plan.replica_groups, split off the world
//            with ncclCommSplit, colour = replica group): k/v_proj and k/v_bias gradients are summed
//            there and only there.
// Two ways to make them: one process driving every GPU (ncclCommInitAll), which cuda_layer uses when a
// machine has at least tp_size GPUs; or one process per rank, joining through a unique id that rank 0
// writes to a file (join_through_file). With fewer GPUs than ranks no communicator is made: the ranks
// run in turn on one device and their partials are summed there (cuda_layer.cpp).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/model/tp_plan.hpp"

namespace attncheck::cuda_impl {

class TpCommunicators {
 public:
  // Rank r on device r, in this process. Requires plan.tp_size devices.
  explicit TpCommunicators(const TpPlan& plan);
  TpCommunicators(const TpCommunicators&) = delete;
  TpCommunicators& operator=(const TpCommunicators&) = delete;
  ~TpCommunicators();

  int ranks() const { return static_cast<int>(world_.size()); }
  // In place, each buffer on its rank's device and enqueued on its rank's stream; float, `count` values.
  void world_sum(const std::vector<float*>& buffers, std::size_t count, const std::vector<cudaStream_t>& streams);
  void replica_sum(const std::vector<float*>& buffers, std::size_t count, const std::vector<cudaStream_t>& streams);

 private:
  std::vector<ncclComm_t> world_;
  std::vector<ncclComm_t> replica_;
};

// One process per rank: rank 0 writes a fresh ncclUniqueId to id_file (through a rename, so nobody
// reads half a file); the others wait for it (up to `timeout`), then every rank calls
// ncclCommInitRank on `device`. Launch: start tp_size processes with the same id_file, each with its
// rank (e.g. `ATTNCHECK_NCCL_ID_FILE=/tmp/tp.id ATTNCHECK_RANK=r ...`, or mpirun's rank variable).
ncclComm_t join_through_file(const std::string& id_file, int rank, int world_size, int device,
                             std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace attncheck::cuda_impl
