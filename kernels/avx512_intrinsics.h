// <immintrin.h> for files with AVX-512 functions ([[gnu::target]]), with one
// workaround in one place: GCC 12's AVX-512 intrinsics start some results
// from an undefined register (_mm512_undefined_epi32()), which
// -Wmaybe-uninitialized flags once they are inlined (GCC bug 105593);
// nothing reads an undefined value. The warning stays off for the rest of
// the including file, so include this from .cc files only.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
