// Fault loops (docs/reliability.md): for k = 1, 2, ... fail the k-th resource site (hxrt/base/fault_injection.h)
// reached while
//   (a) a graph file is loaded and run through runtime::Model,
//   (b) the LLM engine generates a few tokens with a paged KV cache (a tiny random Llama),
//   (c) a session is created and closed,
// on cpu and on opencl, until an iteration reaches no more sites. Every failed iteration must return a Status
// naming the injected site, the session must then close clean, and the next run — in the same process, with the
// hook disarmed — must give the reference output bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "hxrt/base/fault_injection.h"
#include "hxrt/formats/npy.h"
#include "hxrt/hal/driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/llm/engine.h"
#include "hxrt/runtime/model.h"
#include "llm/testing/tiny_llama.h"

namespace hxrt {
namespace {

const std::string kExamples = std::string(HXRT_SOURCE_DIR) + "/examples/";
constexpr uint64_t kMaxIterations = 400;

bool same_bytes(const runtime::TensorMap& a, const runtime::TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, tensor] : a) {
    auto it = b.find(name);
    if (it == b.end() || !(it->second == tensor)) return false;
  }
  return true;
}

struct LoopResult {
  int failed = 0;     // iterations whose work returned the injected fault
  int recovered = 0;  // iterations where hxrt recovered from the fault and the work gave the reference result
  std::set<std::string> recovered_sites;
};

// Runs `attempt` with the k-th site failing for k = 1.. until an attempt reaches fewer than k sites. The work either
// fails with a Status naming the injected site, or recovers (a pool that frees its cache and retries, a cache file
// that is rebuilt) and then must have produced the reference result — `attempt` checks that and returns an error
// otherwise. `after` checks the state after each iteration (clean teardown, a bit-identical rerun).
template <typename Attempt, typename After>
LoopResult loop(const std::string& what, Attempt attempt, After after) {
  LoopResult result;
  for (uint64_t k = 1; k <= kMaxIterations; ++k) {
    fault::arm(fault::Plan{.fail_at = k});
    const Status status = attempt();
    const bool fired = fault::injected() > 0;
    const std::string injected = fault::last_injected();
    fault::disarm();
    if (!fired) {
      EXPECT_TRUE(status.ok()) << what << ": with no fault injected: " << status.to_string();
      return result;
    }
    if (status.ok()) {
      ++result.recovered;
      result.recovered_sites.insert(injected.substr(0, injected.find(" #")));
    } else {
      ++result.failed;
      EXPECT_NE(status.to_string().find("injected fault at"), std::string::npos)
          << what << ": fault " << k << " (" << injected << ") lost in: " << status.to_string();
    }
    after(k);
    if (testing::Test::HasFatalFailure()) return result;
  }
  ADD_FAILURE() << what << ": still failing after " << kMaxIterations << " iterations";
  return result;
}

void print(const std::string& what, const LoopResult& result) {
  std::printf("%s: %d faults failed the work with a Status naming them, %d were recovered from (%s)\n",
              what.c_str(), result.failed, result.recovered, fmt::format("{}", fmt::join(result.recovered_sites, "; ")).c_str());
}

class FaultLoopTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    hal::DriverRegistry drivers;
    ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
    Result<std::unique_ptr<runtime::Session>> probe = runtime::Session::create(drivers, GetParam());
    if (!probe.ok() && probe.status().code() == StatusCode::kUnavailable) GTEST_SKIP() << probe.status().to_string();
    ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  }
  void TearDown() override {
    fault::disarm();
    std::set<std::string> locations;
    for (const fault::ReachedLocation& l : fault::reached_locations()) {
      locations.insert(fmt::format("{} at {}", fault::site_name(l.site), l.location));
    }
    RecordProperty("reached_sites", fmt::format("{}", fmt::join(locations, "; ")));
    std::printf("fault sites reached so far: %zu\n", locations.size());
  }
};

