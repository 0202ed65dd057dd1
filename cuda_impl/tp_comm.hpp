// NCCL communicators for tensor parallelism, one rank per GPU (reductions as core/tp/tp_shard.hpp lists them):
//   world    every rank: the row-parallel o_proj partials and dx, and the per-head q_norm / k_norm
//            gradients, are all-reduced (summed) over it; so are the whole-width QK-norm's per-token
//            sums between a rank's phases (cuda_layer.cpp): the sums of squares of q, and of k with the
//            buffers of replicas other than their group's first left zero (a replicated KV head counted
//            once), and the backward's sums of dn * n of q and k (every rank: each replica holds its own
//            share of the head's gradient);
//   replica  the ranks holding the same replicated KV head (plan.replica_groups, split off the world
//            with ncclCommSplit, colour = replica group): k/v_proj and k/v_bias gradients, and the
//            whole-width norm's k_norm gradient, are summed there and only there (its q_norm gradient
//            is owned: not reduced).
// TpCommunicators: one process driving every GPU (ncclCommInitAll + ncclCommSplit), used by cuda_layer for
// the -tp implementations when tp_size > 1, the machine has at least tp_size GPUs and ATTNCHECK_NCCL is
// not 0. Otherwise no communicator is made: the ranks run in turn on GPU 0 (cuda_layer.cpp).
// join_through_file(): a building block for one process per rank (the world communicator only, no
// replica split); no attncheck program uses it yet.
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
// ncclCommInitRank on `device`. A launcher would start tp_size processes with the same id_file, each with
// its rank; none exists yet.
ncclComm_t join_through_file(const std::string& id_file, int rank, int world_size, int device,
                             std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace attncheck::cuda_impl
