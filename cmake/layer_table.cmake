# The layers of the library, bottom first (DESIGN section 3; docs/decisions.md, "Layers"): read by
# cmake/layers.cmake (the build) and scripts/check_layers.cmake (the test layer_includes).
# Each entry: "<layer>|<folders under src/>|<public headers of include/mlalpha/>". A new folder under src/ is
# one word in its layer's entry (configure stops on a folder or public header that no layer lists).
set(MLALPHA_LAYER_TABLE
  "core|core|error.h precision.h float_values.h config_types.h device.h"
  "data|data ops dist|panel.h"
  "model|config model cpu|config.h metric_table.h compute.h"
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

