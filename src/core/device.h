#pragma once
// The CUDA devices (include/mlalpha/device.h). Which device a setting picks: resolve() in mlalpha/compute.h, the one
// place that decides.
#include "mlalpha/device.h"
