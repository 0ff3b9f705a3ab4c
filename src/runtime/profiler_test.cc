// The profiler records one launch per ExecutionObject with device times, and its Chrome trace is well formed.
#include "hxrt/runtime/profiler.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/executor.h"

namespace hxrt::runtime {
namespace {

using graph::Dim;
using nlohmann::json;

class ProfilerTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(Session::create(drivers_, "cpu", SessionOptions{.name = "prof"})).value();
  }
  void add_node(graph::Graph& g, const std::string& name, const std::string& op, std::vector<std::string> in,
                const std::string& out) {
    const int version = schemas_.find(op, "", 0).value()->since_version;
    ASSERT_TRUE(g.add_node(name, op, in, std::vector<std::string>{out}, {}, "", version).ok()) << name;
  }
  // Two branches on two streams joined by a Mul that waits for the other stream; MatMul+Add fuses on branch a.
  std::unique_ptr<Executor> branches() {
    graph::Graph g("branches");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {Dim::symbol("n"), 8}}).ok());
    for (const char* w : {"wa", "wb"}) {
      EXPECT_TRUE(g.add_initializer(w, {DType::kF32, {8, 16}}, graph::WeightData::copy_of(w_.bytes)).ok());
    }
    EXPECT_TRUE(g.add_initializer("ba", {DType::kF32, {16}}, graph::WeightData::copy_of(b_.bytes)).ok());
    add_node(g, "a1", "MatMul", {"x", "wa"}, "a");
    add_node(g, "a_bias", "Add", {"a", "ba"}, "ab");
    add_node(g, "a2", "Relu", {"ab"}, "ar");
    add_node(g, "b1", "MatMul", {"x", "wb"}, "b");
    add_node(g, "b2", "Sigmoid", {"b"}, "bs");
    add_node(g, "join", "Mul", {"ar", "bs"}, "y");
    EXPECT_TRUE(g.mark_output("y").ok());
    // Two streams, so the records show both (a CPU plan left at kAutoStreams takes one).
    std::unique_ptr<ExecutionPlan> plan = std::move(ExecutionPlan::build(std::move(g), session_->device().info(),
                                                                          PlanContext::of(*registries_),
                                                                          PlanOptions{.max_streams = 2}))
                                              .value();
    return std::move(Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan)))).value();
  }

  std::mt19937 rng_{3};
  HostTensor w_ = HostTensor::random_f32({8, 16}, rng_);
  HostTensor b_ = HostTensor::random_f32({16}, rng_);
  std::unique_ptr<ops::Registries> registries_ =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false})).value();
  ops::OpSchemaRegistry& schemas_ = registries_->schemas;
  ops::KernelRegistry& kernels_ = registries_->kernels;
  ops::FusionRegistry& fusions_ = registries_->fusions;
  hal::DriverRegistry drivers_;
  std::unique_ptr<Session> session_;
};

TEST_F(ProfilerTest, OffByDefaultAndOnPerRunOrPerSession) {
  std::unique_ptr<Executor> executor = branches();
  const TensorMap inputs{{"x", HostTensor::random_f32({2, 8}, rng_)}};
  ASSERT_TRUE(executor->run(inputs).ok());
  EXPECT_FALSE(session_->profiler().enabled());
  EXPECT_TRUE(session_->profiler().records().empty());
  ASSERT_TRUE(executor->run(inputs, RunOptions{.profile = true}).ok());
  const size_t per_run = executor->plan().objects().size();
  EXPECT_EQ(session_->profiler().records().size(), per_run);
  session_->profiler().set_enabled(true);
  ASSERT_TRUE(executor->run(inputs).ok());
  ASSERT_TRUE(executor->run(inputs).ok());
  EXPECT_EQ(session_->profiler().runs(), 3u);
  EXPECT_EQ(session_->profiler().records().size(), 3 * per_run);
  session_->profiler().set_enabled(false);
  ASSERT_TRUE(executor->run(inputs).ok());
  EXPECT_EQ(session_->profiler().records().size(), 3 * per_run);
}

