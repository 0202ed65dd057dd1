// `attncheck plan` run in-process: the JSON contract, the text a person reads, and exit code 2 with a
// message on stderr (and nothing on stdout) for every kind of bad input.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_app.hpp"
#include "cli/cli_run_for_tests.hpp"
#include "cli/exit_codes.hpp"
#include "core/testing/source_tree.hpp"

namespace attncheck::cli {
namespace {

nlohmann::json run_json(std::vector<std::string> args) {
  args.push_back("--json");
  const CliRun result = run(args);
  EXPECT_EQ(result.exit_code, kExitOk) << result.err;
  return nlohmann::json::parse(result.out);
}

std::string config_path(const std::string& file) {
  return source_tree_path("core/config/hf_configs/" + file);
}

// Writes text to a fresh temporary file and returns its path.
std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("attncheck_cli_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

void expect_bad_input(const std::vector<std::string>& args, const std::string& message_part) {
  const CliRun result = run(args);
  EXPECT_EQ(result.exit_code, kExitBadInput) << result.out << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_NE(result.err.find(message_part), std::string::npos) << "stderr was:\n" << result.err;
}

TEST(PlanCommand, JsonCarriesTheDocumentedKeys) {
  const nlohmann::json plan = run_json({"plan", "--preset", "qwen3-0.6b", "--tp", "2"});
  EXPECT_EQ(plan["hidden_size"], 1024);
  EXPECT_EQ(plan["num_attention_heads"], 16);
  EXPECT_EQ(plan["num_kv_heads"], 8);
  EXPECT_EQ(plan["head_dim"], 128);
  EXPECT_EQ(plan["head_dim_source"], "explicit");
  EXPECT_EQ(plan["quotient_head_dim"], 64);
  EXPECT_EQ(plan["query_width"], 2048);
  EXPECT_EQ(plan["kv_width"], 1024);
  EXPECT_EQ(plan["qkv_width"], 4096);
  EXPECT_EQ(plan["tp_size"], 2);
  EXPECT_EQ(plan["kv_replicas"], 1);
  ASSERT_EQ(plan["ranks"].size(), 2u);
  EXPECT_EQ(plan["ranks"][1]["rank"], 1);
  EXPECT_EQ(plan["ranks"][1]["q_heads"], nlohmann::json({8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(plan["ranks"][1]["kv_heads"], nlohmann::json({4, 5, 6, 7}));
  EXPECT_EQ(plan["ranks"][1]["replica_group"], 1);
  EXPECT_EQ(plan["ranks"][1]["qkv_rows"], 2048);
  EXPECT_EQ(plan["ranks"][1]["kv_cache_bytes_per_token"], 2 * 512 * 2);  // K and V, bf16
  EXPECT_FALSE(plan["ranks"][1].contains("fused_qkv"));
}

TEST(PlanCommand, ReplicatedKvHeadsShowTheirGroup) {
  const nlohmann::json plan = run_json({"plan", "--preset", "gemma-3-270m", "--tp", "4"});
  EXPECT_EQ(plan["kv_replicas"], 4);
  EXPECT_EQ(plan["scale"], 0.0625);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(plan["ranks"][rank]["kv_heads"], nlohmann::json({0}));
    EXPECT_EQ(plan["ranks"][rank]["replica_group"], 0);
  }
  EXPECT_EQ(plan["replica_groups"][0]["ranks"], nlohmann::json({0, 1, 2, 3}));

  const nlohmann::json qwen32 = run_json({"plan", "--preset", "qwen3-32b", "--tp", "16"});
  EXPECT_EQ(qwen32["kv_replicas"], 2);
  EXPECT_EQ(qwen32["ranks"][15]["kv_heads"], nlohmann::json({7}));
  EXPECT_EQ(qwen32["ranks"][15]["replica_group"], 7);
}

TEST(PlanCommand, DerivedHeadDimFromEverySource) {
  EXPECT_EQ(run_json({"plan", "--preset", "gpt-neox-20b"})["head_dim_source"], "derived");
  const nlohmann::json from_file = run_json({"plan", "--hf-config", config_path("EleutherAI__gpt-neox-20b.json")});
  EXPECT_EQ(from_file["head_dim"], 96);
  EXPECT_EQ(from_file["rotary_dim"], 24);
  const nlohmann::json from_flags = run_json({"plan", "--hidden", "6144", "--heads", "64", "--rotary-pct", "0.25"});
  EXPECT_EQ(from_flags["head_dim"], 96);
  EXPECT_EQ(from_flags["head_dim_source"], "derived");
  EXPECT_EQ(from_flags["qkv_width"], 3 * 6144);
}

TEST(PlanCommand, NeoxConfigSuppliesItsTpSize) {
  const std::string path = temp_file("neox.yml",
                                     "{\n  \"hidden-size\": 6144,\n  \"num-attention-heads\": 64,\n"
                                     "  \"model-parallel-size\": 4,\n  \"pos-emb\": \"rotary\",\n}\n");
  EXPECT_EQ(run_json({"plan", "--neox-config", path})["tp_size"], 4);
  EXPECT_EQ(run_json({"plan", "--neox-config", path, "--tp", "8"})["tp_size"], 8);
}

TEST(PlanCommand, TextShowsHeadDimOriginAndTheRankTable) {
  const CliRun result = run({"plan", "--preset", "qwen3-4b", "--tp", "2"});
  ASSERT_EQ(result.exit_code, kExitOk) << result.err;
  EXPECT_NE(result.out.find("128 (explicit; hidden_size / num_heads = 80 would be wrong)"), std::string::npos);
  EXPECT_NE(result.out.find("fused qkv       2560 -> 4096 + 2 x 1024 = 6144"), std::string::npos);
  EXPECT_NE(result.out.find("o_proj          4096 -> 2560"), std::string::npos);
  EXPECT_NE(result.out.find("  1     16-31        4-7       1 (ranks 1)           2048"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("query width 2048 = 1/2 of 4096; KV cache 2,048 of 4,096 B/token = 4/8"),
            std::string::npos);
  EXPECT_EQ(result.err, "");
}

TEST(PlanCommand, LayoutsShowTheFusedRowOrder) {
  const CliRun result = run({"plan", "--preset", "qwen3-0.6b", "--tp", "2", "--layouts"});
  ASSERT_EQ(result.exit_code, kExitOk) << result.err;
  EXPECT_NE(result.out.find("stacked          rank 1: q8-15 k4-7 v4-7"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("grouped          rank 0: q0-1 k0 v0 q2-3 k1 v1"), std::string::npos);
  // GPT-NeoX's GQA since #1315: the rank's [Q | K | V]; before it, per-query-head chunks.
  EXPECT_NE(result.out.find("neox             rank 0: q0-7 k0-3 v0-3"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("neox-before-1315 rank 0: q0 k0[0:64] v0[0:64] q1 k0[64:128] v0[64:128]"),
            std::string::npos);
  const nlohmann::json plan = run_json({"plan", "--preset", "gemma-3-270m", "--tp", "2", "--layouts"});
  EXPECT_TRUE(plan["ranks"][0]["fused_qkv"]["neox"].contains("unsupported"));
  EXPECT_EQ(plan["ranks"][1]["fused_qkv"]["stacked"]["segments"][0]["source_rows"],
            nlohmann::json({512, 768}));  // query heads 2-3
}

TEST(PlanCommand, JsonSurvivesANonUtf8Path) {
  const std::string path = temp_file("\xff.json",
                                     "{\"model_type\": \"llama\", \"hidden_size\": 64, "
                                     "\"num_attention_heads\": 4}");
  const nlohmann::json plan = run_json({"plan", "--hf-config", path});
  EXPECT_EQ(plan["head_dim"], 16);
}

TEST(PlanCommand, TheLargestAllowedPlanStaysSmall) {
  // Head counts are capped at 4096, so even the largest plan's output stays bounded (about 13 MB).
  const CliRun result =
      run({"plan", "--hidden", "4096", "--heads", "4096", "--head-dim", "2", "--tp", "4096", "--layouts", "--json"});
  EXPECT_EQ(result.exit_code, kExitOk) << result.err;
  EXPECT_LT(result.out.size(), 64u << 20);
  expect_bad_input({"plan", "--hidden", "4096", "--heads", "4097", "--head-dim", "2"}, "num_heads = 4097");
}

TEST(PlanCommand, BadGeometryExitsTwoWithTheRule) {
  expect_bad_input({"plan", "--hidden", "1000", "--heads", "16"}, "hidden_size = 992 or 1008");
  expect_bad_input({"plan", "--hidden", "1024", "--heads", "16", "--kv-heads", "3"}, "num_kv_heads = 2 or 4");
  expect_bad_input({"plan", "--hidden", "1024", "--heads", "16", "--head-dim", "128", "--rotary-dim", "63"},
                   "rotary_dim = 62 or 64");
  expect_bad_input({"plan", "--hidden", "0", "--heads", "16"}, "hidden_size = 0");
}

TEST(PlanCommand, TpThatSplitsAHeadExitsTwo) {
  expect_bad_input({"plan", "--preset", "qwen3-0.6b", "--tp", "3"},
                   "valid tp_size for num_heads 16 and num_kv_heads 8: 1, 2, 4, 8, 16");
  expect_bad_input({"plan", "--preset", "gemma-3-270m", "--tp", "8"}, "would split a query head");
  expect_bad_input({"plan", "--preset", "qwen3-0.6b", "--tp", "0"}, "must be >= 1");
}

TEST(PlanCommand, BadConfigFilesExitTwo) {
  expect_bad_input({"plan", "--hf-config", "/nonexistent/config.json"}, "must name an existing file");
  expect_bad_input({"plan", "--hf-config", temp_file("broken.json", "{\"hidden_size\": 10")}, "must be valid JSON");
  expect_bad_input(
      {"plan", "--hf-config", temp_file("missing.json", "{\"model_type\": \"llama\", \"num_attention_heads\": 16}")},
      "hidden_size = absent: is required");
  expect_bad_input(
      {"plan", "--hf-config",
       temp_file("typed.json", "{\"model_type\": \"llama\", \"hidden_size\": \"1024\", \"num_attention_heads\": 16}")},
      "hidden_size = \"1024\" (a string): must be an integer");
  expect_bad_input(
      {"plan", "--hf-config",
       temp_file("geometry.json", "{\"model_type\": \"llama\", \"hidden_size\": 1000, \"num_attention_heads\": 16}")},
      "invalid geometry from hf config");
  expect_bad_input({"plan", "--neox-config", temp_file("broken.yml", "hidden-size: [1\n")}, "must be valid YAML");
  expect_bad_input(
      {"plan", "--hf-config",
       temp_file("huge.json", "{\"model_type\": \"llama\", \"hidden_size\": 1e400, \"num_attention_heads\": 16}")},
      "must be representable");
  expect_bad_input({"plan", "--hf-config", "/dev/zero"}, "must name a regular file");
  expect_bad_input({"plan", "--hf-config", config_path("google__gemma-3-270m.json"), "--hf-layer", "18"},
                   "layer = 18: must be a layer index in [0, 18)");
}

TEST(PlanCommand, ArgumentErrorsExitTwo) {
  expect_bad_input({"plan"}, "exactly one of --preset, --hf-config, --neox-config or --hidden/--heads");
  expect_bad_input({"plan", "--preset", "qwen3-0.6b", "--hidden", "1024", "--heads", "16"}, "excludes");
  expect_bad_input({"plan", "--preset", "qwen9"}, "qwen3-0.6b");  // the valid names are listed
  expect_bad_input({"plan", "--hidden", "ten", "--heads", "16"}, "'ten' is not an integer");
  expect_bad_input({"plan", "--hidden", "99999999999999999999", "--heads", "16"}, "out of range for a 64-bit integer");
  expect_bad_input({"plan", "--preset", "qwen3-0.6b", "--tp", "2.5"}, "'2.5' is not an integer");
  expect_bad_input({"plan", "--hidden", "1024"}, "--heads");
  expect_bad_input({"plan", "--preset", "qwen3-0.6b", "--kv-heads", "4"}, "--hidden");
  expect_bad_input({"plan", "--hf-layer", "3", "--preset", "qwen3-0.6b"}, "--hf-config");
  expect_bad_input({"plan", "--preset", "qwen3-0.6b", "--cache-dtype", "int4"}, "--cache-dtype");
  expect_bad_input({}, "subcommand");
  expect_bad_input({"frobnicate"}, "subcommand");
}

TEST(PlanCommand, HelpAndVersionExitZero) {
  const CliRun help = run({"plan", "--help"});
  EXPECT_EQ(help.exit_code, kExitOk);
  EXPECT_NE(help.out.find("--hf-config"), std::string::npos);
  const CliRun version = run({"--version"});
  EXPECT_EQ(version.exit_code, kExitOk);
  EXPECT_NE(version.out.find("attncheck"), std::string::npos);
}

}  // namespace
}  // namespace attncheck::cli
