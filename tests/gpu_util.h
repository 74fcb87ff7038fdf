#pragma once
// GPU test helpers: upload, download, and poisoned outputs (every byte 0xFF = NaN) so an element a
// kernel forgot to write fails the comparison.
#include <vector>

#include "core/device_buffer.h"

namespace mlalpha::test {

inline DeviceBuffer<float> to_device(const std::vector<float>& h) {
  DeviceBuffer<float> d(h.size());
  d.upload(h);
  return d;
}

inline DeviceBuffer<float> poisoned(size_t n) {
  DeviceBuffer<float> d(n);
  d.fill_bytes(0xFF);
  return d;
}

inline std::vector<float> from_device(const DeviceBuffer<float>& d) {
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
  return d.download();
}

}  // namespace mlalpha::test
