#include "differential/random_graph.h"

#include "differential/generator_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "hxrt/base/float16.h"

namespace hxrt::differential {
namespace {

using namespace generator;  // NOLINT(google-build-using-namespace): the generator's own vocabulary

class Generator {
 public:
  Generator(uint64_t seed, const GeneratorOptions& options) : rng_(seed) {
    out_.seed = seed;
    out_.graph = graph::Graph(fmt::format("random_{}", seed));
    target_nodes_ = uniform(options.min_nodes, options.max_nodes);
  }

  RandomGraph generate() {
    choose_symbols();
    add_activation_input(/*join=*/false);
    if (chance(0.3)) add_activation_input(/*join=*/false);
    using Action = bool (Generator::*)();
    struct Weighted {
      Action action;
      int weight;
    };
    static const Weighted kActions[] = {
        {&Generator::unary, 12},    {&Generator::binary_weight, 10}, {&Generator::binary_pair, 8},
        {&Generator::softmax, 4},   {&Generator::layer_norm, 4},     {&Generator::rms_norm, 5},
        {&Generator::swiglu, 4},    {&Generator::matmul_weight, 8},  {&Generator::matmul_pair, 3},
        {&Generator::gemm, 3},      {&Generator::matmul_q, 4},       {&Generator::reshape, 4},
        {&Generator::transpose, 4}, {&Generator::concat, 3},         {&Generator::slice, 4},
        {&Generator::gather, 3},    {&Generator::embedding, 2},      {&Generator::rope, 3},
        {&Generator::cast, 3},      {&Generator::conv, 4},           {&Generator::batch_norm, 2},
        {&Generator::new_input, 1},
    };
    int total = 0;
    for (const Weighted& w : kActions) total += w.weight;
    for (int attempts = 0; nodes_ < target_nodes_ && attempts < 2000; ++attempts) {
      int r = uniform(0, total - 1);
      for (const Weighted& w : kActions) {
        if (r < w.weight) {
          (this->*w.action)();
          break;
        }
        r -= w.weight;
      }
    }
    mark_outputs();
    return std::move(out_);
  }

 private:
  // ---- randomness ----
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double uniform_real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  T one_of(std::initializer_list<T> options) {
    return *(options.begin() + uniform(0, static_cast<int>(options.size()) - 1));
  }
  // A value with magnitude in [lo, hi) and a random sign: never zero.
  float signed_value(double lo, double hi) {
    return static_cast<float>((chance(0.5) ? 1.0 : -1.0) * uniform_real(lo, hi));
  }

  std::string fresh(const std::string& prefix) { return fmt::format("{}{}", prefix, next_id_++); }

  // ---- graph building ----
  std::string add_f32_weight(const std::vector<int64_t>& dims, double lo, double hi, bool positive = false) {
    std::vector<float> values(static_cast<size_t>(count(dims)));
    for (float& v : values) v = positive ? static_cast<float>(uniform_real(lo, hi)) : signed_value(lo, hi);
    return add_initializer("w", DType::kF32, dims, bytes_of(values));
  }
  std::string add_int_weight(DType dtype, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
    if (dtype == DType::kI32)
      return add_initializer("c", dtype, dims, bytes_of(std::vector<int32_t>(values.begin(), values.end())));
    return add_initializer("c", DType::kI64, dims, bytes_of(values));
  }
  std::string add_initializer(const std::string& prefix, DType dtype, const std::vector<int64_t>& dims,
                              std::vector<std::byte> bytes) {
    const std::string name = fresh(prefix);
    check(out_.graph.add_initializer(name, {dtype, graph::SymShape(sym(dims))}, graph::WeightData::copy_of(bytes))
              .status(),
          name);
    return name;
  }
  std::string add_input(const std::string& prefix, DType dtype, const SymDims& dims, InputSpec::Kind kind, double lo,
                        double hi) {
    const std::string name = fresh(prefix);
    graph::TensorDesc desc{dtype, graph::SymShape(dims)};
    check(out_.graph.add_input(name, desc).status(), name);
    out_.inputs.push_back({name, desc, kind, lo, hi});
    return name;
  }
  // Adds a node with one output and returns the output's name.
  std::string add_node(const std::string& op, const std::vector<std::string>& inputs, graph::AttributeMap attrs = {}) {
    const OpInfo info = op_info(op);
    const std::string out = fresh("v");
    const std::vector<std::string> outputs = {out};
    check(out_.graph.add_node(fresh("n"), op, inputs, outputs, std::move(attrs), info.domain, info.version).status(),
          op);
    ++nodes_;
    // Inherits the loosest tolerance of its inputs; push() may override it (a quantized MatMulQ).
    double tolerance = kF32Tolerance;
    for (const std::string& in : inputs) {
      auto found = out_.tolerance.find(in);
      if (found != out_.tolerance.end()) tolerance = std::max(tolerance, found->second);
    }
    out_.tolerance[out] = tolerance;
    return out;
  }
  static void check(const Status& status, const std::string& what) {
    if (!status.ok()) {
      std::fprintf(stderr, "random_graph: building %s failed: %s\n", what.c_str(), status.to_string().c_str());
      std::abort();
    }
  }

  // Records an f32 node output as a new operand.
  Val& push(const std::string& name, SymDims dims, double magnitude, double tolerance) {
    pool_.push_back({name, std::move(dims), magnitude, tolerance});
    out_.tolerance[name] = tolerance;
    return pool_.back();
  }

