# Every dependency comes from a Debian 12 package; scripts/setup.sh installs them.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gflags REQUIRED)
find_package(glog REQUIRED)
find_package(GTest REQUIRED)
if(PS_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# libsodium: HMAC-SHA256 and random nonces for the cluster secret's
# challenge-response (core/auth.h).
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)

# libibverbs: the verbs transport is built only when the library is found
# (PS_WITH_VERBS=AUTO) or demanded (ON).
set(PS_HAVE_VERBS OFF)
if(NOT PS_WITH_VERBS STREQUAL "OFF")
  pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
  if(IBVERBS_FOUND)
    set(PS_HAVE_VERBS ON)
  elseif(PS_WITH_VERBS STREQUAL "ON")
    message(FATAL_ERROR "PS_WITH_VERBS=ON but libibverbs was not found")
  endif()
endif()
message(STATUS "ps: verbs transport ${PS_HAVE_VERBS}")

# CUDA: kernels/cuda is compiled when nvcc is found (PS_WITH_CUDA=AUTO).
set(PS_HAVE_CUDA OFF)
if(NOT PS_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(PS_HAVE_CUDA ON)
  elseif(PS_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PS_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "ps: CUDA kernels ${PS_HAVE_CUDA}")
if(PS_HAVE_CUDA)
  # C++20 like the rest of the project. CMake 3.25 has no C++20 flag for
  # nvcc (nvcc 12+ accepts -std=c++20), so it is named here.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  include(cmake/CudaLibrary.cmake)
endif()

# cpp-httplib (libcpp-httplib-dev): the HTTP client of the metrics tests
# (tests/metrics), a real client for the exporter's own server
# (metrics/exporter.h, which needs no library). Without it everything
# builds and the endpoint tests are skipped.
set(PS_HAVE_HTTPLIB OFF)
find_path(PS_HTTPLIB_INCLUDE_DIR httplib.h)
if(PS_HTTPLIB_INCLUDE_DIR)
  pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
  if(HTTPLIB_FOUND)
    set(PS_HAVE_HTTPLIB ON)
  endif()
endif()
if(PS_HAVE_HTTPLIB)
  message(STATUS "ps: metrics tests' HTTP client ON (cpp-httplib "
                 "${HTTPLIB_VERSION})")
else()
  message(STATUS "ps: metrics endpoint tests OFF (libcpp-httplib-dev not "
                 "found; scripts/setup.sh installs it)")
endif()
