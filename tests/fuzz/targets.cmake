# The libFuzzer targets (read through project.cmake, see there). The project
# is configured with -DDP_SANITIZE='address;undefined' and with
# -fsanitize=fuzzer-no-link in CMAKE_C_FLAGS, so the library and the tools'
# parsers carry libFuzzer's coverage instrumentation; only the seventeen
# targets below link libFuzzer's main (-fsanitize=fuzzer), into
# build-fuzz/fuzz/, each built from fuzz_target.c with its name.
#
# The regression test tests/fuzz/test_fuzz_regress.c runs the same entry points
# in every ordinary build, without libFuzzer.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "tests/fuzz needs clang (libFuzzer): configure with CC=clang")
endif()

set(dp_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})

# The Makefile's FUZZ_TARGETS and fuzz_table.c name the same seventeen.
set(dp_fuzz_targets idx safetensors checkpoint cli cifar10 model
                    idx_dataset cifar10_train model_cli devices stages model_build npy image onnx shards transform)

# Entry points and the command line's parsers, shared by the targets.
add_library(dp_fuzz_entry STATIC ${dp_fuzz_dir}/fuzz_entry.c ${dp_fuzz_dir}/fuzz_cli_entry.c
                             ${dp_fuzz_dir}/fuzz_model_entry.c
                             ${dp_fuzz_dir}/fuzz_data_entry.c ${dp_fuzz_dir}/fuzz_parse_entry.c
                             ${dp_fuzz_dir}/fuzz_table.c ${dp_fuzz_dir}/cli_sources.c
                             ${dp_fuzz_dir}/fuzz_image_entry.c ${dp_fuzz_dir}/fuzz_onnx_entry.c
                             ${dp_fuzz_dir}/fuzz_shards_entry.c
                             ${dp_fuzz_dir}/fuzz_transform_entry.c)
target_include_directories(dp_fuzz_entry PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(dp_fuzz_entry PUBLIC dp)

foreach(target ${dp_fuzz_targets})
  add_executable(fuzz_${target} ${dp_fuzz_dir}/fuzz_target.c)
  target_compile_definitions(fuzz_${target} PRIVATE FUZZ_TARGET="${target}")
  target_link_libraries(fuzz_${target} PRIVATE dp_fuzz_entry)
  target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer)
  set_target_properties(fuzz_${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                  ${CMAKE_BINARY_DIR}/fuzz)
endforeach()
list(LENGTH dp_fuzz_targets dp_fuzz_count)
message(STATUS "fuzz targets: ${dp_fuzz_count}")
