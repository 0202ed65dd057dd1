# The cost tier of every test that is not fast, by exact name (a GoogleTest parameter's "  # GetParam() = ..."
# left off). Every other test is fast. Tiers: fast under 5 s, medium 5 to 60 s, slow 60 s or more, as measured
# on the 2-core CI machine kind (2 vCPUs, 24 GiB, no GPU) on 2026-12-04 by
#   cmake --build build && cd build && OMP_NUM_THREADS=1 ctest -j2
# (each test's time from build/Testing/Temporary/CTestCostData.txt), except cuda.layer_matches_reference:
# 178 s on an H200 (Not Run without a GPU). Move a test here when it slows past 5 s: ctest --preset fast
# must stay under 2 minutes. ctest.every_test_labelled fails on a name here that is no test.
set(ATTNCHECK_MEDIUM_TESTS
  "Geometries/GoldenMakeMemory.PeakStaysWithinTheEstimate/decode_group_softcap"
  "Geometries/GoldenMakeMemory.PeakStaysWithinTheEstimate/tokens_by_hidden"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/gemma_7b"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/gpt_neox_20b"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/llama_3_8b"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/mistral_7b"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/qwen3_14b"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/qwen3_32b"
  "Presets/PresetTpTest.EveryValidTpSizeMatchesUnsharded/qwen3_8b"
  "Properties.EveryImplementationMatchesTheReference"
  "cli.golden_check_verdicts"
  "cli.html_report"
  "cli.html_report_browser"
  "cli.long_work_progress"
  "cli.mutant_harmless_where_bug_cannot_show"
  "cli.reading_memory"
  "cli.rope_frequencies_transformers"
  "cli.run_junit"
  "cli.run_small_folder"
  "fuzz.hf_worker_clean"
  "fuzz.hf_worker_planted_bug"
  "fuzz.state_dependent_failure_reported"
  "fuzz.worker_fp32_judged_by_its_contract"
  "fuzz.worker_timeout_cleans_up"
  "golden.caught_mutant-bf16-pv-accumulation"
  "golden.caught_mutant-bf16-row-sum-accumulation"
  "golden.caught_mutant-masked-row-mean-of-v"
  "golden.caught_mutant-padding-ignored"
  "golden.caught_mutant-window-off-by-one"
  "golden.committed_reference-tp"
  "golden.committed_torch-cpu-fp32"
  "golden.committed_torch-cpu-fp64"
  "golden.schema_v2"
  "python.package"
  "worker.tree-sigkill"
)
set(ATTNCHECK_SLOW_TESTS
  "LongSequences.EveryImplementationMatchesTheReference"
  "cuda.layer_matches_reference"
  "fuzz.mutants_all_killed"
  "golden.committed_reference"
  "golden.coverage"
  "golden.hf_transformers"
  "golden.stored_yardsticks_current"
  "peer.megatron_core"
)