  // Picks an operand satisfying `ok`, preferring the newest (deep chains) but often an older one (branches).
  // Values whose magnitude grew too far are squashed by a Tanh first. Returns a copy (the pool may grow).
  std::optional<Val> pick(const std::function<bool(const Val&)>& ok) {
    std::vector<size_t> candidates;
    for (size_t i = 0; i < pool_.size(); ++i) {
      if (ok(pool_[i])) candidates.push_back(i);
    }
    if (candidates.empty()) return std::nullopt;
    const size_t chosen = chance(0.45)
                              ? candidates.back()
                              : candidates[static_cast<size_t>(uniform(0, static_cast<int>(candidates.size()) - 1))];
    Val v = pool_[chosen];
    if (v.magnitude > kMagnitudeBound) {
      const std::string squashed = add_node("Tanh", {v.name});
      v = push(squashed, v.dims, 1.0, v.tolerance);
    }
    return v;
  }
  std::optional<Val> pick_any() {
    return pick([](const Val&) { return true; });
  }

  // ---- symbols and inputs ----
  void choose_symbols() {
    batch_ = chance(0.65) ? Dim::symbol("batch") : Dim(uniform(1, 3));
    seq_ = chance(0.3) ? Dim::symbol("seq") : Dim(uniform(1, 5));
    std::vector<int64_t> batches = {1, 2, 3, 4, 5, 6};
    std::shuffle(batches.begin(), batches.end(), rng_);
    const int runs = uniform(2, 3);
    for (int i = 0; i < runs; ++i) {
      graph::SymbolBindings b;
      if (!batch_.is_static()) b["batch"] = batches[static_cast<size_t>(i)];
      if (!seq_.is_static()) b["seq"] = uniform(1, 6);
      out_.bindings.push_back(b);
    }
  }

  SymDims activation_dims() {
    const int64_t d = one_of<int64_t>({8, 16, 32, 64});
    return chance(0.5) ? SymDims{batch_, d} : SymDims{batch_, seq_, d};
  }

  void add_activation_input(bool join) {
    SymDims dims = activation_dims();
    std::optional<Val> partner;
    if (join) {
      partner = pick([](const Val& v) {
        return std::all_of(v.dims.begin(), v.dims.end(),
                           [](const Dim& d) { return d.is_static() || is_plain_symbol(d); });
      });
      if (partner) dims = partner->dims;
    }
    const std::string name = add_input("x", DType::kF32, dims, InputSpec::Kind::kFloat, -1.0, 1.0);
    Val& v = push(name, dims, 1.0, kF32Tolerance);
    v.is_input = true;
    float_inputs_.push_back(name);
    if (partner) {
      const std::string op = one_of<const char*>({"Add", "Mul", "Sub"});
      const std::string joined = add_node(op, {name, partner->name});
      push(joined, dims, partner->magnitude + 1.0, partner->tolerance);
    }
  }

  bool new_input() {
    add_activation_input(/*join=*/true);
    return true;
  }

  // ---- actions: each adds one or more nodes, or returns false when no operand fits ----
  bool unary() {
    std::optional<Val> a = pick_any();
    if (!a) return false;
    const int kind = uniform(0, 5);
    graph::AttributeMap attrs;
    static const char* const kOps[] = {"Relu", "Gelu", "Gelu", "Sigmoid", "Tanh", "Silu"};
    if (kind == 1) attrs.set("approximate", "tanh");
    if (kind == 2 && chance(0.5)) attrs.set("approximate", "none");
    const std::string y = add_node(kOps[kind], {a->name}, std::move(attrs));
    push(y, a->dims, kind == 3 || kind == 4 ? 1.0 : a->magnitude, a->tolerance);
    return true;
  }

  // A weight shape that broadcasts against `dims`: a suffix with some dims set to 1 (symbolic dims always 1).
  std::vector<int64_t> broadcast_weight_dims(const SymDims& dims) {
    const int keep = uniform(0, static_cast<int>(dims.size()));
    std::vector<int64_t> w;
    for (size_t i = dims.size() - static_cast<size_t>(keep); i < dims.size(); ++i) {
      w.push_back(!dims[i].is_static() || chance(0.25) ? 1 : dims[i].value());
    }
    if (static_cast<int>(dims.size()) < kMaxRank && chance(0.08)) w.insert(w.begin(), 1);  // rank grows
    return w;
  }

  bool binary_weight() {
    std::optional<Val> a = pick_any();
    if (!a) return false;
    const std::string op = one_of<const char*>({"Add", "Sub", "Mul", "Div"});
    const std::vector<int64_t> wdims = broadcast_weight_dims(a->dims);
    const std::string w = op == "Div" ? add_f32_weight(wdims, 0.5, 1.5) : add_f32_weight(wdims, 0.1, 1.0);
    const bool weight_first = op != "Div" && chance(0.4);
    const std::string y =
        add_node(op, weight_first ? std::vector<std::string>{w, a->name} : std::vector<std::string>{a->name, w});
    const double magnitude = op == "Add" || op == "Sub" ? a->magnitude + 1.0
                             : op == "Div"              ? 2.0 * a->magnitude
                                                        : a->magnitude;
    push(y, *broadcast(a->dims, sym(wdims)), magnitude, a->tolerance);
    return true;
  }

  bool binary_pair() {
    std::optional<Val> a = pick_any();
    if (!a) return false;
    const std::string a_name = a->name;
    const SymDims a_dims = a->dims;
    std::optional<Val> b = pick([&](const Val& v) {
      if (v.name == a_name) return false;
      std::optional<SymDims> out = broadcast(a_dims, v.dims);
      return out.has_value() && fits(*out);
    });
    if (!b) return false;
    const std::string op = one_of<const char*>({"Add", "Sub", "Mul"});
    const bool swap = chance(0.5);
    const std::string y =
        add_node(op, swap ? std::vector<std::string>{b->name, a->name} : std::vector<std::string>{a->name, b->name});
    const double magnitude = op == "Mul" ? a->magnitude * b->magnitude : a->magnitude + b->magnitude;
    push(y, *broadcast(a->dims, b->dims), magnitude, std::max(a->tolerance, b->tolerance));
    return true;
  }

