// The communication backends behind comm::world() (private to comm/).
#pragma once

#include <memory>

#include "hxrt/base/status.h"
#include "hxrt/comm/communicator.h"
#include "hxrt/hal/types.h"

namespace hxrt::comm {

// MPI's world (mpi_communicator.cc): loads the MPI plugin and initialises MPI; Unavailable without them.
Result<std::shared_ptr<Communicator>> open_mpi_world(hal::Duration timeout);

}  // namespace hxrt::comm
