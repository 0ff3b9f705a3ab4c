// The MPI world of a test program started by mpiexec (tests/testing/mpi_main.cc, its main): every rank runs every
// test, in the same order.
#pragma once

#include <memory>

#include "hxrt/comm/communicator.h"

namespace hxrt::testing {

// The world communicator (MPI backend), opened by main before the tests run.
const std::shared_ptr<comm::Communicator>& mpi_world();

}  // namespace hxrt::testing