  bool softmax() {
    std::optional<Val> a = pick([](const Val& v) { return !v.dims.empty(); });
    if (!a) return false;
    const int rank = static_cast<int>(a->dims.size());
    graph::AttributeMap attrs;
    if (chance(0.7)) attrs.set("axis", int64_t{uniform(-rank, rank - 1)});
    push(add_node("Softmax", {a->name}, std::move(attrs)), a->dims, 1.0, a->tolerance);
    return true;
  }

  bool layer_norm() {
    std::optional<Val> a = pick([](const Val& v) { return !v.dims.empty() && v.dims.back().is_static(); });
    if (!a) return false;
    const int rank = static_cast<int>(a->dims.size());
    std::vector<int> axes;
    for (int axis = 0; axis < rank; ++axis) {
      if (all_static(a->dims, static_cast<size_t>(axis))) axes.push_back(axis);
    }
    const int axis = axes[static_cast<size_t>(uniform(0, static_cast<int>(axes.size()) - 1))];
    const std::vector<int64_t> norm_dims = static_dims(SymDims(a->dims.begin() + axis, a->dims.end()));
    std::vector<std::string> inputs = {a->name, add_f32_weight(norm_dims, 0.5, 1.5)};
    if (chance(0.5)) inputs.push_back(add_f32_weight(norm_dims, 0.1, 1.0));
    graph::AttributeMap attrs;
    if (axis != rank - 1 || chance(0.5)) attrs.set("axis", int64_t{chance(0.5) ? axis : axis - rank});
    if (chance(0.5)) attrs.set("epsilon", one_of<double>({1e-5, 1e-3}));
    push(add_node("LayerNormalization", inputs, std::move(attrs)), a->dims, 4.0, normalised_tolerance(a->tolerance));
    return true;
  }

  bool rms_norm() {
    std::optional<Val> a = pick([](const Val& v) { return !v.dims.empty() && v.dims.back().is_static(); });
    if (!a) return false;
    graph::AttributeMap attrs;
    if (chance(0.5)) attrs.set("epsilon", one_of<double>({1e-5, 1e-6}));
    std::string y = add_node("RMSNorm", {a->name}, std::move(attrs));
    out_.tolerance[y] = normalised_tolerance(a->tolerance);
    if (chance(0.65)) {  // the RMSNorm+Mul fusion pattern
      const int64_t d = a->dims.back().value();
      const std::vector<int64_t> wdims =
          a->dims.size() >= 2 && chance(0.3) ? std::vector<int64_t>{1, d} : std::vector<int64_t>{d};
      const std::string w = add_f32_weight(wdims, 0.5, 1.5);
      y = add_node("Mul", chance(0.7) ? std::vector<std::string>{y, w} : std::vector<std::string>{w, y});
    } else {
      push(y, a->dims, 4.0, normalised_tolerance(a->tolerance));
      return true;
    }
    push(y, a->dims, 6.0, normalised_tolerance(a->tolerance));
    return true;
  }

  bool swiglu() {
    std::optional<Val> gate = pick_any();
    if (!gate) return false;
    const std::string gate_name = gate->name;
    const SymDims dims = gate->dims;
    std::optional<Val> up = pick([&](const Val& v) { return v.name != gate_name && v.dims == dims; });
    if (!up) {
      const std::string u = add_node(one_of<const char*>({"Tanh", "Sigmoid"}), {gate->name});
      up = push(u, dims, 1.0, gate->tolerance);
    }
    const std::string s = add_node("Silu", {gate->name});
    const std::string y =
        add_node("Mul", chance(0.7) ? std::vector<std::string>{s, up->name} : std::vector<std::string>{up->name, s});
    push(y, dims, gate->magnitude * up->magnitude, std::max(gate->tolerance, up->tolerance));
    return true;
  }

  bool matmul_weight() {
    std::optional<Val> a = pick([](const Val& v) { return !v.dims.empty() && v.dims.back().is_static(); });
    if (!a) return false;
    const int64_t k = a->dims.back().value();
    const int64_t n = one_of<int64_t>({4, 8, 16, 24, 32, 64});
    const double scale = 1.0 / std::sqrt(static_cast<double>(k));
    SymDims dims = a->dims;
    const int shape_kind = uniform(0, 9);
    std::string y;
    if (shape_kind == 0 && a->dims.size() >= 2) {  // rank-1 B: the last dim disappears
      y = add_node("MatMul", {a->name, add_f32_weight({k}, 0.1 * scale, scale)});
      dims.pop_back();
      push(y, dims, a->magnitude, a->tolerance);
      return true;
    }
    std::vector<int64_t> wdims = {k, n};
    if (shape_kind == 1 && a->dims.size() >= 3 && a->dims[a->dims.size() - 3].is_static()) {  // batched weights
      wdims.insert(wdims.begin(), chance(0.5) ? 1 : a->dims[a->dims.size() - 3].value());
    }
    if (a->dims.size() == 1) {  // rank-1 A: [K] x [K, N] = [N]
      dims = {Dim(n)};
    } else {
      dims.back() = n;
    }
    if (!fits(dims)) return false;
    y = add_node("MatMul", {a->name, add_f32_weight(wdims, 0.1 * scale, scale)});
    double magnitude = a->magnitude;
    if (wdims.size() == 2 && dims.size() >= 2 && chance(0.6)) {  // the MatMul+Add(+Gelu) fusion pattern
      const int bias_kind = uniform(0, 9);
      std::vector<int64_t> bdims = bias_kind < 6 ? std::vector<int64_t>{n} : std::vector<int64_t>{1, n};
      if (bias_kind == 9 && dims[dims.size() - 2].is_static())
        bdims = {dims[dims.size() - 2].value(), n};  // not a bias
      const std::string b = add_f32_weight(bdims, 0.1, 1.0);
      y = add_node("Add", chance(0.7) ? std::vector<std::string>{y, b} : std::vector<std::string>{b, y});
      dims = *broadcast(dims, sym(bdims));
      magnitude += 1.0;
      if (chance(0.6)) {
        graph::AttributeMap attrs;
        if (chance(0.4)) attrs.set("approximate", one_of<const char*>({"none", "tanh"}));
        y = add_node("Gelu", {y}, std::move(attrs));
      }
    }
    push(y, dims, magnitude, a->tolerance);
    return true;
  }

