# The CUDA backend (src/device/cuda/) and NCCL's launch, src/comm/'s
# backend for the GPUs' allreduce (src/comm/nccl_launch.c), built as a
# module of their own: libdptrain-cuda.so (target dp_cuda), beside
# libdptrain.so in the build folder and installed with it, which alone
# links cudart, cuBLAS(Lt), cuDNN and NCCL. The library loads it when the
# first GPU opens (src/device/cuda/cuda_api.c, cuda_module.h): a program
# that opens none maps none of them (227 MB at rest with them linked).
#
# Included by CMakeLists.txt after the `dp_objects` target (the library's
# objects) exists. DP_CUDA=AUTO builds the module when nvcc, cuBLAS, cuDNN
# and NCCL are all found, ON requires them, OFF never builds it. Without it
# the build is CPU-only.
#
# Sources: CMakeLists.txt globs src/**/*.c into `dp_objects`, which takes the
# C files of src/device/cuda/ too. Rather than wrapping each of them in
# #ifdef, this file owns the folder: it removes src/device/cuda/ and
# src/comm/nccl_launch.c from dp_objects' SOURCES in every build (keeping
# cuda_api.c, the public dp_cuda_* entry points and the module's loader,
# which answer "no GPU" where there is none, and cuda_host.c, the backend's
# pure host arithmetic, which tests check without a GPU), and in a CUDA
# build compiles them, with the .cu files, into the module.

set(DP_HAVE_CUDA OFF)
set(dp_cuda_why "")

if(DP_CUDA STREQUAL "OFF")
  set(dp_cuda_why "DP_CUDA=OFF")
