#pragma once
// Readable kernel names for the per-kernel table of ml-alpha-kernels. Demangled CUDA kernel names run to
// hundreds of characters (return type, namespaces, every parameter type), which buries the one word that
// matters. Header-only and free of CUDA so that a CPU test pins the rules down.
//
// Rules, applied to the demangled name:
//  - drop the return type, the parameter list, "(anonymous namespace)::" and the project's own
//    "mlalpha::gpu::" prefix (every project kernel has it); other namespaces stay (ssd_detail::, cub::);
//  - keep short template arguments (numbers, bools, plain identifiers), because they are what separates
//    e.g. the SSD chunk pass of the forward (kReverse = false) from the backward's (true);
//  - a wrapper kernel (cutlass::Kernel2<cutlass_80_..._sgemm_...>) shows the identifier it wraps;
//  - any other template argument list becomes <...>;
//  - anything still longer than `width` keeps its head and tail around "..." (cuBLAS kernel names
//    carry the tile shape near the start and the split-k variant at the end).
#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

namespace mlalpha::kernel_names {

// The demangled name, or the input unchanged when it is not a mangled C++ name (cuBLAS's sm90_xmma_*).
inline std::string demangle(const char* mangled) {
  if (mangled == nullptr) return "<unnamed>";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = (status == 0 && d != nullptr) ? std::string(d) : std::string(mangled);
  std::free(d);
  return out;
}

namespace detail {

inline void erase_all(std::string& s, const std::string& what) {
  for (size_t p; (p = s.find(what)) != std::string::npos;) s.erase(p, what.size());
}

// Splits `s` at `sep` where no <...> or (...) is open.
inline std::vector<std::string> split_top(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && s.compare(i, sep.size(), sep) == 0) {
      parts.push_back(s.substr(start, i - start));
      i += sep.size() - 1;
      start = i + 1;
    }
  }
  parts.push_back(s.substr(start));
  return parts;
}

inline std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// A template argument worth printing: 8, 2u, true, (Mode)1, kRows, -1.
inline bool simple_arg(std::string a) {
  a = trim(a);
  if (!a.empty() && a[0] == '(') {  // the demangler writes enum / char arguments as "(Type)value"
    const size_t close = a.find(')');
    if (close == std::string::npos) return false;
    a = a.substr(close + 1);
  }
  if (a.empty() || a.size() > 16) return false;
  for (char c : a)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// "name<args>" → {name, args} (args empty when there is no template argument list).
inline std::pair<std::string, std::string> split_template(const std::string& s) {
  const size_t lt = s.find('<');
  if (lt == std::string::npos || s.back() != '>') return {s, ""};
  return {s.substr(0, lt), s.substr(lt + 1, s.size() - lt - 2)};
}

inline bool is_wrapper(const std::string& base) {
  return base == "Kernel" || base == "Kernel2" || base == "device_kernel" || base == "kernel";
}

inline std::string clip_middle(const std::string& s, size_t width) {
  if (s.size() <= width || width < 8) return s;
  const size_t tail = (width - 3) / 3, head = width - 3 - tail;
  return s.substr(0, head) + "..." + s.substr(s.size() - tail);
}

}  // namespace detail

// The table name of a kernel, from its demangled name; at most `width` characters.
inline std::string shorten(std::string d, size_t width = 80) {
  using namespace detail;
  erase_all(d, "(anonymous namespace)::");
  // Cut the parameter list: the first '(' outside any template argument list.
  int depth = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] == '<') ++depth;
    if (d[i] == '>') --depth;
    if (d[i] == '(' && depth == 0 && i > 0) {
      d.resize(i);
      break;
    }
  }
  d = trim(d);
  // A function template's demangled name starts with its return type ("void ").
  const std::vector<std::string> words = split_top(d, " ");
  if (words.size() > 1) d = words.back();
  std::vector<std::string> scopes = split_top(d, "::");
  std::string out;
  for (size_t i = 0; i + 1 < scopes.size(); ++i) {
    const std::string scope = split_template(scopes[i]).first;
    if ((i == 0 && scope == "mlalpha") || (i == 1 && scope == "gpu" && scopes[0] == "mlalpha")) continue;
    out += scope + "::";
  }
  const auto [base, args] = split_template(scopes.back());
  out += base;
  if (!args.empty()) {
    const std::vector<std::string> list = split_top(args, ",");
    bool simple = true;
    for (const std::string& a : list) simple = simple && simple_arg(a);
    if (simple) {
      out += "<";
      for (size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + trim(list[i]);
      out += ">";
    } else if (is_wrapper(base)) {
      // The wrapped kernel's own name, without its namespaces and template arguments.
      const std::string inner = split_template(split_top(trim(list[0]), "::").back()).first;
      out += "<" + inner + ">";
    } else {
      out += "<...>";
    }
  }
  return clip_middle(out, width);
}

}  // namespace mlalpha::kernel_names