  bool matmul_pair() {
    std::optional<Val> a = pick([](const Val& v) { return v.dims.size() >= 2 && v.dims.back().is_static(); });
    if (!a) return false;
    const std::string a_name = a->name;
    const SymDims a_dims = a->dims;
    const size_t r = a_dims.size();
    // c: [..., N, K] with A's batch dims; c may be A itself (A·Aᵀ).
    std::optional<Val> c = pick([&](const Val& v) {
      if (v.dims.size() != r || !(v.dims.back() == a_dims.back())) return false;
      SymDims out(a_dims.begin(), a_dims.end() - 1);
      out.push_back(v.dims[r - 2]);
      return std::equal(a_dims.begin(), a_dims.end() - 2, v.dims.begin()) && fits(out);
    });
    if (!c) return false;
    std::vector<int64_t> perm(r);
    for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(i);
    std::swap(perm[r - 1], perm[r - 2]);
    graph::AttributeMap attrs;
    attrs.set("perm", perm);
    const std::string ct = add_node("Transpose", {c->name}, std::move(attrs));
    std::string y = add_node("MatMul", {a->name, ct});
    const double k = static_cast<double>(a_dims.back().value());
    y = add_node("Mul", {y, add_f32_weight(chance(0.5) ? std::vector<int64_t>{} : std::vector<int64_t>{1},
                                           1.0 / std::sqrt(k), 1.0 / std::sqrt(k) + 1e-3, /*positive=*/true)});
    SymDims dims(a_dims.begin(), a_dims.end() - 1);
    dims.push_back(c->dims[r - 2]);
    push(y, dims, a->magnitude * c->magnitude, std::max(a->tolerance, c->tolerance));
    return true;
  }

  bool gemm() {
    std::optional<Val> a = pick([](const Val& v) { return v.dims.size() == 2 && v.dims[1].is_static(); });
    if (!a) return false;
    const bool trans_a = all_static(a->dims) && chance(0.3);
    const Dim m = trans_a ? a->dims[1] : a->dims[0];
    const int64_t k = trans_a ? a->dims[0].value() : a->dims[1].value();
    const int64_t n = one_of<int64_t>({4, 8, 16, 32});
    const bool trans_b = chance(0.5);
    const double scale = 1.0 / std::sqrt(static_cast<double>(k));
    std::vector<std::string> inputs = {
        a->name, add_f32_weight(trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 0.1 * scale, scale)};
    graph::AttributeMap attrs;
    if (trans_a) attrs.set("transA", int64_t{1});
    if (trans_b || chance(0.2)) attrs.set("transB", int64_t{trans_b ? 1 : 0});
    if (chance(0.5)) attrs.set("alpha", uniform_real(0.5, 1.5));
    const int c_kind = uniform(0, 4);
    if (c_kind > 0) {
      std::vector<int64_t> cdims = c_kind == 1   ? std::vector<int64_t>{n}
                                   : c_kind == 2 ? std::vector<int64_t>{1, n}
                                                 : std::vector<int64_t>{};
      if (c_kind == 4 && m.is_static()) cdims = {m.value(), n};
      inputs.push_back(add_f32_weight(cdims, 0.1, 1.0));
      if (chance(0.5)) attrs.set("beta", uniform_real(0.5, 1.5));
    }
    push(add_node("Gemm", inputs, std::move(attrs)), {m, n}, 1.5 * a->magnitude + 1.5, a->tolerance);
    return true;
  }

  bool matmul_q() {
    std::optional<Val> a = pick(
        [](const Val& v) { return !v.dims.empty() && v.dims.back().is_static() && v.dims.back().value() % 32 == 0; });
    if (!a) return false;
    const int64_t k = a->dims.back().value();
    const int64_t n = one_of<int64_t>({8, 16, 32, 48});
    const DType wtype = one_of<DType>({DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kF16, DType::kF32});
    const double scale = 1.0 / std::sqrt(static_cast<double>(k));
    std::vector<std::byte> bytes;
    auto put_u16 = [&](uint16_t v) {
      bytes.push_back(static_cast<std::byte>(v & 0xFF));
      bytes.push_back(static_cast<std::byte>(v >> 8));
    };
    const int64_t blocks = n * k / 32;
    for (int64_t b = 0; b < blocks; ++b) {
      switch (wtype) {
        case DType::kQ8_0:
          put_u16(f32_to_f16(static_cast<float>(uniform_real(0.5, 1.0) * scale / 127.0)));
          for (int i = 0; i < 32; ++i)
            bytes.push_back(static_cast<std::byte>(static_cast<uint8_t>(static_cast<int8_t>(uniform(-127, 127)))));
          break;
        case DType::kQ4_0:
          put_u16(f32_to_f16(static_cast<float>(uniform_real(0.5, 1.0) * scale / 8.0)));
          for (int i = 0; i < 16; ++i) bytes.push_back(static_cast<std::byte>(uniform(0, 255)));
          break;
        case DType::kQ4_1:
          put_u16(f32_to_f16(static_cast<float>(uniform_real(0.5, 1.0) * scale / 8.0)));
          put_u16(f32_to_f16(static_cast<float>(-uniform_real(0.5, 1.0) * scale)));
          for (int i = 0; i < 16; ++i) bytes.push_back(static_cast<std::byte>(uniform(0, 255)));
          break;
        default:
          for (int i = 0; i < 32; ++i) {
            const float v = signed_value(0.1 * scale, scale);
            if (wtype == DType::kF16) {
              put_u16(f32_to_f16(v));
            } else {
              uint32_t u;
              std::memcpy(&u, &v, sizeof u);
              put_u16(static_cast<uint16_t>(u & 0xFFFF));
              put_u16(static_cast<uint16_t>(u >> 16));
            }
          }
          break;
      }
    }
    std::vector<std::string> inputs = {a->name, add_initializer("q", wtype, {n, k}, std::move(bytes))};
    if (chance(0.5)) inputs.push_back(add_f32_weight({n}, 0.1, 1.0));
    SymDims dims = a->dims;
    dims.back() = n;
    const bool quantized = dtype_info(wtype).is_quantized;
    push(add_node("MatMulQ", inputs), dims, a->magnitude + 1.0, quantized ? kQuantizedTolerance : a->tolerance);
    return true;
  }

