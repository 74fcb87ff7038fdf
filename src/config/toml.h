#pragma once
// toml++ as the project uses it, configured in one place (every file that includes it must agree, or the
// header-only library's inline functions differ between files):
//   header-only, so the binary needs no shared library beyond CUDA's; errors as exceptions;
//   numbers through <charconv>, not iostreams: on GCC toml++ reads floats with std::istringstream by
//   default, which crashed inside the Python extension on the GPU machine (a locale facet lookup in a
//   second C++ runtime, docs/decisions.md); charconv needs no locale.
// Host-only: never include from .cu files.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#define TOML_INT_CHARCONV 1
#define TOML_FLOAT_CHARCONV 1
#include <toml++/toml.h>
