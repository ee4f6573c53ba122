# `cmake --install BUILD --prefix P` (and `make install PREFIX=P`): the
# library as P/lib/libdptrain.so.0 and P/lib/libdptrain.a, the public headers
# in P/include/dp/, the tool in P/bin/, its man pages in P/share/man/man1/,
# P/lib/pkgconfig/dptrain.pc, and the CMake package P/lib/cmake/dptrain/
# (find_package(dptrain CONFIG)).
#
# dptrain.pc is written at install time, from dptrain.pc.in, so that its
# prefix is the one given to `cmake --install --prefix`, not the configured
# one. Its Libs.private and Requires.private are what a static link of
# libdptrain.a needs besides: zlib, PLplot, protobuf-c and ISA-L through
# their own .pc files, oneDNN, OpenMP's runtime, pthreads and libm, and the
# MPI and CUDA libraries only when this build has them.

install(TARGETS dp dp_static dptrain LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/dp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The man pages the build made (dptrain.1, dptrain-train.1, ...: CMakeLists.txt).
install(DIRECTORY ${CMAKE_BINARY_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        FILES_MATCHING PATTERN "*.1")

# Library files (full paths, or plain names) as -L and -l flags for a .pc.
function(dp_pc_link_flags out)
  set(flags "")
  foreach(lib ${ARGN})
    if(lib MATCHES "^/")
      get_filename_component(dir ${lib} DIRECTORY)
      get_filename_component(name ${lib} NAME_WE)
      string(REGEX REPLACE "^lib" "" name ${name})
      if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND flags "-L${dir}")
      endif()
      list(APPEND flags "-l${name}")
    elseif(lib MATCHES "^-")
      list(APPEND flags ${lib})
    else()
      list(APPEND flags "-l${lib}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  list(JOIN flags " " flags)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

set(dp_pc_libs ${DNNL_LIBRARY} ${OpenMP_C_LIB_NAMES})
if(DP_HAVE_MPI)
  list(APPEND dp_pc_libs ${MPI_C_LIBRARIES})
endif()
# The CUDA backend is a module of the shared library (cmake/cuda.cmake):
# libdptrain.a has none, and a static link needs no CUDA library.
list(APPEND dp_pc_libs ${CMAKE_DL_LIBS})
dp_pc_link_flags(dp_pc_libs_private ${dp_pc_libs} -pthread ${M_LIBRARY})
# A library built with sanitizers (make test's build-asan) needs their
# runtime in every program that links it, first in its library list.
set(dp_pc_sanitize "")
if(DP_SANITIZE)
  set(dp_pc_sanitize "-fsanitize=${dp_san}")
endif()

install(CODE "
  set(DP_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(DP_PC_REQUIRES_PRIVATE \"zlib plplot libpng libjpeg libarchive libprotobuf-c libisal\")
  set(DP_PC_LIBS_PRIVATE \"${dp_pc_libs_private}\")
  set(DP_PC_SANITIZE \"${dp_pc_sanitize}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/dptrain.pc.in\" \"${CMAKE_BINARY_DIR}/dptrain.pc\" @ONLY)
")
install(FILES ${CMAKE_BINARY_DIR}/dptrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CMake package: dptrainConfig.cmake (from cmake/dptrainConfig.cmake.in)
# and its version file, in P/lib/cmake/dptrain/, where find_package looks
# under a prefix. The config finds the prefix from its own place, so the
# installed tree may move. Its imported targets mirror dptrain.pc:
# dptrain::dptrain is libdptrain.so (its dependencies come through its
# RUNPATH), dptrain::dptrain_static is libdptrain.a with what a static link
# needs besides, the libraries of Requires.private and Libs.private by the
# full paths this build found.
include(CMakePackageConfigHelpers)
set(dp_cmake_deps ${ZLIB_LIBRARIES} ${PLPLOT_LINK_LIBRARIES} ${PNG_LINK_LIBRARIES}
    ${JPEG_LINK_LIBRARIES} ${LIBARCHIVE_LINK_LIBRARIES} ${PROTOBUF_C_LINK_LIBRARIES} ${ISAL_LINK_LIBRARIES} ${DNNL_LIBRARY})
# OpenMP's runtime by its path; pthreads as -pthread (FindOpenMP lists its
# static archive too).
foreach(lib ${OpenMP_C_LIBRARIES})
  if(NOT lib MATCHES "pthread")
    list(APPEND dp_cmake_deps ${lib})
  endif()
endforeach()
if(DP_HAVE_MPI)
  list(APPEND dp_cmake_deps ${MPI_C_LIBRARIES})
endif()
list(APPEND dp_cmake_deps ${CMAKE_DL_LIBS} -pthread ${M_LIBRARY})
list(REMOVE_DUPLICATES dp_cmake_deps)
set(DP_CMAKE_STATIC_DEPS "${dp_cmake_deps}")
set(DP_CMAKE_SHARED_NAME
    ${CMAKE_SHARED_LIBRARY_PREFIX}dptrain${CMAKE_SHARED_LIBRARY_SUFFIX}.${PROJECT_VERSION})
set(DP_CMAKE_SONAME
    ${CMAKE_SHARED_LIBRARY_PREFIX}dptrain${CMAKE_SHARED_LIBRARY_SUFFIX}.${PROJECT_VERSION_MAJOR})
set(DP_CMAKE_STATIC_NAME ${CMAKE_STATIC_LIBRARY_PREFIX}dptrain${CMAKE_STATIC_LIBRARY_SUFFIX})
set(DP_CMAKE_SANITIZE "${dp_pc_sanitize}")
set(dp_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/dptrain)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/dptrainConfig.cmake.in
  ${CMAKE_BINARY_DIR}/dptrainConfig.cmake INSTALL_DESTINATION ${dp_cmake_dir}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/dptrainConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/dptrainConfig.cmake ${CMAKE_BINARY_DIR}/dptrainConfigVersion.cmake
        DESTINATION ${dp_cmake_dir})
