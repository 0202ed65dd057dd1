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
  "cli.html_report_browser"
  "cli.long_work_progress"
  "cli.reading_memory"
  "cli.rope_frequencies_transformers"
  "cli.run_jobs_within_memory"
  "cli.run_small_folder"
  "fuzz.fp64_flash_sdpa_rounding"
  "fuzz.hf_worker_clean"
  "fuzz.hf_worker_latent_clean"
  "fuzz.hf_worker_planted_bug"
  "fuzz.state_dependent_failure_reported"
  "fuzz.torch_fp32_latent_clean"
  "fuzz.worker_fp32_judged_by_its_contract"
  "fuzz.worker_timeout_cleans_up"
  "golden.checked_under_a_memory_limit"
  "golden.caught_mutant-bf16-pv-accumulation"
  "golden.caught_mutant-bf16-row-sum-accumulation"
  "golden.caught_mutant-llama-cpp-9166-fp16-accumulation"
  "golden.schema_v2"
  "golden.stored_yardsticks_current"
  "peer.onnx_fuzz"
  "peer.onnx_gqa"
  "peer.onnx_gqa_fuzz"
  "python.conformance"
  "python.package"
  "python.quotient_scale_fuzz"
  "python.readme_worker"
  "worker.tree-sigkill"
)
set(ATTNCHECK_SLOW_TESTS
  "LongSequences.EveryImplementationMatchesTheReference"
  "cuda.layer_matches_reference"
  "fuzz.mutants_all_killed"
  "fuzz.reference_cp_ring_rounding"
  "golden.committed_run_0"
  "golden.committed_run_1"
  "golden.committed_run_2"
  "golden.coverage"
  "golden.hf_transformers"
  "peer.jax"
  "peer.jax_fuzz"
  "peer.megatron_core"
  "peer.onnx"
  "peer.openvino"
  "peer.openvino_fuzz"
  "peer.torch_flex_compiled"
  "peer.torch_flex_compiled_fuzz"
  "peer.torch_flex_eager"
  "peer.torch_flex_eager_fuzz"
  "peer.torch_sdpa"
  "peer.torch_sdpa_fuzz"
)
# Tests of 5 s or more under ASan + UBSan only (ci/test's sanitizer stage, build-asan/, measured in the gate of
# 41d512a: cli.html_report_browser 29.5 s, cli.hostile_yardstick 15.3, cli.golden_check_verdicts 13.3,
# cli.rope_frequencies_transformers 7.6, cli.html_report 6.4, NeoxConfig.HostileYamlIsAnInputError 5.2): in an
# instrumented build they get the slow tier's COST, so that its ctest starts them first instead of ending on
# one of them with a core idle (cli.hostile_yardstick, fast at -O2, ended that stage 15 s after the rest).
# Their labels stay those of the main build.
set(ATTNCHECK_SANITIZER_SLOW_TESTS
  "NeoxConfig.HostileYamlIsAnInputError"
  "cli.golden_check_verdicts"
  "cli.hostile_yardstick"
  "cli.html_report"
  "cli.html_report_browser"
  "cli.rope_frequencies_transformers"
)
