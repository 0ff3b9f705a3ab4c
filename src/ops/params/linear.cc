#include "hxrt/ops/params/linear.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace hxrt::ops {

Result<MatMulGeometry> matmul_geometry(const Shape& a, const Shape& b) {
  if (a.rank() < 1 || b.rank() < 1) {
    return invalid_argument("MatMul operands must have rank >= 1, got A {} and B {}", a, b);
  }
  MatMulGeometry g;
  const bool a_vector = a.rank() == 1;
  const bool b_vector = b.rank() == 1;
  g.m = a_vector ? 1 : a.dim(-2);
  g.k = a.dim(-1);
  const int64_t kb = b_vector ? b.dim(0) : b.dim(-2);
  g.n = b_vector ? 1 : b.dim(-1);
  if (g.k != kb) return invalid_argument("MatMul inner dims differ: A {} has K={}, B {} has K={}", a, g.k, b, kb);
  const int a_batch_rank = std::max(0, a.rank() - 2);
  const int b_batch_rank = std::max(0, b.rank() - 2);
  const int batch_rank = std::max(a_batch_rank, b_batch_rank);
  // Batch dims aligned from the right; a missing dim is 1.
  std::vector<int64_t> out_dims(static_cast<size_t>(batch_rank));
  std::vector<int64_t> a_dims(static_cast<size_t>(batch_rank), 1);
  std::vector<int64_t> b_dims(static_cast<size_t>(batch_rank), 1);
  for (int i = 0; i < a_batch_rank; ++i) a_dims[static_cast<size_t>(batch_rank - a_batch_rank + i)] = a.dim(i);
  for (int i = 0; i < b_batch_rank; ++i) b_dims[static_cast<size_t>(batch_rank - b_batch_rank + i)] = b.dim(i);
  int64_t batch = 1;
  for (size_t i = 0; i < out_dims.size(); ++i) {
    if (a_dims[i] != b_dims[i] && a_dims[i] != 1 && b_dims[i] != 1) {
      return invalid_argument("MatMul batch dims of A {} and B {} do not broadcast", a, b);
    }
    out_dims[i] = a_dims[i] == 1 ? b_dims[i] : a_dims[i];
    batch *= out_dims[i];
  }
  // Element strides of the batch dims of A and B (0 where the operand broadcasts).
  std::vector<int64_t> a_strides(out_dims.size(), 0);
  std::vector<int64_t> b_strides(out_dims.size(), 0);
  int64_t a_stride = g.m * g.k;
  int64_t b_stride = g.k * g.n;
  for (size_t i = out_dims.size(); i-- > 0;) {
    a_strides[i] = a_dims[i] == 1 ? 0 : a_stride;
    b_strides[i] = b_dims[i] == 1 ? 0 : b_stride;
    a_stride *= a_dims[i];
    b_stride *= b_dims[i];
  }
  g.a_offsets.resize(static_cast<size_t>(batch));
  g.b_offsets.resize(static_cast<size_t>(batch));
  for (int64_t index = 0; index < batch; ++index) {
    int64_t rest = index;
    int64_t a_offset = 0;
    int64_t b_offset = 0;
    for (size_t i = out_dims.size(); i-- > 0;) {
      const int64_t coordinate = rest % out_dims[i];
      rest /= out_dims[i];
      a_offset += coordinate * a_strides[i];
      b_offset += coordinate * b_strides[i];
    }
    g.a_offsets[static_cast<size_t>(index)] = a_offset;
    g.b_offsets[static_cast<size_t>(index)] = b_offset;
  }
  if (!a_vector) out_dims.push_back(g.m);
  if (!b_vector) out_dims.push_back(g.n);
  HXRT_ASSIGN_OR_RETURN(g.out, Shape::make(out_dims));
  return g;
}

std::string GemmParams::to_string() const {
  return fmt::format("alpha={}, beta={}, transA={}, transB={}", alpha, beta, trans_a ? 1 : 0, trans_b ? 1 : 0);
}

Result<GemmParams> parse_gemm_params(const graph::Node& node) {
  Result<double> alpha = node.attrs.get_float("alpha", 1.0);
  if (!alpha.ok()) return attr_read_error(node, "alpha", alpha.status());
  Result<double> beta = node.attrs.get_float("beta", 1.0);
  if (!beta.ok()) return attr_read_error(node, "beta", beta.status());
  Result<int64_t> trans_a = node.attrs.get_int("transA", 0);
  if (!trans_a.ok()) return attr_read_error(node, "transA", trans_a.status());
  Result<int64_t> trans_b = node.attrs.get_int("transB", 0);
  if (!trans_b.ok()) return attr_read_error(node, "transB", trans_b.status());
  GemmParams params;
  params.alpha = static_cast<float>(*alpha);
  params.beta = static_cast<float>(*beta);
  params.trans_a = *trans_a != 0;
  params.trans_b = *trans_b != 0;
  return params;
}

Result<Activation> activation_from_name(std::string_view name) {
  if (name == "none") return Activation::kNone;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_tanh") return Activation::kGeluTanh;
  return invalid_argument("must be \"none\", \"gelu\" or \"gelu_tanh\", got \"{}\"", name);
}

std::string_view activation_name(Activation activation) {
  switch (activation) {
    case Activation::kNone: return "none";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
  }
  return "";
}

std::string MatMulBiasParams::to_string() const {
  return fmt::format("activation={}", activation_name(activation));
}

Result<MatMulBiasParams> parse_matmul_bias_params(const graph::Node& node) {
  // A Result kept whole: GCC 12 reports a false -Wmaybe-uninitialized for a string unpacked by the macro.
  Result<std::string> name = node.attrs.get_string("activation", "none");
  if (!name.ok()) return attr_read_error(node, "activation", name.status());
  Result<Activation> activation = activation_from_name(*name);
  if (!activation.ok()) return attr_error(node, "activation", activation.status().message());
  MatMulBiasParams params;
  params.activation = *activation;
  return params;
}

}  // namespace hxrt::ops
