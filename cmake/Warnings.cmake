# Strict warnings for the project's own targets only (not for generated code),
# C++ and C alike (the C API's test is C: tests/core/c_api_test.c).
# GCC 12 reports -Wrestrict false positives inside std::string concatenation
# at -O2 (GCC bug 105329), so that one warning stays a warning.
function(ps_strict_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Werror>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-error=restrict>)
endfunction()
