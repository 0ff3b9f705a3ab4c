// cpu_relax(): the spin-wait hint (x86 PAUSE), for loops that poll an atomic before falling back to a blocking wait.
//
// Thread-safety: reentrant.
#pragma once

namespace hxrt {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace hxrt
