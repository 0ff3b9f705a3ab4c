// MatMulQ for the 32-value types whose blocks reduce to one integer per output: q4_0 and iq4_nl (internal to
// quant_matmul.cc and its tests).
//
// Note [Block integers]: for these types every (activation row i, W row j) is
//     acc = 0;  for each block b in order:  acc = fma(float(isum_b), d_w[b] · d_a[b], acc);  y = acc + bias[j]
// (bias 0.0f when there is none), where isum_b = Σ v·q over the block's 32 values is exact: v the W value's integer
// (q4_0: nibble − 8; iq4_nl: kIQ4NLValues[nibble]) and q the activation's (BlockQ8A, one scale per 32 values); the
// scale product d_w · d_a is one float multiply and the accumulation one fused step per block. An integer is exact
// however it is summed, so every implementation — scalar, AVX2, AVX-512 VNNI, and the one OpenCL/CUDA source
// (kernels/jit/quant_blocks.cc) — gives the same bits whatever its vector width, lane layout or reduction order, and
// Note [Batch invariance] (quant_matmul.h) holds.
//
// Why these types leave the eight float lanes of the others (Note [VNNI-512 pairs]): a float step per lane is eight
// conversions and FMAs per 32 multiply-adds, the bound of the prefill kernels. Here it is one per output and block,
// so the AVX-512 kernel puts sixteen W rows in the lanes of one zmm (columns as lanes): per block and activation row
// eight vpdpbusd, each against one broadcast dword of activations, then one conversion and one FMA for sixteen
// outputs. llama.cpp's repacked q4_0/iq4_nl GEMMs also take one float step per output and block.
//
// The W integers go into vpdpbusd unsigned, biased (q4_0: the nibble, bias 8; iq4_nl: value + 128, bias 128), and
// each block's sum starts at (or ends with) −bias · Σq (the activation block's exact half sums), so the integer is
// exactly Σ v·q.
//
// Thread-safety: every function is reentrant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hxrt/base/dtype.h"
#include "kernels/cpu/quant_matmul.h"

namespace hxrt::kernels::cpu::blockint {

// True for the types these kernels compute (q4_0, iq4_nl).
bool handles(DType w_type);

// y[i · ldy + j] = dot(activation row i, W row j) (+ bias[j]) for i < rows, j < cols, as Note [Block integers]
// defines it; activation row i is a + i · nb (quantized with group 1), W row j is w + j · row_bytes. Any rows and
// cols; the same bits on every ISA.
void tile(DType w_type, QuantIsa isa, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes,
          int64_t nb, int64_t cols, const float* bias, float* y, int64_t ldy);

}  // namespace hxrt::kernels::cpu::blockint