  std::string shape_constant(const std::vector<int64_t>& shape) {
    return add_int_weight(DType::kI64, {static_cast<int64_t>(shape.size())}, shape);
  }

  bool reshape() {
    std::optional<Val> a = pick([](const Val& v) { return !v.dims.empty(); });
    if (!a) return false;
    const SymDims& d = a->dims;
    const size_t r = d.size();
    std::vector<int64_t> shape(r - 1, 0);  // 0 copies the input dim
    SymDims dims(d.begin(), d.end() - 1);
    const int kind = uniform(0, 2);
    if (kind == 0 && d.back().is_static() && r < kMaxRank) {  // split the last dim
      const int64_t last = d.back().value();
      std::vector<int64_t> factors;
      for (int64_t f = 2; f < last; ++f) {
        if (last % f == 0) factors.push_back(f);
      }
      if (factors.empty()) return false;
      const int64_t f = factors[static_cast<size_t>(uniform(0, static_cast<int>(factors.size()) - 1))];
      shape.push_back(chance(0.5) ? -1 : last / f);
      shape.push_back(f);
      dims.push_back(Dim(last / f));
      dims.push_back(Dim(f));
    } else if (kind == 1 && r >= 2 && d[r - 1].is_static() && d[r - 2].is_static()) {  // merge the last two
      shape.pop_back();
      shape.push_back(chance(0.5) ? -1 : d[r - 1].value() * d[r - 2].value());
      dims.pop_back();
      dims.push_back(Dim(d[r - 1].value() * d[r - 2].value()));
    } else if (all_static(d) && r >= 1) {  // a random static reshape with one -1
      int64_t rest = guess_elements(d);
      std::vector<int64_t> out;
      while (rest > 1 && out.size() < 3 && chance(0.7)) {
        std::vector<int64_t> divisors;
        for (int64_t f = 2; f <= rest; ++f) {
          if (rest % f == 0) divisors.push_back(f);
        }
        const int64_t f = divisors[static_cast<size_t>(uniform(0, static_cast<int>(divisors.size()) - 1))];
        out.push_back(f);
        rest /= f;
      }
      out.push_back(rest);
      std::shuffle(out.begin(), out.end(), rng_);
      shape = out;
      shape[static_cast<size_t>(uniform(0, static_cast<int>(out.size()) - 1))] = -1;
      dims = sym(out);
    } else {
      return false;
    }
    push(add_node("Reshape", {a->name, shape_constant(shape)}), dims, a->magnitude, a->tolerance);
    return true;
  }

  bool transpose() {
    std::optional<Val> a = pick([](const Val& v) { return v.dims.size() >= 2; });
    if (!a) return false;
    const size_t r = a->dims.size();
    std::vector<int64_t> perm(r);
    for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(i);
    graph::AttributeMap attrs;
    if (chance(0.15)) {
      std::reverse(perm.begin(), perm.end());
    } else {
      std::shuffle(perm.begin(), perm.end(), rng_);
      attrs.set("perm", perm);
    }
    SymDims dims(r);
    for (size_t i = 0; i < r; ++i) dims[i] = a->dims[static_cast<size_t>(perm[i])];
    push(add_node("Transpose", {a->name}, std::move(attrs)), dims, a->magnitude, a->tolerance);
    return true;
  }

  bool concat() {
    std::optional<Val> a = pick([](const Val& v) { return !v.dims.empty(); });
    if (!a) return false;
    const int rank = static_cast<int>(a->dims.size());
    const int axis = uniform(0, rank - 1);
    std::vector<Val> parts = {*a};
    const int extra = uniform(1, 2);
    for (int i = 0; i < extra; ++i) {
      const SymDims first = a->dims;
      std::optional<Val> p = pick([&](const Val& v) {
        if (static_cast<int>(v.dims.size()) != rank) return false;
        for (int k = 0; k < rank; ++k) {
          if (k != axis && !(v.dims[static_cast<size_t>(k)] == first[static_cast<size_t>(k)])) return false;
        }
        return true;
      });
      if (!p) break;
      parts.push_back(*p);
    }
    if (parts.size() == 1) parts.push_back(*a);  // concatenate with itself
    SymDims dims = a->dims;
    dims[static_cast<size_t>(axis)] = Dim(0);
    std::vector<std::string> inputs;
    double magnitude = 0.0, tolerance = 0.0;
    for (const Val& p : parts) {
      dims[static_cast<size_t>(axis)] = dims[static_cast<size_t>(axis)] + p.dims[static_cast<size_t>(axis)];
      inputs.push_back(p.name);
      magnitude = std::max(magnitude, p.magnitude);
      tolerance = std::max(tolerance, p.tolerance);
    }
    if (!fits(dims)) return false;
    graph::AttributeMap attrs;
    attrs.set("axis", int64_t{chance(0.5) ? axis : axis - rank});
    push(add_node("Concat", inputs, std::move(attrs)), dims, magnitude, tolerance);
    return true;
  }

