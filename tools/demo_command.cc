// `hxrt demo`: one producer/consumer round trip through the runtime's foundation — a session, two streams, a
// cross-stream event wait, the caching pool with stream-ordered frees, event timing and a clean teardown.
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "hxrt/hal/cpu/cpu_kernel.h"
#include "hxrt/runtime/session.h"

namespace hxrt::tools {
namespace {

// y[i] = a * x[i] + b, split over the device's intra-op pool.
const hal::CpuKernel kAffine{"demo.affine", [](const hal::CpuLaunchContext& ctx) {
                               const auto* x = ctx.buffer<const float>(0);
                               auto* y = ctx.buffer<float>(1);
                               const auto n = static_cast<int64_t>(ctx.buffer_bytes(0) / sizeof(float));
                               const auto a = ctx.scalar<float>(2);
                               const auto b = ctx.scalar<float>(3);
                               ctx.pool().parallel_for(n, 16384, [&](int64_t begin, int64_t end) {
                                 for (int64_t i = begin; i < end; ++i) y[i] = a * x[i] + b;
                               });
                               return ok_status();
                             }};

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20)); }

Status run_demo(const std::string& device_spec, int64_t elements) {
  if (elements <= 0) return invalid_argument("--elements must be positive");
  hal::DriverRegistry drivers;
  HXRT_RETURN_IF_ERROR(hal::register_builtin_drivers(drivers));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Session> session,
                        runtime::Session::create(drivers, device_spec, runtime::SessionOptions{.name = "demo"}));
  const hal::DeviceInfo& info = session->device().info();
  fmt::print("device {}:{} ({})\n", hal::device_kind_name(info.kind), info.ordinal, info.name);

  HXRT_ASSIGN_OR_RETURN(hal::Stream * producer, session->stream("producer"));
  HXRT_ASSIGN_OR_RETURN(hal::Stream * consumer, session->stream("consumer"));
  HXRT_ASSIGN_OR_RETURN(hal::Event * start, session->create_event());
  HXRT_ASSIGN_OR_RETURN(hal::Event * produced, session->create_event());
  HXRT_ASSIGN_OR_RETURN(hal::Event * consumed, session->create_event());
  memory::CachingAllocator& pool = session->pool();

  const auto bytes = static_cast<uint64_t>(elements) * sizeof(float);
  std::vector<float> host_in(static_cast<size_t>(elements));
  std::iota(host_in.begin(), host_in.end(), 0.0f);
  std::vector<float> host_out(host_in.size(), NAN);

  // Producer: upload x, y = 2x + 1. Consumer: wait for the producer, copy y to z, download z.
  HXRT_ASSIGN_OR_RETURN(memory::Allocation x, pool.allocate(bytes, *producer, "demo.x"));
  HXRT_ASSIGN_OR_RETURN(memory::Allocation y, pool.allocate(bytes, *producer, "demo.y"));
  HXRT_ASSIGN_OR_RETURN(memory::Allocation z, pool.allocate(bytes, *consumer, "demo.z"));
  HXRT_RETURN_IF_ERROR(producer->record(*start));
  HXRT_RETURN_IF_ERROR(producer->copy_from_host(x.view(), host_in.data()));
  if (info.kind != hal::DeviceKind::kCpu) {
    return unimplemented("demo kernels exist for the cpu device only in this build");
  }
  const hal::KernelArg args[] = {hal::KernelArg::buffer(x.view()), hal::KernelArg::buffer(y.view()),
                                 hal::KernelArg::scalar(2.0f), hal::KernelArg::scalar(1.0f)};
  HXRT_RETURN_IF_ERROR(producer->launch(kAffine, hal::LaunchConfig{}, args));
  HXRT_RETURN_IF_ERROR(producer->record(*produced));
  HXRT_RETURN_IF_ERROR(pool.free(x));  // stream-ordered: the kernel enqueued before it still reads x
  HXRT_RETURN_IF_ERROR(consumer->wait(*produced, std::chrono::seconds(30)));
  HXRT_RETURN_IF_ERROR(consumer->copy(z.view(), y.view()));
  HXRT_RETURN_IF_ERROR(pool.record_use(y, *consumer));  // y is read on the consumer stream too, so its free
  HXRT_RETURN_IF_ERROR(pool.free(y));                   // waits for both streams to pass it
  HXRT_RETURN_IF_ERROR(consumer->copy_to_host(host_out.data(), z.view()));
  HXRT_RETURN_IF_ERROR(consumer->record(*consumed));
  HXRT_RETURN_IF_ERROR(pool.free(z));
  HXRT_RETURN_IF_ERROR(session->synchronize(std::chrono::seconds(60)));

  int64_t wrong = 0;
  for (size_t i = 0; i < host_out.size(); ++i) wrong += host_out[i] != 2.0f * host_in[i] + 1.0f;
  if (wrong != 0) return internal_error("demo: {} of {} results are wrong", wrong, elements);
  HXRT_ASSIGN_OR_RETURN(hal::Duration produce_time, produced->elapsed_since(*start));
  HXRT_ASSIGN_OR_RETURN(hal::Duration total_time, consumed->elapsed_since(*start));
  fmt::print("producer: upload + affine over {} floats: {:.3f} ms (device events)\n", elements,
             std::chrono::duration<double, std::milli>(produce_time).count());
  fmt::print("consumer: waited on the producer's event, copied and downloaded: total {:.3f} ms\n",
             std::chrono::duration<double, std::milli>(total_time).count());
  fmt::print("results: all {} values equal 2x+1\n", elements);

  // Cached reuse: the same request on the producer stream is served from the cache without a device allocation.
  HXRT_ASSIGN_OR_RETURN(memory::Allocation again, pool.allocate(bytes, *producer, "demo.again"));
  HXRT_RETURN_IF_ERROR(pool.free(again));
  const memory::AllocatorStats stats = pool.stats();
  fmt::print("pool: reserved {} in {} segment(s), peak allocated {}, {} allocations, {} cache hits, "
             "{} device allocations\n",
             mib(stats.reserved_bytes.current), stats.segments.current, mib(stats.allocated_bytes.peak),
             stats.num_allocs, stats.cache_hits, stats.device_allocs);
  HXRT_ASSIGN_OR_RETURN(runtime::TeardownReport report, session->close());
  fmt::print("teardown: {}\n", report.to_string());
  return report.clean() ? ok_status() : internal_error("demo teardown was not clean: {}", report.to_string());
}

}  // namespace

void add_demo_command(CLI::App& app, int* exit_code) {
  CLI::App* command = app.add_subcommand("demo", "Run a two-stream producer/consumer demo of sessions, events and the pool");
  auto device = std::make_shared<std::string>("cpu");
  auto elements = std::make_shared<int64_t>(1 << 22);
  command->add_option("--device", *device, "Device to run on (cpu, cpu:0)")->capture_default_str();
  command->add_option("--elements", *elements, "Number of floats to process")->capture_default_str();
  command->callback([=] {
    Status status = run_demo(*device, *elements);
    if (!status.ok()) {
      fmt::print(stderr, "hxrt demo: {}\n", status.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
