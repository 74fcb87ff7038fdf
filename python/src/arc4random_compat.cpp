// arc4random for the statically linked libstdc++ (python/CMakeLists.txt, MLALPHA_STATIC_RUNTIME). GCC 12's
// std::random_device (libstdc++'s random.o, which the engine's temporary file names pull in) references
// arc4random, which glibc has only since 2.36: linked as it is, the extension would not load on an older glibc
// and the wheel could only be tagged manylinux_2_36 (not Ubuntu 22.04, RHEL 9). This definition, hidden inside
// the extension, satisfies that reference with getrandom(2) (glibc 2.25), so the wheel's oldest glibc is set by
// the rest of the code (2.34 when built on Debian 12). It is never exported, so no other module sees it.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) std::uint32_t arc4random(void) {
  std::uint32_t v = 0;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof v, 0);  // 4 bytes: never short, but a signal may interrupt the wait
    if (n == static_cast<ssize_t>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) __builtin_trap();  // no entropy source at all: as glibc's own arc4random aborts
  }
}
