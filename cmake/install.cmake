# `cmake --install BUILD --prefix P` (and `make install PREFIX=P`): the
# library as P/lib/libdptrain.so.0 and P/lib/libdptrain.a, the public headers
# in P/include/dp/, the tool in P/bin/, its man pages in P/share/man/man1/,
# and P/lib/pkgconfig/dptrain.pc.
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
if(DP_HAVE_CUDA)
  get_target_property(dp_cudart CUDA::cudart IMPORTED_LOCATION)
  get_target_property(dp_cublas CUDA::cublas IMPORTED_LOCATION)
  list(APPEND dp_pc_libs ${dp_cudart} ${dp_cublas} ${DP_CUDNN_LIBRARY} ${DP_NCCL_LIBRARY})
endif()
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
  set(DP_PC_REQUIRES_PRIVATE \"zlib plplot libpng libjpeg libprotobuf-c libisal\")
  set(DP_PC_LIBS_PRIVATE \"${dp_pc_libs_private}\")
  set(DP_PC_SANITIZE \"${dp_pc_sanitize}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/dptrain.pc.in\" \"${CMAKE_BINARY_DIR}/dptrain.pc\" @ONLY)
")
install(FILES ${CMAKE_BINARY_DIR}/dptrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
