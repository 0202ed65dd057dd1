// `attncheck plan --cp N --cp-scheme ulysses|ring`: the (tp, cp) rank table of a context-parallel layout
// (core/model/parallel_layout.hpp): each global rank's TP and CP rank, the sequence chunks it projects (with
// --seq, their token ranges), the heads it attends for and with (Ulysses: a part of its TP rank's, KV heads
// shared where CP exceeds them), and for the ring its neighbours. plan_text.cpp and plan_json.cpp call these.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/plan_report.hpp"

namespace attncheck::cli {

void write_context_parallel(const PlanReport& report, std::ostream& out);
// {"scheme", "cp_size", "load_balanced", "chunk_count", "world_size", "ulysses_kv_replicas", "seq", "ranks": [...]}
nlohmann::json context_parallel_json(const PlanReport& report);

}  // namespace attncheck::cli
