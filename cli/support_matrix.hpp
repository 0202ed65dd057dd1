// The support matrix `attncheck run` opens with: for each rung of the conformance ladder (the committed goldens
// golden/data/ladder_NN_<rung>.h5, docs/LADDER.md) and each implementation, pass / pass* / FAIL / declined / not
// stated / not checked. The ladder climbs from a plain multi-head layer one feature at a time, so the matrix
// says at a glance what a layer supports, what it gets wrong and what it never claimed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/pair_verdict.hpp"

namespace attncheck::cli {

// Whether a golden file (its name) is a rung of the ladder: ladder_NN_<rung>.h5.
bool is_ladder_golden(const std::string& file_name);

struct SupportMatrix {
  struct Rung {
    std::string golden;  // file name
    std::string number;  // "03"
    std::string name;    // "explicit head_dim" (the file name's rung, hyphens as spaces)
    std::string uses;    // the features its case uses, "gqa, explicit-head-dim, rope-half-split, causal, backward"
    std::vector<PairVerdict> verdicts;  // one per implementation, in the matrix's column order
  };
  std::vector<std::string> implementations;
  std::vector<Rung> rungs;
};

// One cell: "pass", "pass*" (judged on what it computed, some parts declined), "FAIL", "declined", "not stated",
// "not checked".
std::string matrix_status(const PairVerdict& verdict);

// A rung from its golden's file name and the features its case uses.
SupportMatrix::Rung ladder_rung(const std::string& file_name, const std::string& uses);

// A table: rung, then a column per implementation; a key below it.
std::string render_text(const SupportMatrix& matrix);
// {"implementations": [...], "rungs": [{"golden", "rung", "name", "uses", "status": {impl: word}, "why": {impl: ...}}]}
nlohmann::json render_json(const SupportMatrix& matrix);

}  // namespace attncheck::cli
