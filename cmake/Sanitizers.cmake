# -DPS_SANITIZE=address,undefined or -DPS_SANITIZE=thread instruments everything.
if(PS_SANITIZE)
  # -g1 (line tables) is enough for sanitizer stack traces and builds much
  # faster than full debug info; it comes after the build type's -g.
  set(_ps_san_flags -fsanitize=${PS_SANITIZE} -fno-omit-frame-pointer -g1)
  if(PS_SANITIZE MATCHES "undefined")
    list(APPEND _ps_san_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:${_ps_san_flags}>")
  add_link_options(-fsanitize=${PS_SANITIZE})
  message(STATUS "ps: sanitizers ${PS_SANITIZE}")
endif()