  bool slice() {
    std::optional<Val> a = pick([](const Val& v) {
      return std::any_of(v.dims.begin(), v.dims.end(), [](const Dim& d) { return d.is_static() && d.value() >= 2; });
    });
    if (!a) return false;
    const int rank = static_cast<int>(a->dims.size());
    std::vector<int> candidates;
    for (int i = 0; i < rank; ++i) {
      if (a->dims[static_cast<size_t>(i)].is_static() && a->dims[static_cast<size_t>(i)].value() >= 2)
        candidates.push_back(i);
    }
    std::shuffle(candidates.begin(), candidates.end(), rng_);
    candidates.resize(std::min<size_t>(candidates.size(), static_cast<size_t>(uniform(1, 2))));
    std::vector<int64_t> starts, ends, axes, steps;
    SymDims dims = a->dims;
    for (int axis : candidates) {
      const int64_t n = a->dims[static_cast<size_t>(axis)].value();
      for (int attempt = 0;; ++attempt) {
        const int64_t step = one_of<int64_t>({1, 1, 1, 2, -1, -2});
        int64_t start = uniform(0, static_cast<int>(n) - 1), end = uniform(0, static_cast<int>(n));
        if (step < 0) std::swap(start, end);
        if (chance(0.3)) start -= n;  // negative forms
        if (chance(0.3)) end -= n;
        if (chance(0.15))
          end = step > 0 ? one_of<int64_t>({1000, std::numeric_limits<int64_t>::max()})
                         : one_of<int64_t>({-1000, std::numeric_limits<int64_t>::min()});
        const int64_t len = slice_length(n, start, end, step);
        if (len >= 1 || attempt > 20) {
          if (len < 1) return false;
          starts.push_back(start);
          ends.push_back(end);
          axes.push_back(chance(0.3) ? axis - rank : axis);
          steps.push_back(step);
          dims[static_cast<size_t>(axis)] = Dim(len);
          break;
        }
      }
    }
    std::vector<std::string> inputs = {a->name, shape_constant(starts), shape_constant(ends), shape_constant(axes)};
    const bool unit_steps = std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
    if (!unit_steps || chance(0.5)) inputs.push_back(shape_constant(steps));
    push(add_node("Slice", inputs), dims, a->magnitude, a->tolerance);
    return true;
  }

  bool gather() {
    std::optional<Val> a = pick([](const Val& v) {
      return std::any_of(v.dims.begin(), v.dims.end(), [](const Dim& d) { return d.is_static() && d.value() >= 1; });
    });
    if (!a) return false;
    const int rank = static_cast<int>(a->dims.size());
    std::vector<int> axes;
    for (int i = 0; i < rank; ++i) {
      if (a->dims[static_cast<size_t>(i)].is_static()) axes.push_back(i);
    }
    const int axis = axes[static_cast<size_t>(uniform(0, static_cast<int>(axes.size()) - 1))];
    const int64_t n = a->dims[static_cast<size_t>(axis)].value();
    const int index_rank = uniform(0, 2);
    std::vector<int64_t> idims;
    for (int i = 0; i < index_rank; ++i) idims.push_back(uniform(1, 4));
    SymDims dims(a->dims.begin(), a->dims.begin() + axis);
    for (int64_t d : idims) dims.push_back(Dim(d));
    dims.insert(dims.end(), a->dims.begin() + axis + 1, a->dims.end());
    if (!fits(dims)) return false;
    const DType itype = chance(0.5) ? DType::kI64 : DType::kI32;
    std::string indices;
    if (chance(0.3)) {
      indices = add_input("idx", itype, sym(idims), InputSpec::Kind::kInteger, static_cast<double>(-n),
                          static_cast<double>(n));
    } else {
      std::vector<int64_t> values(static_cast<size_t>(count(idims)));
      for (int64_t& v : values) v = uniform(static_cast<int>(-n), static_cast<int>(n) - 1);
      indices = add_int_weight(itype, idims, values);
    }
    graph::AttributeMap attrs;
    if (axis != 0 || chance(0.5)) attrs.set("axis", int64_t{chance(0.7) ? axis : axis - rank});
    push(add_node("Gather", {a->name, indices}, std::move(attrs)), dims, a->magnitude, a->tolerance);
    return true;
  }

  bool embedding() {
    const int64_t vocab = uniform(5, 20), d = one_of<int64_t>({8, 16, 32});
    const SymDims idims = chance(0.5) ? SymDims{batch_} : SymDims{batch_, seq_};
    const std::string tokens =
        add_input("tok", chance(0.5) ? DType::kI64 : DType::kI32, idims, InputSpec::Kind::kInteger,
                  static_cast<double>(-vocab), static_cast<double>(vocab));
    const std::string table = add_f32_weight({vocab, d}, 0.1, 1.0);
    SymDims dims = idims;
    dims.push_back(Dim(d));
    push(add_node("Gather", {table, tokens}), dims, 1.0, kF32Tolerance);
    return true;
  }

