#pragma once
// The four flat device arenas described by one ParamTable: parameters, gradients, AdamW m and v, plus
// the weight-decay mask as bytes. One allocation each; sized once; move-only through DeviceBuffer.
#include "core/device_buffer.h"
#include "core/param_table.h"

namespace mlalpha {

struct DeviceArena {
  explicit DeviceArena(const ParamTable& table)
      : params(table.total()), grads(table.total()), m(table.total()), v(table.total()), decay(table.total()) {
    params.fill_bytes(0);
    grads.fill_bytes(0);
    m.fill_bytes(0);
    v.fill_bytes(0);
    decay.upload(table.decay_mask());
  }
  DeviceBuffer<float> params, grads, m, v;  // (total) each, layout of the table
  DeviceBuffer<unsigned char> decay;        // (total) 1 = weight decay applies
};

}  // namespace mlalpha
