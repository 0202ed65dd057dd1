#include "reference/run_time_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "reference/eigen_types.hpp"

namespace attncheck::reference {
namespace {

// Fitted on the committed goldens on the project's quiet VM (docs/MEASUREMENTS.md, "Time estimates"): the
// reference reaches this share of the measured GEMM rate over its whole run (softmax, RoPE, norms and copies
// between the GEMMs); each parameter costs this many operations' time (generating it, touching its pages,
// its gradient's sketch); one run of the emulated layer (fixed-order fma products, rounding every step) costs
// this many times the reference's operations, and this many operations per parameter (its weights rounded
// and read once per product).
constexpr double kReferenceShareOfGemmRate = 1.0;
constexpr double kOperationsPerParameter = 3500.0;
// Each score (a query-key pair of a head, forward and backward: masks, exp, softmax's sums, dS) costs this many
// operations' time besides its products: it dominates narrow heads over long sequences (seq 12288 of one
// 16-wide head: 2.7 s, of which the products are 0.4 s).
constexpr double kOperationsPerScore = 1000.0;
constexpr double kEmulatedOperationsPerReferenceOperation = 4.0;
constexpr double kEmulatedOperationsPerParameter = 2600.0;

}  // namespace

double reference_flops(const Case& test_case) {
  return reference_flops(test_case.plan, test_case.inputs.batch, test_case.inputs.seq, test_case.inputs.decode);
}

double reference_flops(const TpPlan& plan, std::int64_t batch_size, std::int64_t seq_length,
                       const DecodeSchedule& decode) {
  const Geometry& geometry = plan.geometry;
  const double batch = static_cast<double>(batch_size), seq = static_cast<double>(seq_length);
  const double tokens = batch * seq, hidden = static_cast<double>(geometry.hidden_size());
  // Replicated KV heads are computed once per replica by the sharded reference.
  const double replicas = static_cast<double>(std::max(1, plan.kv_replicas));
  const double widths = 2.0 * static_cast<double>(geometry.query_width()) +
                        2.0 * static_cast<double>(geometry.kv_width()) * replicas;
  // Forward: 2 * tokens * hidden * widths; backward twice that (input and weight gradients).
  const double projections = 6.0 * tokens * hidden * widths;
  // Q K^T and P V forward (2 * 2 * seq^2 * head_dim per head and row), four such products backward.
  const double attention = 12.0 * batch * static_cast<double>(geometry.num_heads()) * seq * seq *
                           static_cast<double>(geometry.head_dim());
  // Decoding runs each call's tokens forward again against the cache.
  double decoding = 0.0;
  if (!decode.empty()) {
    const double decoded = static_cast<double>(decode.total());
    decoding = 2.0 * batch * decoded * hidden * widths +
               4.0 * batch * static_cast<double>(geometry.num_heads()) * decoded * decoded *
                   static_cast<double>(geometry.head_dim());
  }
  const double scores = batch * static_cast<double>(geometry.num_heads()) * seq * seq;
  return projections + attention + decoding + kOperationsPerScore * scores;
}

double measured_flop_rate() {
  static std::once_flag once;
  static double rate = 0.0;
  std::call_once(once, [] {
    constexpr Eigen::Index n = 192;
    const RowMatrix a = RowMatrix::Random(n, n), b = RowMatrix::Random(n, n);
    RowMatrix c(n, n);
    double best = 0.0;
    for (int trial = 0; trial < 3; ++trial) {
      const auto start = std::chrono::steady_clock::now();
      for (int repeat = 0; repeat < 8; ++repeat) c.noalias() = a * b;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (seconds > 0) best = std::max(best, 8.0 * 2.0 * static_cast<double>(n * n * n) / seconds);
    }
    rate = best > 0 ? best : 1e9;
    if (c(0, 0) == 12345.678) rate *= 1.0;  // keeps the product from being optimised away
  });
  return rate;
}

double estimated_reference_seconds(const TpPlan& plan, std::int64_t batch, std::int64_t seq,
                                   const DecodeSchedule& decode) {
  const double parameters = static_cast<double>(plan.unsharded_params.total());
  const double work = reference_flops(plan, batch, seq, decode) + kOperationsPerParameter * parameters;
  return work / (measured_flop_rate() * kReferenceShareOfGemmRate);
}

double estimated_reference_seconds(const Case& test_case) {
  return estimated_reference_seconds(test_case.plan, test_case.inputs.batch, test_case.inputs.seq,
                                     test_case.inputs.decode);
}

double estimated_yardstick_seconds(const Case& test_case, Precision precision) {
  // yardstick.hpp's set of runs (fp64's: a candidate beyond 2^16 ulps, held to the fp64 yardstick).
  const double runs = precision == Precision::fp32 ? 20.0 : precision == Precision::fp64 ? 17.0 : 9.0;
  const double parameters = static_cast<double>(test_case.plan.unsharded_params.total());
  const double per_run = kEmulatedOperationsPerReferenceOperation * reference_flops(test_case) +
                         kEmulatedOperationsPerParameter * parameters;
  return runs * per_run / (measured_flop_rate() * kReferenceShareOfGemmRate);
}

std::string describe_duration(double seconds) {
  if (seconds < 90) return fmt::format("about {:.0f} s", std::max(1.0, seconds));
  if (seconds < 90 * 60) return fmt::format("about {:.0f} min", seconds / 60);
  return fmt::format("about {:.1f} h", seconds / 3600);
}

}  // namespace attncheck::reference