  bool rope() {
    std::optional<Val> a = pick([](const Val& v) {
      const size_t r = v.dims.size();
      return r >= 2 && r < kMaxRank && v.dims.back().is_static() && v.dims.back().value() % 2 == 0 &&
             (v.dims[r - 2].is_static() || is_plain_symbol(v.dims[r - 2]));
    });
    if (!a) return false;
    const size_t r = a->dims.size();
    const int64_t d = a->dims.back().value();
    std::vector<int64_t> head_dims;
    for (int64_t hd = 2; hd <= d; hd += 2) {
      if (d % hd == 0) head_dims.push_back(hd);
    }
    const int64_t head_dim = head_dims[static_cast<size_t>(uniform(0, static_cast<int>(head_dims.size()) - 1))];
    std::vector<int64_t> shape(r - 1, 0);
    shape.push_back(d / head_dim);
    shape.push_back(head_dim);
    const std::string x = add_node("Reshape", {a->name, shape_constant(shape)});
    const Dim tokens = a->dims[r - 2];
    const std::string key = tokens.to_string();
    if (positions_.count(key) == 0) {
      positions_[key] =
          add_input("pos", chance(0.5) ? DType::kI64 : DType::kI32, {tokens}, InputSpec::Kind::kInteger, 0.0, 64.0);
    }
    graph::AttributeMap attrs;
    if (chance(0.5)) attrs.set("theta", one_of<double>({10000.0, 500000.0, 100.0}));
    if (chance(0.4)) attrs.set("rotary_dims", int64_t{2 * uniform(1, static_cast<int>(head_dim / 2))});
    if (chance(0.5)) attrs.set("mode", one_of<const char*>({"normal", "neox"}));
    std::string y = add_node("RoPE", {x, positions_[key]}, std::move(attrs));
    SymDims dims = a->dims;
    if (chance(0.5)) {
      std::vector<int64_t> back(r - 1, 0);
      back.push_back(-1);
      y = add_node("Reshape", {y, shape_constant(back)});
    } else {
      dims.back() = Dim(d / head_dim);
      dims.push_back(Dim(head_dim));
    }
    push(y, dims, a->magnitude, a->tolerance);
    return true;
  }

  bool cast() {
    const int kind = uniform(0, 3);
    if (kind <= 1 && !float_inputs_.empty()) {  // f32 → f16/bf16 → f32 on an exact input
      const std::string source =
          float_inputs_[static_cast<size_t>(uniform(0, static_cast<int>(float_inputs_.size()) - 1))];
      Val v;
      for (const Val& p : pool_) {
        if (p.name == source) v = p;
      }
      graph::AttributeMap to_half;
      to_half.set("to", int64_t{kind == 0 ? 10 : 16});
      const std::string half = add_node("Cast", {source}, std::move(to_half));
      graph::AttributeMap to_float;
      to_float.set("to", int64_t{1});
      push(add_node("Cast", {half}, std::move(to_float)), v.dims, 1.0, kF32Tolerance);
      return true;
    }
    // A float input with integral range → integer type → back to f32, scaled down.
    const int64_t to = one_of<int64_t>({6, 7, 3, 2, 9, 1});
    const double lo = to == 2 ? 0.5 : -100.0, hi = to == 2 ? 200.0 : 100.0;
    const SymDims dims = activation_dims();
    const std::string source = add_input("xi", DType::kF32, dims, InputSpec::Kind::kFloat, lo, hi);
    graph::AttributeMap to_int;
    to_int.set("to", to);
    std::string y = add_node("Cast", {source}, std::move(to_int));
    if (to != 1) {
      graph::AttributeMap to_float;
      to_float.set("to", int64_t{1});
      y = add_node("Cast", {y}, std::move(to_float));
    }
    y = add_node("Mul", {y, add_f32_weight({}, 0.01, 0.011, /*positive=*/true)});
    push(y, dims, 2.0, kF32Tolerance);
    return true;
  }