TEST_F(ProfilerTest, RecordsMatchThePlanWithDeviceTimesOnTheHostClock) {
  std::unique_ptr<Executor> executor = branches();
  const ExecutionPlan& plan = executor->plan();
  ASSERT_EQ(plan.num_streams(), 2);
  ASSERT_FALSE(plan.fusion_groups().empty());
  const int64_t before = hal::host_now_ns();
  ASSERT_TRUE(executor->run({{"x", HostTensor::random_f32({5, 8}, rng_)}}, RunOptions{.profile = true}).ok());
  const int64_t after = hal::host_now_ns();
  const std::vector<LaunchRecord> records = session_->profiler().records();
  ASSERT_EQ(records.size(), plan.objects().size());
  size_t waits = 0;
  bool saw_fused = false;
  for (size_t i = 0; i < records.size(); ++i) {
    const LaunchRecord& r = records[i];
    const ExecutionObject& object = plan.objects()[i];
    const graph::Node& node = plan.graph().node(object.node);
    EXPECT_EQ(r.run, 1u);
    EXPECT_EQ(r.graph, "branches");
    EXPECT_EQ(r.node_id, node.stable_id) << "the graph-file id (Note [Stable node ids])";
    EXPECT_EQ(r.node_name, node.name);
    EXPECT_EQ(r.op_type, node.op_type);
    EXPECT_EQ(r.kernel, object.kernel->name);
    EXPECT_EQ(r.fusion_id, object.fusion_id);
    EXPECT_EQ(r.stream, fmt::format("branches.s{}", object.stream));
    EXPECT_FALSE(r.tiling_key.empty());
    EXPECT_EQ(r.input_shapes.size(), object.inputs.size());
    EXPECT_EQ(r.input_shapes[0], plan.graph().value(object.inputs[0]).name == "x" ? "f32[5, 8]" : "f32[5, 16]")
        << node.name;
    if (r.fusion_id >= 0) {
      saw_fused = true;
      EXPECT_EQ(r.fused_nodes, (std::vector<std::string>{"a1", "a_bias"}));
    }
    ASSERT_TRUE(r.has_device_time()) << r.node_name;
    EXPECT_LE(before, r.enqueue_begin_ns);
    EXPECT_LE(r.enqueue_begin_ns, r.enqueue_end_ns);
    EXPECT_LE(r.enqueue_begin_ns, r.device_begin_ns) << "the device starts a launch after it is enqueued";
    EXPECT_LE(r.device_begin_ns, r.device_end_ns);
    EXPECT_LE(r.device_end_ns, after);
    EXPECT_EQ(r.waits_on.size(), object.wait_events.size());
    for (uint64_t producer : r.waits_on) {
      ASSERT_LT(producer, i);
      EXPECT_NE(records[producer].stream, r.stream);
      EXPECT_LE(records[producer].device_end_ns, r.device_begin_ns) << "a waiting launch starts after its producer";
      ++waits;
    }
  }
  EXPECT_TRUE(saw_fused);
  EXPECT_GE(waits, 1u) << "join waits for the other branch";
  // Launches on one stream do not overlap.
  std::map<std::string, int64_t> last_end;
  for (const LaunchRecord& r : records) {
    EXPECT_LE(last_end[r.stream], r.device_begin_ns) << r.node_name;
    last_end[r.stream] = r.device_end_ns;
  }
  EXPECT_EQ(session_->profiler().counters().size(), records.size());
}

