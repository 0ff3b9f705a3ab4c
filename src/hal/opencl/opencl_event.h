// OpenCL events are host-signalled events (hal/signal_event.h): the submitter thread of the recording stream
// completes the signal after the record's marker ran, with the marker's device timestamp mapped onto the host clock,
// or fails it when the record is skipped.
#pragma once

#include "hal/signal_event.h"

namespace hxrt::hal::opencl {
using OpenClEvent = SignalEvent;
}  // namespace hxrt::hal::opencl
