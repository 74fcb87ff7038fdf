#pragma once
// FloatValues: the storage of a panel's features and targets. It either owns its floats (a std::vector)
// or borrows read-only memory that an owner keeps alive: a memory-mapped .npy file, a NumPy array handed
// in from Python. Borrowing is what lets a 7.9 GB panel be read without a second host copy.
//
// Reading never copies. The first write access (a non-const data(), operator[], begin() or resize) of a
// borrowed array copies it into owned storage first, so the lender's memory is never written: code that
// only reads should hold a const reference. Copying a FloatValues copies owned floats and shares a borrow.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace mlalpha {

class FloatValues {
 public:
  FloatValues() = default;
  FloatValues(std::vector<float> v) : owned_(std::move(v)) {}  // NOLINT: a vector is a natural FloatValues
  FloatValues(std::initializer_list<float> v) : owned_(v) {}

  // Borrows n floats at `data`; `owner` keeps them alive (and may be null when the caller guarantees it).
  static FloatValues borrow(const float* data, size_t n, std::shared_ptr<const void> owner) {
    FloatValues a;
    a.view_ = data;
    a.view_size_ = n;
    a.owner_ = std::move(owner);
    return a;
  }
  bool borrowed() const { return view_ != nullptr; }

  size_t size() const { return view_ ? view_size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  const float* data() const { return view_ ? view_ : owned_.data(); }
  const float& operator[](size_t i) const { return data()[i]; }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size(); }
  const float* cbegin() const { return begin(); }
  const float* cend() const { return end(); }

  // Copies a borrow into owned storage now (nothing for an owned array). Call it before threads write
  // through the accessors below: their copy-on-write is not safe to race.
  float* make_owned() { return own().data(); }

  // Write access: owns first (copy-on-write of a borrow).
  float* data() { return own().data(); }
  float& operator[](size_t i) { return own()[i]; }
  float* begin() { return own().data(); }
  float* end() { return own().data() + owned_.size(); }
  void resize(size_t n) { own().resize(n); }
  void resize(size_t n, float v) { own().resize(n, v); }
  void assign(size_t n, float v) { drop_view(), owned_.assign(n, v); }
  template <typename It>
  void assign(It first, It last) {
    std::vector<float> v(first, last);  // first..last may point into the borrowed view
    drop_view();
    owned_ = std::move(v);
  }
  std::vector<float> to_vector() const { return std::vector<float>(begin(), end()); }

  friend bool operator==(const FloatValues& a, const FloatValues& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const FloatValues& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  std::vector<float>& own() {
    if (view_) {
      owned_.assign(view_, view_ + view_size_);
      drop_view();
    }
    return owned_;
  }
  void drop_view() {
    view_ = nullptr;
    view_size_ = 0;
    owner_.reset();
  }

  std::vector<float> owned_;
  const float* view_ = nullptr;  // non-null: borrowed
  size_t view_size_ = 0;
  std::shared_ptr<const void> owner_;
};

}  // namespace mlalpha