  bool conv() {
    auto is_image = [](const Val& v) {
      return v.dims.size() == 4 && all_static(v.dims, 1) && v.dims[1].value() <= 8 && v.dims[2].value() <= 12 &&
             v.dims[3].value() <= 12;
    };
    std::optional<Val> x = chance(0.6) ? pick(is_image) : std::nullopt;
    if (!x) {
      const SymDims dims = {batch_, Dim(uniform(1, 4)), Dim(uniform(4, 9)), Dim(uniform(4, 9))};
      const std::string name = add_input("img", DType::kF32, dims, InputSpec::Kind::kFloat, -1.0, 1.0);
      Val& v = push(name, dims, 1.0, kF32Tolerance);
      v.is_input = true;
      float_inputs_.push_back(name);
      x = v;
    }
    const int64_t channels = x->dims[1].value(), height = x->dims[2].value(), width = x->dims[3].value();
    std::vector<int64_t> groups;
    for (int64_t g = 1; g <= channels; ++g) {
      if (channels % g == 0) groups.push_back(g);
    }
    const int64_t group =
        chance(0.6) ? 1 : groups[static_cast<size_t>(uniform(0, static_cast<int>(groups.size()) - 1))];
    const int64_t out_channels = group * uniform(1, std::max<int>(1, static_cast<int>(8 / group)));
    const int64_t kh = uniform(1, 3), kw = uniform(1, 3);
    const std::vector<int64_t> strides = {uniform(1, 2), uniform(1, 2)};
    const std::vector<int64_t> dilations =
        chance(0.2) ? std::vector<int64_t>{uniform(1, 2), uniform(1, 2)} : std::vector<int64_t>{1, 1};
    std::vector<int64_t> pads = {uniform(0, static_cast<int>(kh) - 1), uniform(0, static_cast<int>(kw) - 1),
                                 uniform(0, static_cast<int>(kh) - 1), uniform(0, static_cast<int>(kw) - 1)};
    const std::string auto_pad = chance(0.15) ? one_of<const char*>({"SAME_UPPER", "SAME_LOWER", "VALID"}) : "NOTSET";
    const int64_t in_size[2] = {height, width}, kernel[2] = {kh, kw};
    int64_t out_size[2];
    for (size_t d = 0; d < 2; ++d) {
      const int64_t extent = (kernel[d] - 1) * dilations[d] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        out_size[d] = (in_size[d] + strides[d] - 1) / strides[d];
      } else {
        const int64_t padding = auto_pad == "VALID" ? 0 : pads[d] + pads[d + 2];
        out_size[d] = in_size[d] + padding < extent ? 0 : (in_size[d] + padding - extent) / strides[d] + 1;
      }
      if (out_size[d] < 1) return false;
    }
    graph::AttributeMap attrs;
    if (group != 1 || chance(0.3)) attrs.set("group", group);
    if (strides != std::vector<int64_t>{1, 1} || chance(0.3)) attrs.set("strides", strides);
    if (dilations != std::vector<int64_t>{1, 1} || chance(0.3)) attrs.set("dilations", dilations);
    if (auto_pad != "NOTSET") {
      attrs.set("auto_pad", auto_pad);
    } else if (pads != std::vector<int64_t>{0, 0, 0, 0} || chance(0.3)) {
      attrs.set("pads", pads);
    }
    if (chance(0.5)) attrs.set("kernel_shape", std::vector<int64_t>{kh, kw});
    const double scale = 1.0 / std::sqrt(static_cast<double>(channels / group * kh * kw));
    std::vector<std::string> inputs = {x->name,
                                       add_f32_weight({out_channels, channels / group, kh, kw}, 0.1 * scale, scale)};
    if (chance(0.5)) inputs.push_back(add_f32_weight({out_channels}, 0.1, 1.0));
    std::string y = add_node("Conv", inputs, std::move(attrs));
    double magnitude = x->magnitude + 1.0;
    if (chance(0.65)) {  // the Conv+BatchNormalization(+Relu) fusion pattern
      y = add_batch_norm(y, out_channels);
      magnitude = 2.0 * magnitude + 1.0;
      if (chance(0.6)) y = add_node("Relu", {y});
    }
    const SymDims dims = {x->dims[0], Dim(out_channels), Dim(out_size[0]), Dim(out_size[1])};
    push(y, dims, magnitude, x->tolerance);
    if (chance(0.4)) {  // flatten into a feature vector per batch row
      push(add_node("Reshape", {y, shape_constant({0, -1})}),
           {x->dims[0], Dim(out_channels * out_size[0] * out_size[1])}, magnitude, x->tolerance);
    }
    return true;
  }

  std::string add_batch_norm(const std::string& x, int64_t channels) {
    graph::AttributeMap attrs;
    if (chance(0.5)) attrs.set("epsilon", one_of<double>({1e-5, 1e-3}));
    return add_node("BatchNormalization",
                    {x, add_f32_weight({channels}, 0.5, 1.5), add_f32_weight({channels}, 0.1, 0.5),
                     add_f32_weight({channels}, 0.1, 0.5), add_f32_weight({channels}, 0.5, 1.5, /*positive=*/true)},
                    std::move(attrs));
  }

  bool batch_norm() {
    std::optional<Val> a =
        pick([](const Val& v) { return v.dims.size() >= 2 && v.dims[1].is_static() && v.dims[1].value() <= 64; });
    if (!a) return false;
    push(add_batch_norm(a->name, a->dims[1].value()), a->dims, 2.0 * a->magnitude + 1.0, a->tolerance);
    return true;
  }

  // Values nobody consumes become outputs (plus a few consumed ones, which must then stay unfused); an input
  // that ended up unused gets a Relu so that every input is read.
  void mark_outputs() {
    const std::vector<Val> pool = pool_;
    for (const Val& v : pool) {
      const graph::Value& value = out_.graph.value(out_.graph.find_value(v.name).value());
      if (v.is_input) {
        if (value.consumers.empty()) check(out_.graph.mark_output(add_node("Relu", {v.name})), v.name);
        continue;
      }
      if (value.consumers.empty() || chance(0.1)) check(out_.graph.mark_output(v.name), v.name);
    }
  }

  std::mt19937_64 rng_;
  RandomGraph out_;
  int target_nodes_ = 0;
  int nodes_ = 0;
  int next_id_ = 0;
  Dim batch_, seq_;
  std::vector<Val> pool_;
  std::vector<std::string> float_inputs_;
  std::map<std::string, std::string> positions_;  // token dim → positions input
};

}  // namespace

RandomGraph generate_random_graph(uint64_t seed, const GeneratorOptions& options) {
  return Generator(seed, options).generate();
}

HostTensors make_inputs(const RandomGraph& graph, const graph::SymbolBindings& bindings, std::mt19937_64& rng) {
  HostTensors inputs;
  for (const InputSpec& spec : graph.inputs) {
    const Shape shape = spec.desc.shape.resolve(bindings).value();
    if (spec.kind == InputSpec::Kind::kFloat) {
      std::mt19937 float_rng(static_cast<uint32_t>(rng()));
      inputs[spec.name] =
          HostTensor::random_f32(shape, float_rng, static_cast<float>(spec.lo), static_cast<float>(spec.hi));
      continue;
    }
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(spec.lo), static_cast<int64_t>(spec.hi) - 1);
    std::vector<int64_t> values(static_cast<size_t>(shape.num_elements()));
    for (int64_t& v : values) v = dist(rng);
    if (spec.desc.dtype == DType::kI32) {
      inputs[spec.name] = HostTensor::i32(shape, std::vector<int32_t>(values.begin(), values.end()));
    } else {
      inputs[spec.name] = HostTensor::i64(shape, values);
    }
  }
  return inputs;
}

}  // namespace hxrt::differential
