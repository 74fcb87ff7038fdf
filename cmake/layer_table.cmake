# The layers of the library, bottom first (DESIGN section 3; docs/decisions.md, "Layers"): read by
# cmake/layers.cmake (the build) and scripts/check_layers.cmake (the test layer_includes).
# Each entry: "<layer>|<folders under src/>|<public headers of include/mlalpha/>". A layer is named by its role:
#   core     the bottom: errors, files, CUDA RAII and contexts, the settings structs
#   kernels  the computation: one op per folder of src/ops (GPU kernels, CPU references, fast CPU kernels) and
#            src/cpu, the fast CPU path's runtime (threads, BLAS, SIMD, row blocks)
#   dist     several processes and GPUs: the launcher, the rendezvous, NCCL
#   data     panels, readers, processing, the sampler
#   model    the Mamba2 model: reference, GPU and fast CPU, and the streaming steppers
#   config   the run configuration: TOML, keys, validation, metric names
#   eval, predict, train, run: docs/decisions.md, "Layers"
# A new folder under src/ is one word in its layer's entry (configure stops on a folder or public header that no
# layer lists).
set(MLALPHA_LAYER_TABLE
  "core|core|error.h precision.h float_values.h config_types.h device.h"
  "kernels|cpu ops|"
  "dist|dist|"
  "data|data|panel.h"
  "model|model|"
  "config|config|config.h metric_table.h compute.h"
  "eval|checkpoint eval|metrics.h records.h progress.h eval.h"
  "predict|predict|model.h ensemble.h stream.h"
  "train|train|"
  "run|run|run.h")

set(MLALPHA_LAYERS "")
foreach(entry IN LISTS MLALPHA_LAYER_TABLE)
  string(REPLACE "|" ";" parts "${entry}|")
  list(GET parts 0 layer)
  list(GET parts 1 folders)
  list(GET parts 2 headers)
  separate_arguments(folders UNIX_COMMAND "${folders}")
  separate_arguments(headers UNIX_COMMAND "${headers}")
  list(APPEND MLALPHA_LAYERS ${layer})
  set(MLALPHA_LAYER_${layer}_FOLDERS ${folders})
  set(MLALPHA_LAYER_${layer}_HEADERS ${headers})
endforeach()

