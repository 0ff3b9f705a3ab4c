// CPU events are host-signalled events (hal/signal_event.h).
#pragma once

#include "hal/signal_event.h"

namespace hxrt::hal::cpu {
using CpuEvent = SignalEvent;
}  // namespace hxrt::hal::cpu
