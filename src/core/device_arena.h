#pragma once
// The four flat device arenas described by one ParamTable: parameters, gradients, AdamW m and v, plus
// the weight-decay mask as bytes. One allocation each; sized once; move-only through DeviceBuffer. A
// population of `members` models of the table's architecture holds (members, total) in each arena, member m
// at m·total, and shares the mask.
#include "core/device_buffer.h"
#include "core/param_table.h"

namespace mlalpha {

struct DeviceArena {
  explicit DeviceArena(const ParamTable& table, int members = 1)
      : params(table.total() * size_t(members)),
        grads(table.total() * size_t(members)),
        m(table.total() * size_t(members)),
        v(table.total() * size_t(members)),
        decay(table.total()) {
    params.fill_bytes(0);
    grads.fill_bytes(0);
    m.fill_bytes(0);
    v.fill_bytes(0);
    decay.upload(table.decay_mask());
  }
  DeviceBuffer<float> params, grads, m, v;  // (members, total) each, layout of the table
  DeviceBuffer<unsigned char> decay;        // (total) 1 = weight decay applies
};

}  // namespace mlalpha