// Checks the Trace Event Format rules Perfetto and chrome://tracing rely on.
TEST_F(ProfilerTest, ChromeTraceIsWellFormed) {
  std::unique_ptr<Executor> executor = branches();
  session_->profiler().set_enabled(true);
  for (int64_t n : {2, 9}) ASSERT_TRUE(executor->run({{"x", HostTensor::random_f32({n, 8}, rng_)}}).ok());
  const std::vector<LaunchRecord> records = session_->profiler().records();
  size_t expected_flows = 0;
  for (const LaunchRecord& r : records) expected_flows += r.waits_on.size();

  const json trace = json::parse(session_->profiler().chrome_trace_json());
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "thread_name") thread_names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    if (e["name"] == "process_name") process_names[e["pid"].get<int>()] = e["args"]["name"];
  }
  EXPECT_EQ(process_names[1], "host");
  EXPECT_NE(process_names[2].find("session 'prof' on cpu:0"), std::string::npos) << process_names[2];

  std::map<std::string, std::vector<std::pair<double, double>>> device_slices;  // stream → [ts, ts + dur]
  size_t device_x = 0, host_x = 0, counters = 0, in_use_samples = 0, pool_instants = 0;
  std::map<uint64_t, std::vector<json>> flows;
  std::set<int> node_ids;
  for (const json& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid")) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    ASSERT_TRUE(e["ts"].is_number()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    if (ph == "X") {
      ASSERT_TRUE(e["dur"].is_number() && e["tid"].is_number() && e["name"].is_string()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      const auto track = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
      ASSERT_TRUE(thread_names.contains(track)) << "every slice is on a named track: " << e.dump();
      const json& args = e["args"];
      for (const char* key : {"node_id", "op", "kernel", "fusion_id", "stream", "tiling", "inputs", "run"}) {
        EXPECT_TRUE(args.contains(key)) << key << " in " << e.dump();
      }
      if (track.first == 2) {
        ++device_x;
        EXPECT_EQ(thread_names[track], "stream " + args["stream"].get<std::string>());
        EXPECT_EQ(e["cat"], args["op"]);
        node_ids.insert(args["node_id"].get<int>());
        const double ts = e["ts"].get<double>();
        device_slices[args["stream"]].push_back({ts, ts + e["dur"].get<double>()});
      } else {
        ++host_x;
        EXPECT_EQ(e["cat"], "enqueue");
      }
    } else if (ph == "s" || ph == "f") {
      flows[e["id"].get<uint64_t>()].push_back(e);
    } else if (ph == "C" && e["name"] == "pool bytes") {
      ++counters;
      EXPECT_TRUE(e["args"]["allocated"].is_number() && e["args"]["reserved"].is_number()) << e.dump();
    } else if (ph == "C" && e["name"] == "pool bytes in use") {
      ++in_use_samples;
      EXPECT_TRUE(e["args"]["bytes"].is_number()) << e.dump();
    } else if (ph == "i") {
      ++pool_instants;
      EXPECT_EQ(e["s"], "t");
      EXPECT_EQ(e["cat"], "pool");
      EXPECT_EQ(thread_names[std::make_pair(e["pid"].get<int>(), e["tid"].get<int>())], "pool (alloc/free)");
      for (const char* key : {"node_id", "tag", "value", "bytes", "in_use_bytes", "run"}) {
        EXPECT_TRUE(e["args"].contains(key)) << key << " in " << e.dump();
      }
    } else {
      ADD_FAILURE() << "unexpected phase " << e.dump();
    }
  }
  EXPECT_EQ(device_x, records.size()) << "one device slice per launch";
  EXPECT_EQ(host_x, records.size()) << "one enqueue slice per launch";
  EXPECT_EQ(node_ids.size(), executor->plan().objects().size());
  EXPECT_EQ(counters, records.size());
  const size_t pool_events = session_->profiler().pool_events().size();
  EXPECT_GT(pool_events, 0u) << "n is symbolic: the intermediates come from the pool";
  EXPECT_EQ(pool_instants, pool_events) << "one instant per pool event";
  EXPECT_EQ(in_use_samples, pool_events) << "one counter sample per pool event";
  EXPECT_EQ(flows.size(), expected_flows) << "one flow per cross-stream wait";
  for (const auto& [id, pair] : flows) {
    ASSERT_EQ(pair.size(), 2u) << "flow " << id << " pairs up";
    const json& start = pair[0]["ph"] == "s" ? pair[0] : pair[1];
    const json& finish = pair[0]["ph"] == "s" ? pair[1] : pair[0];
    EXPECT_EQ(start["ph"], "s");
    EXPECT_EQ(finish["ph"], "f");
    EXPECT_EQ(finish["bp"], "e");
    EXPECT_NE(start["tid"], finish["tid"]) << "flows join different streams";
    EXPECT_LE(start["ts"].get<double>(), finish["ts"].get<double>());
    // Each end lies inside a slice of its track, so the viewer binds it.
    for (const json* end : {&start, &finish}) {
      const std::string stream = thread_names[{2, (*end)["tid"].get<int>()}].substr(7);
      const double ts = (*end)["ts"].get<double>();
      const auto& slices = device_slices[stream];
      EXPECT_TRUE(std::any_of(slices.begin(), slices.end(), [&](auto s) { return s.first <= ts && ts <= s.second; }))
          << end->dump();
    }
  }
}