else()
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(dp_cuda_why "no CUDA compiler (nvcc) found")
  else()
    find_package(CUDAToolkit QUIET)
    if(NOT CUDAToolkit_FOUND)
      set(dp_cuda_why "the CUDA toolkit was not found")
    else()
      find_path(DP_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
      find_library(DP_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
      find_path(DP_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
      find_library(DP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
      if(NOT TARGET CUDA::cublas)
        set(dp_cuda_why "cuBLAS was not found")
      elseif(NOT DP_CUDNN_INCLUDE_DIR OR NOT DP_CUDNN_LIBRARY)
        set(dp_cuda_why "cuDNN (cudnn.h, libcudnn) was not found")
      elseif(NOT DP_NCCL_INCLUDE_DIR OR NOT DP_NCCL_LIBRARY)
        set(dp_cuda_why "NCCL (nccl.h, libnccl) was not found")
      else()
        set(DP_HAVE_CUDA ON)
      endif()
    endif()
  endif()
endif()

if(DP_CUDA STREQUAL "ON" AND NOT DP_HAVE_CUDA)
  message(FATAL_ERROR "dptrain: DP_CUDA=ON but ${dp_cuda_why}")
endif()

get_target_property(dp_sources dp_objects SOURCES)
list(FILTER dp_sources EXCLUDE REGEX "/src/device/cuda/|/src/comm/nccl_launch\\.c$")
list(APPEND dp_sources ${CMAKE_SOURCE_DIR}/src/device/cuda/cuda_api.c
     ${CMAKE_SOURCE_DIR}/src/device/cuda/cuda_host.c)
set_target_properties(dp_objects PROPERTIES SOURCES "${dp_sources}")

if(NOT DP_HAVE_CUDA)
  message(STATUS "dptrain: CUDA backend off: ${dp_cuda_why}; the build is CPU-only")
  return()
endif()

# Architectures: -DDP_CUDA_ARCHITECTURES="80;90" if given, else those of the
# GPUs present (nvidia-smi, asked at every configure), else Ampere and Hopper.
set(DP_CUDA_ARCHITECTURES "" CACHE STRING "CUDA architectures (empty: the GPUs present, else 80;90)")
if(DP_CUDA_ARCHITECTURES)
  set(dp_archs ${DP_CUDA_ARCHITECTURES})
  set(dp_arch_src "DP_CUDA_ARCHITECTURES")
else()
  set(dp_archs "")
  find_program(DP_NVIDIA_SMI nvidia-smi)
  if(DP_NVIDIA_SMI)
    execute_process(COMMAND ${DP_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE dp_caps RESULT_VARIABLE dp_smi_rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(dp_smi_rc EQUAL 0 AND dp_caps)
      string(REPLACE "\n" ";" dp_caps "${dp_caps}")
      foreach(cap ${dp_caps})
        string(REPLACE "." "" cap "${cap}")
        string(STRIP "${cap}" cap)
        if(cap MATCHES "^[0-9]+$")
          list(APPEND dp_archs ${cap})
        endif()
      endforeach()
      list(REMOVE_DUPLICATES dp_archs)
    endif()
  endif()
  if(dp_archs)
    set(dp_arch_src "the GPUs present")
  else()
    set(dp_archs 80 90)
    set(dp_arch_src "no GPU detected: Ampere and Hopper")
  endif()
endif()
# A normal variable, before enable_language, so CMake's own default (cached
# by enable_language) never applies; the target created earlier gets it as
# a property below.
set(CMAKE_CUDA_ARCHITECTURES "${dp_archs}")

enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

file(GLOB DP_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/device/cuda/*.c
     ${CMAKE_SOURCE_DIR}/src/device/cuda/*.cu)
list(FILTER DP_CUDA_SOURCES EXCLUDE REGEX "/cuda_api\\.c$|/cuda_host\\.c$")
# A module, loaded with dlopen: it links the shared library (whose symbols
# it calls: the engine, the allocator, cuda_host.c) and resolves them
# against the copy already loaded.
add_library(dp_cuda MODULE ${DP_CUDA_SOURCES} ${CMAKE_SOURCE_DIR}/src/comm/nccl_launch.c)
# Installed beside libdptrain.so.0 ($ORIGIN), with CUDA's folders.
set_target_properties(dp_cuda PROPERTIES OUTPUT_NAME dptrain-cuda PREFIX lib
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR} POSITION_INDEPENDENT_CODE ON
                      INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
target_include_directories(dp_cuda PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include
                           ${DP_CUDNN_INCLUDE_DIR} ${DP_NCCL_INCLUDE_DIR})
target_compile_definitions(dp_cuda PRIVATE DP_HAVE_CUDA=1 DP_HAVE_NCCL=1)
target_link_libraries(dp_cuda PRIVATE dp CUDA::cudart CUDA::cublas ${DP_CUDNN_LIBRARY}
                      ${DP_NCCL_LIBRARY})
# The library's stub knows that a module exists, and the library is built
# before it.
target_compile_definitions(dp_objects PRIVATE DP_CUDA_MODULE=1)
target_link_libraries(dp_objects PUBLIC ${CMAKE_DL_LIBS})
install(TARGETS dp_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The directory's warning flags (-Wall -Wextra -Wshadow -Werror ...) are gcc
# flags that nvcc does not take: keep them for C, and give nvcc its own
# (host-side warnings through -Xcompiler, device-side as errors with
# -Werror all-warnings). --fmad=false keeps our kernels' rounding that of the
# C loops of the CPU device, so the two compare closely.
get_target_property(dp_opts dp_cuda COMPILE_OPTIONS)
set(dp_c_opts "")
foreach(opt ${dp_opts})
  list(APPEND dp_c_opts "$<$<COMPILE_LANGUAGE:C>:${opt}>")
endforeach()
set(dp_cu_opts --fmad=false -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
if(DP_WERROR)
  list(APPEND dp_cu_opts -Werror=all-warnings -Xcompiler=-Werror)
endif()
foreach(opt ${dp_cu_opts})
  list(APPEND dp_c_opts "$<$<COMPILE_LANGUAGE:CUDA>:${opt}>")
endforeach()
set_target_properties(dp_cuda PROPERTIES COMPILE_OPTIONS "${dp_c_opts}"
                      CUDA_ARCHITECTURES "${dp_archs}")

message(STATUS "dptrain: CUDA backend on: CUDA ${CUDAToolkit_VERSION}, cuDNN ${DP_CUDNN_LIBRARY}, "
               "NCCL ${DP_NCCL_LIBRARY}, architectures ${dp_archs} (${dp_arch_src})")
