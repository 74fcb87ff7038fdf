# The library's layers (DESIGN section 3; docs/decisions.md, "Layers"), bottom first. Each layer is one static
# library, mlalpha_<layer>, of its folders under src/; it links the layer below it and compiles against an
# include tree of its own: symbolic links to its folders, the folders of the layers below and the public
# headers (include/mlalpha/) of its level and below. An #include that runs up therefore finds no file and
# does not compile; the test layer_includes (tests/CMakeLists.txt) checks that it stays so.
include(${CMAKE_CURRENT_LIST_DIR}/layer_table.cmake)

# Every folder of src/ (but the command's, src/cli, which sits on top and sees everything) and every public
# header belongs to exactly one layer.
file(GLOB src_entries RELATIVE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/*)
file(GLOB public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include/mlalpha ${PROJECT_SOURCE_DIR}/include/mlalpha/*.h)
set(listed_folders "")
set(listed_headers "")
foreach(layer IN LISTS MLALPHA_LAYERS)
  list(APPEND listed_folders ${MLALPHA_LAYER_${layer}_FOLDERS})
  list(APPEND listed_headers ${MLALPHA_LAYER_${layer}_HEADERS})
endforeach()
foreach(entry IN LISTS src_entries)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${entry} AND NOT entry STREQUAL "cli" AND NOT entry IN_LIST listed_folders)
    message(FATAL_ERROR "src/${entry} belongs to no layer: add it to its layer in cmake/layers.cmake")
  endif()
endforeach()
foreach(h IN LISTS public_headers)
  if(NOT h IN_LIST listed_headers)
    message(FATAL_ERROR "include/mlalpha/${h} belongs to no layer: add it to its layer in cmake/layers.cmake")
  endif()
endforeach()

# mlalpha_split_gpu_sources(<sources var> <gpu out> <nogpu out>): takes the GPU code (*.cu, *_gpu.cpp) and the
# CPU-only build's counterparts (*_nogpu.cpp) out of <sources>.
function(mlalpha_split_gpu_sources sources_var gpu_var nogpu_var)
  set(all ${${sources_var}})
  set(gpu ${all})
  list(FILTER gpu INCLUDE REGEX "(\\.cu|_gpu\\.cpp)$")
  set(nogpu ${all})
  list(FILTER nogpu INCLUDE REGEX "_nogpu\\.cpp$")
  list(FILTER all EXCLUDE REGEX "(\\.cu|_gpu\\.cpp|_nogpu\\.cpp)$")
  set(${sources_var} ${all} PARENT_SCOPE)
  set(${gpu_var} ${gpu} PARENT_SCOPE)
  set(${nogpu_var} ${nogpu} PARENT_SCOPE)
endfunction()

# Unity builds (docs/decisions.md, "Build"): each library's files compile in batches of MLALPHA_UNITY_BATCH, one
# translation unit a batch, so the headers they share (nlohmann-json, toml++, the standard library) are parsed and
# their templates compiled once a batch instead of once a file: half the library's compile time on 2 cores.
# Names at file scope (an anonymous namespace, `static`) must then differ between the files of a library, or the
# batch does not compile; -DMLALPHA_UNITY_BUILD=OFF compiles file by file (quicker after a one-file edit).
option(MLALPHA_UNITY_BUILD "compile each library's files in batches (unity builds)" ON)
set(MLALPHA_UNITY_BATCH 16 CACHE STRING "files a unity batch (MLALPHA_UNITY_BUILD)")
# Files whose file-scope helpers share a name with another file's of their library, compiled alone: jsonl.cpp's
# json_number (floats written shortest) and metrics_json against folds.cpp's, progress.cpp's kNaN against
# metrics.cpp's.
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/eval/jsonl.cpp ${PROJECT_SOURCE_DIR}/src/eval/progress.cpp
                            PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
function(mlalpha_unity_build target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${MLALPHA_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE ${MLALPHA_UNITY_BATCH})
  if(MLALPHA_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC takes every file after a batch's first for a header, and warns where a type of one of them holds a type
    # of its anonymous namespace (a lambda capturing one, a member): true of headers, not of these files.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
  endif()
endfunction()

# The static library of each layer and its include tree.
set(MLALPHA_LAYER_TREES ${PROJECT_BINARY_DIR}/layers)
file(REMOVE_RECURSE ${MLALPHA_LAYER_TREES})
set(visible_folders "")
set(visible_headers "")
set(below "")
foreach(layer IN LISTS MLALPHA_LAYERS)
  list(APPEND visible_folders ${MLALPHA_LAYER_${layer}_FOLDERS})
  list(APPEND visible_headers ${MLALPHA_LAYER_${layer}_HEADERS})
  set(tree ${MLALPHA_LAYER_TREES}/${layer})
  file(MAKE_DIRECTORY ${tree}/mlalpha)
  foreach(folder IN LISTS visible_folders)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${tree}/${folder} SYMBOLIC)
  endforeach()
  foreach(h IN LISTS visible_headers)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/mlalpha/${h} ${tree}/mlalpha/${h} SYMBOLIC)
  endforeach()
  set(MLALPHA_LAYER_${layer}_TREE ${tree})

  set(sources "")
  foreach(folder IN LISTS MLALPHA_LAYER_${layer}_FOLDERS)
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.cpp
         ${PROJECT_SOURCE_DIR}/src/${folder}/*.cu)
    list(APPEND sources ${found})
  endforeach()
  list(FILTER sources EXCLUDE REGEX "_sm90a\\.cu$")
  # GPU code (docs/decisions.md, "A CPU-only build"): a `.cu` file or a host file named *_gpu.cpp. A CUDA build
  # compiles a layer's GPU code as a target of its own, mlalpha_<layer>_gpu (objects, same include tree), whose
  # objects join the layer's library; a CPU-only build leaves it out and compiles the layer's *_nogpu.cpp
  # instead: the other definition of each GPU entry point the layer's CPU code names (core/device.h).
  mlalpha_split_gpu_sources(sources gpu_sources nogpu_sources)
  if(NOT MLALPHA_CUDA)
    list(APPEND sources ${nogpu_sources})
  endif()
  add_library(mlalpha_${layer} STATIC ${sources})
  target_include_directories(mlalpha_${layer} PRIVATE ${tree})
  target_compile_features(mlalpha_${layer} PUBLIC cxx_std_20)
  target_compile_options(mlalpha_${layer} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MLALPHA_WARN}>)
  set_target_properties(mlalpha_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  mlalpha_unity_build(mlalpha_${layer})
  if(below)
    target_link_libraries(mlalpha_${layer} PUBLIC mlalpha_${below})
  endif()
  if(MLALPHA_CUDA AND gpu_sources)
    add_library(mlalpha_${layer}_gpu OBJECT ${gpu_sources})
    target_include_directories(mlalpha_${layer}_gpu PRIVATE ${tree})
    target_compile_options(mlalpha_${layer}_gpu PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MLALPHA_WARN}>)
    set_target_properties(mlalpha_${layer}_gpu PROPERTIES CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON)
    target_link_libraries(mlalpha_${layer}_gpu PRIVATE CUDA::cudart CUDA::cublasLt)
    if(below)  # the usage requirements of the layers below (their definitions, OpenBLAS's headers)
      target_link_libraries(mlalpha_${layer}_gpu PRIVATE mlalpha_${below})
    endif()
    target_sources(mlalpha_${layer} PRIVATE $<TARGET_OBJECTS:mlalpha_${layer}_gpu>)
  endif()
  set(below ${layer})
endforeach()
set(MLALPHA_TOP_LAYER ${below})
