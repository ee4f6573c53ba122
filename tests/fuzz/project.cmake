# `make fuzz` configures the whole project in build-fuzz with clang and
# -DCMAKE_PROJECT_INCLUDE=tests/fuzz/project.cmake. This file then runs right
# after the main CMakeLists.txt's project(), before `dp` exists, so it only
# defers reading targets.cmake (the fuzz targets) to the end of that file.
# (A deferred call's arguments are expanded when it runs: hence the variable.)
set(DP_FUZZ_TARGETS ${CMAKE_CURRENT_LIST_DIR}/targets.cmake)
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL include ${DP_FUZZ_TARGETS})
