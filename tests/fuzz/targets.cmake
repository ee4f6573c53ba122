# The libFuzzer targets (read through project.cmake, see there). The project
# is configured with -DDP_SANITIZE='address;undefined' and with
# -fsanitize=fuzzer-no-link in CMAKE_C_FLAGS, so the library and the tools'
# parsers carry libFuzzer's coverage instrumentation; only the five targets
# link libFuzzer's main (-fsanitize=fuzzer), into build-fuzz/fuzz/.
#
# The regression test tests/test_fuzz_regress.c runs the same entry points
# in every ordinary build, without libFuzzer.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "tests/fuzz needs clang (libFuzzer): configure with CC=clang")
endif()

set(dp_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})

# Entry points and the command line's parsers, shared by the five targets.
add_library(dp_fuzz_entry STATIC ${dp_fuzz_dir}/fuzz_entry.c ${dp_fuzz_dir}/fuzz_model_entry.c
                             ${dp_fuzz_dir}/cli_sources.c)
target_include_directories(dp_fuzz_entry PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(dp_fuzz_entry PUBLIC dp)

foreach(target idx safetensors checkpoint cli cifar10 model)
  add_executable(fuzz_${target} ${dp_fuzz_dir}/fuzz_${target}.c)
  target_link_libraries(fuzz_${target} PRIVATE dp_fuzz_entry)
  target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer)
  set_target_properties(fuzz_${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                  ${CMAKE_BINARY_DIR}/fuzz)
endforeach()
