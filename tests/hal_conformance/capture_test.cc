// Conformance: captured command lists (Note [Captured command lists] in hxrt/hal/stream.h) — recorded once,
// replayed many times with new contents in the memory they name, on every backend that can capture.
#include <string>
#include <vector>

#include "hal_conformance/fixture.h"

namespace hxrt::hal::cts {
namespace {

using CaptureConformance = HalConformance;

TEST_P(CaptureConformance, RecordedWorkRunsOnlyWhenReplayedAndReadsTheMemoryAsItIsThen) {
  auto stream = make_stream("capture");
  auto input = upload(*stream, std::vector<float>(64, 0.0f));
  auto work = make_buffer(input->size());
  ASSERT_TRUE(stream->fill(*work, 0, 1).ok());
  Status begun = stream->begin_capture();
  if (begun.code() == StatusCode::kUnimplemented) GTEST_SKIP() << begun.to_string();
  ASSERT_TRUE(begun.ok()) << begun.to_string();
  EXPECT_TRUE(stream->capturing());
  ASSERT_TRUE(stream->copy(*work, *input).ok());  // work = input
  ASSERT_TRUE(increment(*stream, *work, 64).ok());
  ASSERT_TRUE(increment(*stream, *work, 32).ok());
  Result<std::shared_ptr<const CapturedCommands>> list = stream->end_capture({"copy", "inc all", "inc half"});
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_FALSE(stream->capturing());
  EXPECT_EQ((*list)->size(), 3u);
  EXPECT_EQ(download(*stream, *work), std::vector<float>(64, 0.0f)) << "captured work does not run";
  for (float base : {0.0f, 10.0f, -3.0f}) {
    std::vector<float> in(64, base);
    ASSERT_TRUE(stream->copy_from_host(*input, in.data()).ok());
    ASSERT_TRUE(stream->launch_captured(*list).ok());
    const std::vector<float> out = download(*stream, *work);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], base + (i < 32 ? 2.0f : 1.0f)) << "i=" << i;
  }
}

TEST_P(CaptureConformance, RecordsWaitsAndCallbacksCannotBeCaptured) {
  auto stream = make_stream();
  auto event = make_event();
  ASSERT_TRUE(stream->record(*event).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  Status begun = stream->begin_capture();
  if (begun.code() == StatusCode::kUnimplemented) GTEST_SKIP() << begun.to_string();
  ASSERT_TRUE(begun.ok());
  EXPECT_EQ(stream->begin_capture().code(), StatusCode::kFailedPrecondition) << "no nested capture";
  EXPECT_EQ(stream->record(*event).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(stream->host_callback([](const Status&) {}).code(), StatusCode::kUnimplemented);
  Result<std::shared_ptr<const CapturedCommands>> list = stream->end_capture();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)->size(), 0u);
  EXPECT_EQ(stream->end_capture().status().code(), StatusCode::kFailedPrecondition);
  // Another stream cannot replay it.
  auto other = make_stream();
  EXPECT_EQ(other->launch_captured(*list).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(stream->synchronize().ok());
}

TEST_P(CaptureConformance, HostTasksAreCapturedAndReplayed) {
  auto stream = make_stream("capture-tasks");
  auto work = upload(*stream, std::vector<float>(16, 0.0f));
  Status begun = stream->begin_capture();
  if (begun.code() == StatusCode::kUnimplemented) GTEST_SKIP() << begun.to_string();
  ASSERT_TRUE(begun.ok());
  ASSERT_TRUE(increment(*stream, *work, 16).ok());
  int runs = 0;
  ASSERT_TRUE(stream->host_task([&](const HostTaskContext&) {
                      ++runs;
                      return runs == 3 ? aborted("third replay refused") : ok_status();
                    })
                  .ok());
  Status skipped_with;
  ASSERT_TRUE(stream->host_task([](const HostTaskContext&) { return ok_status(); },
                                [&](const Status& error) { skipped_with = error; })
                  .ok());
  Result<std::shared_ptr<const CapturedCommands>> list = stream->end_capture();
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_EQ(runs, 0) << "captured tasks do not run";
  for (int replay = 1; replay <= 2; ++replay) {
    ASSERT_TRUE(stream->launch_captured(*list).ok());
    ASSERT_TRUE(stream->synchronize().ok());
    EXPECT_EQ(runs, replay);
  }
  ASSERT_TRUE(stream->launch_captured(*list).ok());
  Status failed = stream->synchronize();
  EXPECT_EQ(failed.code(), StatusCode::kAborted) << failed.to_string();
  EXPECT_NE(failed.to_string().find("command 2 of 3"), std::string::npos) << failed.to_string();
  EXPECT_EQ(skipped_with.code(), StatusCode::kAborted) << "the task after the failure is told";
  ASSERT_TRUE(stream->reset().ok());
}

TEST_P(CaptureConformance, AFailureInAReplayNamesTheCommandAndIsStickyUntilReset) {
  if (kernels_->fail() == nullptr) GTEST_SKIP() << "backend cannot fail a kernel on purpose";
  auto stream = make_stream("replaying");
  auto buffer = upload(*stream, std::vector<float>(16, 1.0f));
  Status begun = stream->begin_capture();
  if (begun.code() == StatusCode::kUnimplemented) GTEST_SKIP() << begun.to_string();
  ASSERT_TRUE(begun.ok());
  ASSERT_TRUE(increment(*stream, *buffer, 16).ok());
  ASSERT_TRUE(stream->launch(*kernels_->fail(), LaunchConfig{}, {}).ok());
  ASSERT_TRUE(increment(*stream, *buffer, 16).ok());
  Result<std::shared_ptr<const CapturedCommands>> list = stream->end_capture({"first", "the failing one", "third"});
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(stream->launch_captured(*list).ok());
  Status synced = stream->synchronize();
  ASSERT_FALSE(synced.ok());
  EXPECT_NE(synced.to_string().find("command 2 of 3 (the failing one)"), std::string::npos) << synced.to_string();
  EXPECT_EQ(stream->launch_captured(*list).code(), synced.code()) << "sticky";
  ASSERT_TRUE(stream->reset().ok());
  // The first command ran, the third did not.
  EXPECT_EQ(download(*stream, *buffer), std::vector<float>(16, 2.0f));
}

INSTANTIATE_TEST_SUITE_P(Backends, CaptureConformance, testing::ValuesIn(conformance_backends()), backend_name);

}  // namespace
}  // namespace hxrt::hal::cts
