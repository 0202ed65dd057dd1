# End-to-end tests of the attncheck binary: exit codes and which stream a message goes to, as a shell
# sees them. Each runs cmake/RunAndCheck.cmake.
function(attncheck_cli_case name expected_exit stdout_regex stderr_regex)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:attncheck>;${ARGN}"
                   -DEXPECT_EXIT=${expected_exit} "-DEXPECT_STDOUT=${stdout_regex}"
                   "-DEXPECT_STDERR=${stderr_regex}" -P ${PROJECT_SOURCE_DIR}/cmake/RunAndCheck.cmake)
  set_tests_properties(cli.${name} PROPERTIES LABELS unit)
endfunction()

set(configs ${PROJECT_SOURCE_DIR}/core/hf_configs)
attncheck_cli_case(plan_preset_json 0 "\"head_dim\": 128" "^$" plan --preset qwen3-0.6b --json)
attncheck_cli_case(plan_hf_config 0 "derived: hidden_size / num_heads = 6144 / 64" "^$"
                   plan --hf-config ${configs}/EleutherAI__gpt-neox-20b.json --tp 4)
attncheck_cli_case(plan_replicated 0 "replicated on 4 ranks" "^$" plan --preset gemma-3-270m --tp 4)
attncheck_cli_case(help 0 "plan" "^$" --help)
attncheck_cli_case(no_subcommand 2 "^$" "subcommand")
attncheck_cli_case(split_query_head 2 "^$" "tp_size = 3: would split a query head.*valid tp_size.*1, 2, 4, 8, 16"
                   plan --preset qwen3-0.6b --tp 3)
attncheck_cli_case(non_dividing_head_dim 2 "^$" "head_dim = absent.*hidden_size = 992 or 1008"
                   plan --hidden 1000 --heads 16)
attncheck_cli_case(missing_config 2 "^$" "--hf-config = '/nonexistent/config.json': must name an existing file"
                   plan --hf-config /nonexistent/config.json)
attncheck_cli_case(unknown_preset 2 "^$" "qwen3-0.6b" plan --preset qwen9)
attncheck_cli_case(bad_integer 2 "^$" "--hidden" plan --hidden ten --heads 16)
