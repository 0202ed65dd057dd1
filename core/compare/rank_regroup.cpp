#include "core/compare/rank_regroup.hpp"

#include <fmt/format.h>

#include <charconv>
#include <set>
#include <stdexcept>
#include <utility>

#include "core/compare/sketch.hpp"

namespace attncheck {

std::optional<RankTensorName> parse_rank_tensor_name(std::string_view name) {
  constexpr std::string_view kRanks = "ranks/", kGrads = "/grads/";
  if (!name.starts_with(kRanks)) return std::nullopt;
  RankTensorName parsed;
  const char* digits = name.data() + kRanks.size();
  const auto [end, error] = std::from_chars(digits, name.data() + name.size(), parsed.rank);
  if (error != std::errc() || end == digits || parsed.rank < 0) return std::nullopt;
  std::string_view rest = name.substr(static_cast<std::size_t>(end - name.data()));
  if (!rest.starts_with(kGrads)) return std::nullopt;
  rest.remove_prefix(kGrads.size());
  if (rest.ends_with(kSketchSuffix)) {
    parsed.sketched = true;
    rest.remove_suffix(kSketchSuffix.size());
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos) return std::nullopt;
  parsed.parameter = std::string(rest);
  return parsed;
}

NamedTensors regroup_rank_tensors(NamedTensors tensors, const TpPlan& plan, TpConvention from, TpConvention to) {
  if (from == to) return tensors;
  // The per-rank tensors are taken out (moved, not copied: a real layer's are gigabytes) and put back cut.
  NamedTensors source;
  std::set<std::pair<std::string, bool>> families;  // (parameter, sketched) of the per-rank tensors present
  for (auto entry = tensors.begin(); entry != tensors.end();) {
    const std::optional<RankTensorName> rank_name = parse_rank_tensor_name(entry->first);
    if (!rank_name) {
      ++entry;
      continue;
    }
    if (rank_name->rank >= plan.tp_size) {
      throw std::invalid_argument(
          fmt::format("regroup_rank_tensors: {} names a rank of no {}-rank plan", entry->first, plan.tp_size));
    }
    families.emplace(rank_name->parameter, rank_name->sketched);
    source.insert(tensors.extract(entry++));
  }
  if (families.empty()) return tensors;
  const std::vector<RankHoldings> from_holdings = rank_holdings(plan, from);
  const std::vector<RankHoldings> to_holdings = rank_holdings(plan, to);
  const auto name_of = [](int rank, const std::string& parameter, bool sketched) {
    return fmt::format("ranks/{}/grads/{}{}", rank, parameter, sketched ? kSketchSuffix : "");
  };
  for (const auto& [parameter, sketched] : families) {
    std::vector<const Tensor*> sources;
    for (int r = 0; r < plan.tp_size; ++r) {
      const auto found = source.find(name_of(r, parameter, sketched));
      sources.push_back(found == source.end() ? nullptr : &found->second);
    }
    // A sketch has one row per line, o_proj's too; o_proj in full has its lines as columns.
    const LineAxis axis = !sketched && parameter == "o_proj" ? LineAxis::columns : LineAxis::rows;
    std::vector<Tensor> cut = regroup_lines(parameter, sources, from_holdings, to_holdings, axis);
    for (int r = 0; r < plan.tp_size; ++r) {
      if (cut[r].numel() > 0) tensors[name_of(r, parameter, sketched)] = std::move(cut[r]);
    }
  }
  return tensors;
}

}  // namespace attncheck
