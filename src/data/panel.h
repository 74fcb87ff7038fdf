#pragma once
// The panel type lives in the public API (include/mlalpha/panel.h); this header keeps the library's
// own include path short.
#include "mlalpha/panel.h"
