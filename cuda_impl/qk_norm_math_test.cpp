// The whole-width QK-norm (rms-full-width) as the CUDA layer shards it (qk_norm_math.hpp, the phases of
// cuda_layer.cpp), on one token's q and k rows cut by real TP plans (core's make_tp_plan, with and
// without replicated KV heads): per-rank float sums, the all-reduces in rank order, the replica rule,
// and the two-stage backward, against the unsharded norm in double and central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/model/geometry.hpp"
#include "core/model/tp_plan.hpp"
#include "cuda_impl/qk_norm_math.hpp"

namespace attncheck::cuda_impl {
namespace {

constexpr double kEps = 1e-6;

// 8 query heads, 2 KV heads: tp 1 and 2 hold whole KV heads, 4 and 8 replicate each on 2 and 4 ranks.
Geometry geometry() {
  return resolve_geometry({.hidden_size = 48,
                           .num_heads = 8,
                           .num_kv_heads = 2,
                           .head_dim = 6,
                           .qk_norm = QkNorm::rms_full_width,
                           .qk_norm_eps = kEps});
}

// Values exact in float, varied in sign and size.
std::vector<float> values(std::int64_t count, int seed) {
  std::vector<float> result(count);
  for (std::int64_t i = 0; i < count; ++i) result[i] = float((i * 7919 + seed * 104729) % 2001 - 1000) / 400.0f;
  return result;
}

int first_rank_of_group(const TpPlan& plan, int r) {
  return int(plan.replica_groups[plan.ranks[r].replica_group].ranks.begin);
}

// The rank's channels of q (its q_proj rows) or k (its k_proj rows).
IndexRange channels(const RankPlan& rank, bool key) {
  return key ? rank.kv_proj_rows : rank.q_proj_rows;
}

// Phase A on one rank: the float sum of x^2 over its channels.
float local_sum_squares(const std::vector<float>& row, IndexRange range) {
  float sum = 0.0f;
  for (std::int64_t c = range.begin; c < range.end; ++c) sum += row[c] * row[c];
  return sum;
}

// The forward all-reduce in rank order; K counted by the first rank of each replica group only, or
// (count_every_replica, the mistake) by every rank.
float all_reduced_sum_squares(const TpPlan& plan, const std::vector<float>& row, bool key, bool count_every_replica) {
  float total = 0.0f;
  for (int r = 0; r < plan.tp_size; ++r) {
    if (key && !count_every_replica && !counts_key_sum_squares(r, first_rank_of_group(plan, r))) continue;
    total += local_sum_squares(row, channels(plan.ranks[r], key));
  }
  return total;
}

double exact_inverse_rms(const std::vector<float>& row) {
  double sum = 0.0;
  for (const float value : row) sum += double(value) * value;
  return 1.0 / std::sqrt(sum / double(row.size()) + kEps);
}

TEST(QkNormMath, InverseRmsFromSum) {
  EXPECT_FLOAT_EQ(inverse_rms_from_sum(4.0f * 24, 24, 0.0f), 0.5f);
  EXPECT_FLOAT_EQ(inverse_rms_from_sum(0.0f, 24, 0.25f), 2.0f);  // eps keeps a zero row finite
}

TEST(QkNormMath, OneRankPerReplicaGroupCountsTheKeySums) {
  for (const std::int64_t tp : valid_tp_sizes(geometry())) {
    const TpPlan plan = make_tp_plan(geometry(), tp);
    std::vector<int> counting(plan.replica_groups.size(), 0);
    for (int r = 0; r < plan.tp_size; ++r) {
      if (counts_key_sum_squares(r, first_rank_of_group(plan, r))) ++counting[plan.ranks[r].replica_group];
    }
    for (const int ranks : counting) EXPECT_EQ(ranks, 1) << "tp " << tp;
  }
}

// Phase B's normalisation of each rank's channels from the all-reduced sums equals normalising the whole
// row in double; counting a replicated KV head once per replica is caught.
TEST(QkNormMath, SplitRowNormalisedFromAllReducedSumsEqualsTheWholeRow) {
  const Geometry g = geometry();
  const std::vector<float> q = values(g.query_width(), 1), k = values(g.kv_width(), 2);
  const std::vector<float> q_weight = values(g.query_width(), 3), k_weight = values(g.kv_width(), 4);
  int replicated_plans = 0;
  for (const std::int64_t tp : valid_tp_sizes(g)) {
    const TpPlan plan = make_tp_plan(g, tp);
    for (const bool key : {false, true}) {
      const std::vector<float>& row = key ? k : q;
      const std::vector<float>& weight = key ? k_weight : q_weight;
      const int width = int(row.size());
      const double exact = exact_inverse_rms(row);
      const float inverse = inverse_rms_from_sum(all_reduced_sum_squares(plan, row, key, false), width, float(kEps));
      for (int r = 0; r < plan.tp_size; ++r) {
        const IndexRange range = channels(plan.ranks[r], key);
        for (std::int64_t c = range.begin; c < range.end; ++c) {
          const float y = row[c] * inverse * weight[c];
          const double expected = double(row[c]) * exact * weight[c];
          EXPECT_NEAR(y, expected, 1e-5 * (1.0 + std::fabs(expected))) << "tp " << tp << " channel " << c;
        }
      }
      if (key && plan.kv_replicas > 1) {  // every replica's K sum: the head weighs kv_replicas times
        ++replicated_plans;
        const float wrong = inverse_rms_from_sum(all_reduced_sum_squares(plan, row, key, true), width, float(kEps));
        EXPECT_GT(std::fabs(wrong - exact), 0.2 * exact) << "tp " << tp;
      }
    }
  }
  EXPECT_EQ(replicated_plans, 2);  // tp 4 and 8
}

// L = sum_c dy_c * y_c(x) in double, y = x / sqrt(mean(x^2) + eps) * w over the whole row.
double loss(const std::vector<double>& x, const std::vector<float>& weight, const std::vector<double>& d_y) {
  double sum = 0.0;
  for (const double value : x) sum += value * value;
  const double inverse = 1.0 / std::sqrt(sum / double(x.size()) + kEps);
  double total = 0.0;
  for (std::size_t c = 0; c < x.size(); ++c) total += d_y[c] * x[c] * inverse * weight[c];
  return total;
}

struct Backward {
  std::vector<double> d_x, d_weight;  // summed over the ranks that hold each channel (replica groups)
};

// Phase B's dots and phase C's gradients on every rank, in float, given each rank's incoming partial
// gradient d_y[r] (a replicated KV head's replicas hold different shares; their sum is the head's d(y));
// subtract_on_every_replica is the mistake the replica rule avoids. Each channel's results are summed
// over the ranks holding it, as k_proj's (and k_norm's) replica sum does.
Backward sharded_backward(const TpPlan& plan, const std::vector<float>& row, const std::vector<float>& weight,
                          const std::vector<std::vector<float>>& d_y, bool key, bool subtract_on_every_replica) {
  const int width = int(row.size());
  const float inverse = inverse_rms_from_sum(all_reduced_sum_squares(plan, row, key, false), width, float(kEps));
  float dot = 0.0f;  // the backward all-reduce: every rank's local sum of dn * n, in rank order
  for (int r = 0; r < plan.tp_size; ++r) {
    const IndexRange range = channels(plan.ranks[r], key);
    float local = 0.0f;
    for (std::int64_t c = range.begin; c < range.end; ++c) local += d_y[r][c] * weight[c] * (row[c] * inverse);
    dot += local;
  }
  Backward result{std::vector<double>(width, 0.0), std::vector<double>(width, 0.0)};
  for (int r = 0; r < plan.tp_size; ++r) {
    const bool subtract = !key || subtract_on_every_replica || first_rank_of_group(plan, r) == r;
    const IndexRange range = channels(plan.ranks[r], key);
    for (std::int64_t c = range.begin; c < range.end; ++c) {
      const float normalised = row[c] * inverse;
      result.d_x[c] += full_width_input_gradient(d_y[r][c] * weight[c], normalised, inverse, dot, width, subtract);
      result.d_weight[c] += d_y[r][c] * normalised;
    }
  }
  return result;
}

// The two-stage backward's sums over ranks equal the unsharded formula and finite differences; leaving
// the n * S / N term to every replica (not only the first) is caught.
TEST(QkNormMath, TwoStageBackwardSummedOverRanksEqualsTheUnshardedGradient) {
  const Geometry g = geometry();
  int replicated_plans = 0;
  for (const std::int64_t tp : valid_tp_sizes(g)) {
    const TpPlan plan = make_tp_plan(g, tp);
    for (const bool key : {false, true}) {
      const std::vector<float> row = values(key ? g.kv_width() : g.query_width(), key ? 5 : 6);
      const std::vector<float> weight = values(std::int64_t(row.size()), key ? 7 : 8);
      const int width = int(row.size());
      // Each rank's share of d(y): a different one per rank; the true d(y) of a channel sums the shares of
      // the ranks holding it.
      std::vector<std::vector<float>> d_y_parts;
      std::vector<double> d_y(width, 0.0);
      for (int r = 0; r < plan.tp_size; ++r) {
        d_y_parts.push_back(values(width, 10 + r));
        const IndexRange range = channels(plan.ranks[r], key);
        for (std::int64_t c = range.begin; c < range.end; ++c) d_y[c] += d_y_parts[r][c];
      }
      const Backward sharded = sharded_backward(plan, row, weight, d_y_parts, key, false);

      // Unsharded, in double: dx = inv * (dn - n * sum(dn * n) / N), dw = dy * n.
      const double inverse = exact_inverse_rms(row);
      double dot = 0.0;
      for (int c = 0; c < width; ++c) dot += d_y[c] * weight[c] * row[c] * inverse;
      std::vector<double> x(row.begin(), row.end());
      for (int c = 0; c < width; ++c) {
        const double normalised = row[c] * inverse;
        const double expected = inverse * (d_y[c] * weight[c] - normalised * dot / width);
        EXPECT_NEAR(sharded.d_x[c], expected, 1e-4 * (1.0 + std::fabs(expected))) << "tp " << tp << " key " << key;
        EXPECT_NEAR(sharded.d_weight[c], d_y[c] * normalised, 1e-4 * (1.0 + std::fabs(d_y[c] * normalised)));
        const double step = 1e-6;
        std::vector<double> plus = x, minus = x;
        plus[c] += step;
        minus[c] -= step;
        const double numeric = (loss(plus, weight, d_y) - loss(minus, weight, d_y)) / (2 * step);
        EXPECT_NEAR(sharded.d_x[c], numeric, 1e-3 * (1.0 + std::fabs(numeric))) << "tp " << tp << " channel " << c;
      }
      if (key && plan.kv_replicas > 1) {
        ++replicated_plans;
        const Backward wrong = sharded_backward(plan, row, weight, d_y_parts, key, true);
        double largest_error = 0.0;
        for (int c = 0; c < width; ++c) {
          largest_error = std::fmax(largest_error, std::fabs(wrong.d_x[c] - sharded.d_x[c]));
        }
        EXPECT_GT(largest_error, 1e-2) << "tp " << tp;
      }
    }
  }
  EXPECT_EQ(replicated_plans, 2);
}

}  // namespace
}  // namespace attncheck::cuda_impl
