# ps_cuda_library(NAME SOURCES file.cu... LIBS lib...): a static library of
# CUDA sources, built the one way every CUDA library here is built. Only
# called where PS_HAVE_CUDA holds and no sanitizer is on (cmake/
# Dependencies.cmake): nvcc-compiled code is not instrumented, and the CUDA
# runtime does not start under ASan's default shadow layout.
#
# - sm_90 machine code (H100/H200) plus compute_90 PTX, which the driver
#   compiles for newer GPUs on first use: one architecture keeps the build
#   short.
# - The static CUDA runtime: programs need no libcudart.so at run time (it
#   finds the driver, libcuda.so.1, itself), so they start unchanged where
#   there is no GPU and on GPU machines without the toolkit.
# - Warnings are errors, except nvcc's #2810, a false positive on assigning a
#   [[nodiscard]] class (Status) in base/status_or.h.
function(ps_cuda_library name)
  cmake_parse_arguments(arg "" "" "SOURCES;LIBS" ${ARGN})
  find_package(CUDAToolkit REQUIRED)  # its targets are scoped per directory
  add_library(${name} ${arg_SOURCES})
  set_target_properties(${name} PROPERTIES
    CUDA_ARCHITECTURES 90
    CUDA_STANDARD 20
    CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${arg_LIBS} PRIVATE CUDA::cudart_static)
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -diag-suppress=2810
    -Xcompiler=-Wall,-Wextra>)
endfunction()