TEST_P(FaultLoopTest, GraphLoadAndRun) {
  Result<HostTensor> x = formats::read_npy(kExamples + "mlp_input.npy");
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  const runtime::TensorMap inputs{{"x", *x}};
  runtime::ModelOptions options{.device = GetParam(), .fallback_device = "cpu"};
  runtime::TensorMap reference;
  {
    Result<std::unique_ptr<runtime::Model>> model = runtime::Model::load(kExamples + "mlp.hxrt", options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    Result<runtime::TensorMap> out = (*model)->run(inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    reference = *out;
  }
  std::unique_ptr<runtime::Model> model;
  const LoopResult result = loop(
      "load and run mlp.hxrt",
      [&]() -> Status {
        model.reset();
        HXRT_ASSIGN_OR_RETURN(model, runtime::Model::load(kExamples + "mlp.hxrt", options));
        HXRT_ASSIGN_OR_RETURN(runtime::TensorMap out, model->run(inputs));
        return same_bytes(out, reference) ? ok_status() : internal_error("output differs from the reference");
      },
      [&](uint64_t k) {
        if (model == nullptr) return;  // the load failed: nothing was left open
        // The same model runs again, bit-identically, then closes clean.
        Result<runtime::TensorMap> again = model->run(inputs);
        ASSERT_TRUE(again.ok()) << "after fault " << k << ": " << again.status().to_string();
        EXPECT_TRUE(same_bytes(*again, reference)) << "after fault " << k;
        Result<runtime::TeardownReport> report = model->close();
        ASSERT_TRUE(report.ok()) << "after fault " << k << ": " << report.status().to_string();
        EXPECT_TRUE(report->clean()) << "after fault " << k << ": " << report->to_string();
        model.reset();
      });
  print("load and run mlp.hxrt on " + GetParam(), result);
  EXPECT_GE(result.failed, 3) << "a load and a run reach at least a file, streams and memory";
}

TEST_P(FaultLoopTest, SessionCreateAndClose) {
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  const LoopResult result = loop(
      "session create/close",
      [&]() -> Status {
        HXRT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Session> session,
                              runtime::Session::create(drivers, GetParam()));
        HXRT_ASSIGN_OR_RETURN(hal::Stream * stream, session->stream("work"));
        HXRT_ASSIGN_OR_RETURN(memory::Allocation block, session->pool().allocate(1 << 16, *stream, "loop"));
        HXRT_RETURN_IF_ERROR(stream->fill(block.view(), 0, 4));
        HXRT_RETURN_IF_ERROR(session->pool().free(block));
        HXRT_ASSIGN_OR_RETURN(hal::Event * event, session->create_event());
        HXRT_RETURN_IF_ERROR(stream->record(*event));
        HXRT_ASSIGN_OR_RETURN(runtime::TeardownReport report, session->close());
        return report.clean() ? ok_status() : internal_error("unclean teardown: {}", report.to_string());
      },
      [](uint64_t) {});
  print("session create/close on " + GetParam(), result);
  EXPECT_GE(result.failed, 3);
}

// On cpu only: on opencl every iteration would compile the decoder's programs again.
TEST(FaultLoopCpuTest, LlmGenerateWithAPagedKvCache) {
  auto model = llm::testing::TinyLlama::create(llm::testing::TinyLlamaSpec{});
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  const std::vector<int32_t> prompt = {1, 5, 9, 14, 3};
  llm::EngineOptions options;
  options.kv_budget_tokens = 64;
  options.block_size = 4;
  auto generate = [&](runtime::Session& session) -> Result<std::vector<int32_t>> {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Engine> engine, llm::Engine::create(session, model->file(), options));
    HXRT_ASSIGN_OR_RETURN(llm::RequestResult result,
                          engine->generate(llm::Request{.prompt = prompt, .max_new_tokens = 4}));
    if (!result.status.ok()) return result.status;
    return result.tokens;
  };
  std::vector<int32_t> reference;
  {
    Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers, "cpu");
    ASSERT_TRUE(session.ok());
    Result<std::vector<int32_t>> tokens = generate(**session);
    ASSERT_TRUE(tokens.ok()) << tokens.status().to_string();
    reference = *tokens;
  }
  std::unique_ptr<runtime::Session> session;
  const LoopResult result = loop(
      "LLM generate",
      [&]() -> Status {
        session.reset();
        HXRT_ASSIGN_OR_RETURN(session, runtime::Session::create(drivers, "cpu"));
        HXRT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, generate(*session));
        return tokens == reference ? ok_status() : internal_error("tokens differ from the reference");
      },
      [&](uint64_t k) {
        if (session == nullptr) return;
        Result<std::vector<int32_t>> again = generate(*session);
        ASSERT_TRUE(again.ok()) << "after fault " << k << ": " << again.status().to_string();
        EXPECT_EQ(*again, reference) << "after fault " << k;
        Result<runtime::TeardownReport> report = session->close();
        ASSERT_TRUE(report.ok()) << "after fault " << k << ": " << report.status().to_string();
        EXPECT_TRUE(report->clean()) << "after fault " << k << ": " << report->to_string();
        session.reset();
      });
  print("LLM generate on cpu", result);
  EXPECT_GE(result.failed, 3);
}

INSTANTIATE_TEST_SUITE_P(Devices, FaultLoopTest, testing::Values("cpu", "opencl"),
                         [](const testing::TestParamInfo<std::string>& param) { return param.param; });

}  // namespace
}  // namespace hxrt
