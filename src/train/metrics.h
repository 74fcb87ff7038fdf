#pragma once
// The metrics live in the public API (include/mlalpha/metrics.h).
#include "mlalpha/metrics.h"
