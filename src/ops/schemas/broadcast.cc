// Numpy-style broadcasting of two symbolic shapes (schemas.h).
//
// Note [Symbolic broadcasting]
// Trailing dims are aligned and a missing leading dim counts as 1. For each aligned pair:
//   - equal dims (equal constants or structurally identical expressions) give that dim;
//   - a static 1 stretches to the other dim, symbolic or not;
//   - two different static dims are an error now;
//   - otherwise (a symbolic dim against a different static or symbolic dim) the dims must be equal at run time:
//     the result takes the static dim when there is one (else the left dim) and a DimCheck is recorded.
// A symbolic dim is therefore never assumed to be 1 at run time: binding `n_tokens = 1` against a static 5 fails
// the recorded check instead of broadcasting. That keeps every planned shape a function of the input symbols.

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {
bool is_static_one(const graph::Dim& d) {
  return d.is_static() && d.value() == 1;
}
}  // namespace

Result<graph::SymShape> broadcast_shapes(InferenceContext& ctx, const graph::SymShape& a, const graph::SymShape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<graph::Dim> out(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    // Axis i counted from the end; a missing dim is a static 1.
    const int ia = a.rank() - 1 - i;
    const int ib = b.rank() - 1 - i;
    const graph::Dim da = ia >= 0 ? a.dims()[static_cast<size_t>(ia)] : graph::Dim(1);
    const graph::Dim db = ib >= 0 ? b.dims()[static_cast<size_t>(ib)] : graph::Dim(1);
    graph::Dim& result = out[static_cast<size_t>(rank - 1 - i)];
    if (da == db || is_static_one(db)) {
      result = da;
    } else if (is_static_one(da)) {
      result = db;
    } else if (da.is_static() && db.is_static()) {
      return ctx.error(fmt::format("cannot broadcast {} with {}: dim {} vs {} at axis {}", a.to_string(), b.to_string(),
                                   da.to_string(), db.to_string(), rank - 1 - i));
    } else {
      HXRT_RETURN_IF_ERROR(ctx.require_equal(da, db,
                                             fmt::format("{} '{}': broadcast axis {} of {} and {}", ctx.node().op_type,
                                                         ctx.node().name, rank - 1 - i, a.to_string(), b.to_string())));
      result = db.is_static() ? db : da;
    }
  }
  return graph::SymShape(std::move(out));
}

}  // namespace hxrt::ops::schemas
