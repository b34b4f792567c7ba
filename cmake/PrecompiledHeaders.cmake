# Precompiled headers for the heavy, stable third-party headers. Parsing
# <gtest/gtest.h>, the protobuf runtime behind every *.pb.h, RocksDB, Eigen
# and glog costs 1-3 s of CPU per translation unit with GCC 12 at -O3, which
# is a third to half of a typical test's compile time; a precompiled header
# pays it once per target (once for all the tests together).
#
# Only third-party and standard headers go in: our own headers change all the
# time, and a PCH that includes them would rebuild everything on each edit.
# CMake adds -Winvalid-pch, so with -Werror a PCH GCC cannot use (different
# -m or -f flags on one file) fails the build instead of silently slowing it.
# GCC 12 loses the system-header status of what a PCH brings in, so its
# -Wstringop-overflow false positives inside std::string concatenation
# (GCC bugs 105329/105651, the same family as -Wrestrict in Warnings.cmake)
# surface in files that use a PCH: that one warning stays a warning there.
# -DPS_PCH=OFF builds without them (to check that every file includes what it
# uses, which a forced-in PCH can hide).
# Sanitizer builds use them too: they compile the same headers with more
# instrumentation, so the PCH saves them at least as much.
option(PS_PCH "Precompile heavy third-party headers (gtest, protobuf, ...)" ON)

set(PS_PCH_STD_HEADERS
    <algorithm> <atomic> <chrono> <cstdint> <cstring> <functional> <map>
    <memory> <mutex> <optional> <span> <string> <thread> <unordered_map>
    <vector>)
# What every generated *.pb.h includes (protobuf 3.21, Debian 12).
set(PS_PCH_PROTOBUF_HEADERS
    <google/protobuf/arena.h> <google/protobuf/generated_message_reflection.h>
    <google/protobuf/generated_message_util.h> <google/protobuf/message.h>
    <google/protobuf/repeated_field.h> <google/protobuf/extension_set.h>
    <google/protobuf/map.h> <google/protobuf/map_field_inl.h>
    <google/protobuf/unknown_field_set.h>)

# ps_precompile_headers(TARGET HEADER...): a PCH of the standard headers
# above plus HEADER... for TARGET's own sources.
function(ps_precompile_headers target)
  if(NOT PS_PCH OR NOT TARGET ${target})
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${PS_PCH_STD_HEADERS} ${ARGN})
  ps_pch_warnings(${target})
endfunction()

function(ps_pch_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-error=stringop-overflow>)
endfunction()

# ps_precompile_test_headers(DIR): every GoogleTest executable defined under
# DIR (and its subfolders) shares one PCH (gtest, protobuf, standard headers),
# built once by ps_test_pch. Called after add_subdirectory(tests), so test
# CMakeLists stay as they are and new tests get the PCH too.
function(ps_precompile_test_headers dir)
  if(NOT PS_PCH)
    return()
  endif()
  if(NOT TARGET ps_test_pch)
    set(anchor ${PROJECT_BINARY_DIR}/ps_test_pch.cc)
    file(CONFIGURE OUTPUT ${anchor}
         CONTENT "// Builds the tests' shared precompiled header.\nint main() { return 0; }\n")
    add_executable(ps_test_pch ${anchor})
    # Same flags as the tests (warnings, sanitizers, PIE), so GCC accepts
    # the PCH in each of them.
    target_link_libraries(ps_test_pch PRIVATE GTest::gtest protobuf::libprotobuf
                          Threads::Threads)
    ps_strict_warnings(ps_test_pch)
    target_precompile_headers(ps_test_pch PRIVATE ${PS_PCH_STD_HEADERS}
                              <gtest/gtest.h> ${PS_PCH_PROTOBUF_HEADERS})
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    get_target_property(libs ${t} LINK_LIBRARIES)
    if(type STREQUAL "EXECUTABLE" AND libs MATCHES "GTest::gtest"
       AND NOT t STREQUAL "ps_test_pch")
      target_precompile_headers(${t} REUSE_FROM ps_test_pch)
      ps_pch_warnings(${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    ps_precompile_test_headers(${sub})
  endforeach()
endfunction()
