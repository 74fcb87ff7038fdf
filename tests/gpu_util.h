#pragma once
// GPU test helpers: upload, download, and poisoned outputs (every byte 0xFF = NaN) so an element a
// kernel forgot to write fails the comparison.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

#include "core/device_buffer.h"

namespace mlalpha::test {

inline DeviceBuffer<float> to_device(std::span<const float> h) {
  DeviceBuffer<float> d(h.size());
  d.upload(h.data(), h.size());
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

// A copy of h starting `off` floats into a poisoned allocation (off = 1 misaligns float4 access), and the
// elements from `off` on back: for checking a kernel's vector path against its scalar fallback.
inline DeviceBuffer<float> to_device_at(const std::vector<float>& h, size_t off) {
  DeviceBuffer<float> d(h.size() + off);
  d.fill_bytes(0xFF);
  d.upload(h.data(), h.size(), off);
  return d;
}
inline std::vector<float> from_device_at(const DeviceBuffer<float>& d, size_t off) {
  const std::vector<float> h = from_device(d);
  return std::vector<float>(h.begin() + off, h.end());
}

// Outputs of a kernel's float4 path (a) and its scalar fallback (b), named in order: bitwise equal.
inline void expect_paths_bitwise_equal(const std::vector<std::vector<float>>& a,
                                       const std::vector<std::vector<float>>& b,
                                       std::initializer_list<const char*> names) {
  ASSERT_EQ(a.size(), names.size());
  ASSERT_EQ(b.size(), names.size());
  size_t k = 0;
  for (const char* name : names) {
    EXPECT_EQ(a[k].size(), b[k].size()) << name;
    if (a[k].size() == b[k].size())
      EXPECT_EQ(0, std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)))
          << name << " differs between the float4 path and the scalar path";
    ++k;
  }
}

}  // namespace mlalpha::test