TEST_F(ProfilerTest, ConcurrentExecutorsOnOneSessionAppendWholeRuns) {
  std::unique_ptr<Executor> first = branches();
  std::unique_ptr<Executor> second = branches();
  session_->profiler().set_enabled(true);
  constexpr int kRuns = 5;
  auto work = [&](Executor& executor, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < kRuns; ++i) EXPECT_TRUE(executor.run({{"x", HostTensor::random_f32({3, 8}, rng)}}).ok());
  };
  std::thread a(work, std::ref(*first), 1u);
  std::thread b(work, std::ref(*second), 2u);
  a.join();
  b.join();
  const std::vector<LaunchRecord> records = session_->profiler().records();
  const size_t per_run = first->plan().objects().size();
  ASSERT_EQ(records.size(), 2 * kRuns * per_run);
  std::set<int> threads;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].run, i / per_run + 1) << "runs are contiguous";
    threads.insert(records[i].host_thread);
    for (uint64_t producer : records[i].waits_on) EXPECT_EQ(records[producer].run, records[i].run);
  }
  EXPECT_EQ(threads.size(), 2u);
  const json trace = json::parse(session_->profiler().chrome_trace_json(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(trace.is_discarded()) << "the trace of concurrent runs is valid JSON";
}

TEST_F(ProfilerTest, SummaryAddsUpPerOpKernelAndNode) {
  std::vector<LaunchRecord> records(4);
  const char* ops[] = {"MatMul", "MatMul", "Relu", "Add"};
  const int64_t durations[] = {300, 500, 100, 100};
  for (size_t i = 0; i < 4; ++i) {
    records[i].run = 1;
    records[i].op_type = ops[i];
    records[i].kernel = std::string(ops[i]) + "K";
    records[i].node_name = fmt::format("n{}", i);
    records[i].enqueue_begin_ns = static_cast<int64_t>(i) * 1000;
    records[i].enqueue_end_ns = records[i].enqueue_begin_ns + 10;
    records[i].device_begin_ns = records[i].enqueue_begin_ns + 20;
    records[i].device_end_ns = records[i].device_begin_ns + durations[i];
  }
  records[3].device_begin_ns = kNoTimestamp;
  const ProfileSummary summary = summarize(records);
  EXPECT_EQ(summary.runs, 1u);
  EXPECT_EQ(summary.launches, 4u);
  EXPECT_EQ(summary.launches_without_device_time, 1u);
  EXPECT_EQ(summary.device_busy_ns, 900);
  EXPECT_EQ(summary.enqueue_ns, 40);
  EXPECT_EQ(summary.span_ns, 3000 + 10) << "to the last enqueue end (n3 has no device time)";
  ASSERT_EQ(summary.by_op.size(), 2u);
  EXPECT_EQ(summary.by_op[0].name, "MatMul");
  EXPECT_EQ(summary.by_op[0].count, 2u);
  EXPECT_EQ(summary.by_op[0].total_ns, 800);
  EXPECT_EQ(summary.by_op[0].min_ns, 300);
  EXPECT_EQ(summary.by_op[0].max_ns, 500);
  EXPECT_DOUBLE_EQ(summary.by_op[0].mean_ns(), 400.0);
  EXPECT_NEAR(summary.by_op[0].share, 800.0 / 900.0, 1e-12);
  EXPECT_EQ(summary.by_kernel[0].detail, "MatMul");
  EXPECT_EQ(summary.by_node.size(), 3u);
  EXPECT_EQ(summary.by_node[0].name, "n1");
  const std::string text = summary.to_string();
  EXPECT_NE(text.find("MatMulK"), std::string::npos) << text;
  EXPECT_NE(text.find("88.89"), std::string::npos) << text;
}

TEST_F(ProfilerTest, RecordCapDropsWholeRuns) {
  Profiler profiler("capped", ProfilerOptions{.max_records = 3});
  RunProfile run;
  run.launches.resize(2);
  run.launches[1].waits_on = {0};
  profiler.add_run(run);
  profiler.add_run(run);
  EXPECT_EQ(profiler.records().size(), 2u);
  EXPECT_EQ(profiler.dropped_runs(), 1u);
  profiler.clear();
  profiler.add_run(run);
  profiler.add_run(RunProfile{.launches = std::vector<LaunchRecord>(1)});
  const std::vector<LaunchRecord> records = profiler.records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1].waits_on, std::vector<uint64_t>{0});
  EXPECT_EQ(records[2].run, 2u);
}

