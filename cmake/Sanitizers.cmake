# -DPS_SANITIZE=address,undefined or -DPS_SANITIZE=thread instruments everything.
if(PS_SANITIZE)
  # -g1 (line tables) is enough for sanitizer stack traces and builds much
  # faster than full debug info; it comes after the build type's -g.
  set(_ps_san_flags -fsanitize=${PS_SANITIZE} -fno-omit-frame-pointer -g1)
  if(PS_SANITIZE MATCHES "undefined")
    list(APPEND _ps_san_flags -fno-sanitize-recover=undefined)
  endif()
  # PS_SANITIZE_OPT overrides the build type's -O2: GCC 12 compiles
  # ASan+UBSan code 37% faster at -O1 (95 s vs 151 s CPU for four of our
  # heaviest files), TSan code 21% faster. Both use -O1 by default: the
  # tree builds there without a warning and the suites pass.
  set(PS_SANITIZE_OPT "-O1" CACHE STRING
      "Optimisation flag for sanitizer builds, e.g. -O1 (empty: the build type's)")
  if(PS_SANITIZE_OPT)
    list(APPEND _ps_san_flags ${PS_SANITIZE_OPT})
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:${_ps_san_flags}>")
  add_link_options(-fsanitize=${PS_SANITIZE})
  message(STATUS "ps: sanitizers ${PS_SANITIZE}")
endif()
