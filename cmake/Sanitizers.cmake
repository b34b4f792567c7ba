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
  # heaviest files), TSan code 21% faster. ASan+UBSan builds use -O1 by
  # default: the whole tree builds there without a warning and the suite
  # passes in the same time (64 tests, 66 s on 2 cores, as at -O2). TSan
  # keeps -O2 until the same is checked for it.
  if(PS_SANITIZE MATCHES "address")
    set(_ps_san_opt_default -O1)
  else()
    set(_ps_san_opt_default "")
  endif()
  set(PS_SANITIZE_OPT "${_ps_san_opt_default}" CACHE STRING
      "Optimisation flag for sanitizer builds, e.g. -O1 (empty: the build type's)")
  if(PS_SANITIZE_OPT)
    list(APPEND _ps_san_flags ${PS_SANITIZE_OPT})
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:${_ps_san_flags}>")
  add_link_options(-fsanitize=${PS_SANITIZE})
  message(STATUS "ps: sanitizers ${PS_SANITIZE}")
endif()
