// main() of the test programs mpiexec starts (hxrt_mpi_test in cmake/HxrtHelpers.cmake): opens the MPI world, runs
// the tests on every rank, and lets the world go before MPI is finalised at exit.
#include <gtest/gtest.h>

#include <cstdio>

#include "testing/mpi_world.h"

namespace hxrt::testing {
namespace {
std::shared_ptr<comm::Communicator> g_world;
}  // namespace

const std::shared_ptr<comm::Communicator>& mpi_world() { return g_world; }

}  // namespace hxrt::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  hxrt::Result<std::shared_ptr<hxrt::comm::Communicator>> world = hxrt::comm::world({.backend = "mpi"});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().to_string().c_str());
    return 1;
  }
  hxrt::testing::g_world = *world;
  const int result = RUN_ALL_TESTS();
  hxrt::testing::g_world.reset();
  return result;
}
