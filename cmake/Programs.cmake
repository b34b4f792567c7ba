# The programs this project builds, as CMake has them: every executable
# target outside tests/ and fuzz/, benchmarks and examples included (what a
# build with PS_BUILD_BENCH=OFF or without CUDA leaves out is not there).
# Call after every add_subdirectory, where the list is complete.
#
# Left out as well: executables that link GoogleTest. Those are test
# binaries or test build helpers, not programs anyone runs: ps_test_pch
# (cmake/PrecompiledHeaders.cmake) only anchors the tests' precompiled
# header and its main() returns 0 without reading its arguments.

# _ps_programs_in(DIR OUT_VAR): the programs defined in DIR and below.
function(_ps_programs_in dir out_var)
  set(found)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
  if(NOT rel MATCHES "^(tests|fuzz)(/|$)")
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      get_target_property(libs ${t} LINK_LIBRARIES)
      if(type STREQUAL "EXECUTABLE" AND NOT libs MATCHES "GTest::")
        list(APPEND found ${t})
      endif()
    endforeach()
  endif()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _ps_programs_in(${sub} below)
    list(APPEND found ${below})
  endforeach()
  set(${out_var} ${found} PARENT_SCOPE)
endfunction()

# ps_list_programs_for_test(TARGET): writes the programs' paths, one a line,
# to programs.txt in TARGET's build folder (file(GENERATE): the paths are
# known at generation time), hands its path to TARGET's sources as
# PS_PROGRAM_LIST, and makes TARGET depend on the programs, so that building
# the test (scripts/build.sh --tests=...) builds them too.
function(ps_list_programs_for_test test_target)
  _ps_programs_in(${PROJECT_SOURCE_DIR} programs)
  set(paths)
  foreach(p IN LISTS programs)
    list(APPEND paths "$<TARGET_FILE:${p}>")
  endforeach()
  list(JOIN paths "\n" content)
  get_target_property(dir ${test_target} BINARY_DIR)
  file(GENERATE OUTPUT ${dir}/programs.txt CONTENT "${content}\n")
  target_compile_definitions(${test_target} PRIVATE
                             PS_PROGRAM_LIST="${dir}/programs.txt")
  add_dependencies(${test_target} ${programs})
endfunction()
