#pragma once
// The error type lives in the public API (include/mlalpha/error.h).
#include "mlalpha/error.h"
