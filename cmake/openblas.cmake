# OpenBLAS for the fast CPU path (src/cpu): Debian's pthread build (libopenblas-pthread-dev), linked
# statically so a binary built here runs where OpenBLAS is not installed (DESIGN section 6). Its kernels are
# chosen at run time for the CPU (DYNAMIC_ARCH). src/cpu sets it to one thread and calls it from its own
# workers: the pthread build locks its buffer pool, the serial build does not (concurrent calls raced).
# docs/decisions.md, "The fast CPU path", says why this library.
# Where the package is not installed (the GPU machine), scripts/stage_cpu_deps.sh's .cpu-deps/ supplies
# the same archive and headers; -DMLALPHA_OPENBLAS_LIBRARY / _INCLUDE_DIR override both.
set(MLALPHA_OPENBLAS_STAGED ${PROJECT_SOURCE_DIR}/.cpu-deps/openblas-pthread.tar.xz)
find_path(MLALPHA_OPENBLAS_INCLUDE_DIR cblas.h HINTS /usr/include/x86_64-linux-gnu/openblas-pthread
          /usr/include/openblas-pthread NO_DEFAULT_PATH DOC "folder holding OpenBLAS's (pthread build) cblas.h")
find_library(MLALPHA_OPENBLAS_LIBRARY NAMES libopenblas.a HINTS /usr/lib/x86_64-linux-gnu/openblas-pthread
             /usr/lib/openblas-pthread NO_DEFAULT_PATH DOC "OpenBLAS's static library (pthread build)")
if((NOT MLALPHA_OPENBLAS_INCLUDE_DIR OR NOT MLALPHA_OPENBLAS_LIBRARY) AND EXISTS ${MLALPHA_OPENBLAS_STAGED})
  set(_ob ${CMAKE_BINARY_DIR}/_deps/openblas-pthread)
  file(ARCHIVE_EXTRACT INPUT ${MLALPHA_OPENBLAS_STAGED} DESTINATION ${_ob})
  set(MLALPHA_OPENBLAS_INCLUDE_DIR ${_ob}/include CACHE PATH "" FORCE)
  set(MLALPHA_OPENBLAS_LIBRARY ${_ob}/lib/libopenblas.a CACHE FILEPATH "" FORCE)
endif()
if(NOT MLALPHA_OPENBLAS_INCLUDE_DIR OR NOT MLALPHA_OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS (pthread build, static) was not found: run scripts/setup.sh (Debian/Ubuntu: "
                      "apt-get install libopenblas-pthread-dev), stage it with scripts/stage_cpu_deps.sh, or pass "
                      "-DMLALPHA_OPENBLAS_LIBRARY=<libopenblas.a> -DMLALPHA_OPENBLAS_INCLUDE_DIR=<folder of cblas.h>")
endif()
add_library(mlalpha_openblas STATIC IMPORTED)
set_target_properties(mlalpha_openblas PROPERTIES IMPORTED_LOCATION ${MLALPHA_OPENBLAS_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${MLALPHA_OPENBLAS_INCLUDE_DIR}
                      INTERFACE_LINK_LIBRARIES "Threads::Threads;m")