TEST_F(ProfilerTest, PoolEventsTagEveryAllocationWithItsNodeOnTheProfilerClock) {
  std::unique_ptr<Executor> executor = branches();
  ASSERT_FALSE(executor->plan().memory().uses_arena);
  ASSERT_TRUE(executor->run({{"x", HostTensor::random_f32({3, 8}, rng_)}}, RunOptions{.profile = true}).ok());
  const std::vector<LaunchRecord> records = session_->profiler().records();
  const std::vector<PoolEvent> events = session_->profiler().pool_events();
  const graph::Graph& g = executor->plan().graph();
  std::map<std::string, int> balance;  // value → allocs - frees
  int64_t first_enqueue = INT64_MAX, last_time = INT64_MIN;
  for (const LaunchRecord& r : records) {
    first_enqueue = std::min(first_enqueue, r.enqueue_begin_ns);
    last_time = std::max(last_time, r.enqueue_end_ns);
  }
  size_t allocs = 0;
  for (const PoolEvent& e : events) {
    EXPECT_EQ(e.run, 1u);
    EXPECT_GT(e.bytes, 0u) << e.value;
    EXPECT_GE(e.in_use_bytes, 0);
    EXPECT_GE(e.ts_ns, first_enqueue) << "pool events are on the host clock of the launch records";
    const graph::Value& value = g.value(g.find_value(e.value).value());
    ASSERT_NE(value.producer, graph::kNoNode) << e.value;
    EXPECT_EQ(e.node_id, g.node(value.producer).stable_id) << "the same node id as the launch that produced it";
    const std::string& producer = g.node(value.producer).name;
    EXPECT_TRUE(e.tag == producer || e.tag == "output:" + e.value) << e.tag;
    if (e.kind == PoolEventKind::kAlloc) {
      ++allocs;
      EXPECT_EQ(balance[e.value]++, 0) << e.value << " allocated once";
    } else {
      EXPECT_EQ(balance[e.value]--, 1) << e.value << " freed after its allocation";
    }
  }
  EXPECT_GE(allocs, executor->plan().objects().size()) << "every launch writes at least one pool block";
  for (const auto& [value, count] : balance) EXPECT_EQ(count, 0) << value << " returned to the pool by the run's end";
  EXPECT_TRUE(std::is_sorted(events.begin(), events.end(),
                             [](const PoolEvent& a, const PoolEvent& b) { return a.ts_ns < b.ts_ns; }));
}

TEST_F(ProfilerTest, TimelineHtmlHasOneBoxPerLaunchAndNeedsNoNetwork) {
  std::unique_ptr<Executor> executor = branches();
  session_->profiler().set_enabled(true);
  for (int64_t n : {2, 5}) ASSERT_TRUE(executor->run({{"x", HostTensor::random_f32({n, 8}, rng_)}}).ok());
  const std::vector<LaunchRecord> records = session_->profiler().records();
  const std::string html = session_->profiler().timeline_html();
  const auto count = [&html](std::string_view needle) {
    size_t n = 0;
    for (size_t at = html.find(needle); at != std::string::npos; at = html.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(count("<svg"), 1u);
  EXPECT_EQ(count("</svg>"), 1u);
  EXPECT_EQ(count("<script>"), count("</script>"));
  EXPECT_EQ(count("<style>"), 1u);
  EXPECT_EQ(count("<rect class=\"launch\""), records.size()) << "one box per launch";
  EXPECT_EQ(count("</rect>"), records.size());
  EXPECT_EQ(count("<title>") - 1, records.size()) << "each box has a tooltip (plus the page title)";
  EXPECT_EQ(count("id=\"pool-bytes\""), 1u) << "the pool line";
  // Self-contained: nothing is fetched (the SVG namespace URI is a name, not a request).
  EXPECT_EQ(count("src="), 0u);
  EXPECT_EQ(count("<link"), 0u);
  EXPECT_EQ(count("https://"), 0u);
  EXPECT_EQ(count("url("), 0u);
  EXPECT_EQ(count("@import"), 0u);
  std::set<std::string> streams;
  for (const LaunchRecord& r : records) {
    streams.insert(r.stream);
    EXPECT_NE(html.find(fmt::format("data-node=\"{}\" data-node-id=\"{}\"", r.node_name, r.node_id)), std::string::npos)
        << r.node_name;
  }
  EXPECT_EQ(streams.size(), 2u);
  for (const std::string& stream : streams) EXPECT_EQ(count(">stream " + stream + "</text>"), 1u) << "one lane";
  // The args a hover shows: node, op, kernel, fusion group, inputs, tiling.
  for (const char* key : {"op: MatMul", "kernel: ", "fusion: ", "inputs: f32[2, 8]", "tiling: "}) {
    EXPECT_NE(html.find(key), std::string::npos) << key;
  }
  // Text from records is escaped: a node name with markup stays text.
  LaunchRecord odd = records.front();
  odd.node_name = "<b>&\"x\"";
  const std::string escaped = timeline_html(TraceData{std::span<const LaunchRecord>(&odd, 1), {}, {}});
  EXPECT_EQ(escaped.find("<b>"), std::string::npos);
  EXPECT_NE(escaped.find("&lt;b&gt;&amp;&quot;x&quot;"), std::string::npos);
}

}  // namespace
}  // namespace hxrt::runtime
