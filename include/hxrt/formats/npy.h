// NumPy .npy files: one HostTensor per file, the way inputs and outputs travel between hxrt and Python.
//
// Layout (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//
//   offset  size  field
//        0     6  magic "\x93NUMPY"
//        6     1  major version (1, 2 or 3)
//        7     1  minor version (0)
//        8   2|4  header length H, little-endian: 2 bytes in version 1, 4 bytes in versions 2 and 3
//     10|12    H  header: a Python dict literal, padded with spaces and ended by '\n', e.g.
//                 {'descr': '<f4', 'fortran_order': False, 'shape': (4, 64), }
//   then the elements, row-major (C order), exactly storage_bytes(dtype, elements) bytes.
//
// Versions 1.0, 2.0 and 3.0 are read (3.0 differs from 2.0 only in allowing UTF-8 in the header). Writing produces
// version 1.0, or 2.0 when the header does not fit a 2-byte length; the data starts at a multiple of 64 bytes.
//
// Element types (descr): '<f4' f32, '<f2' f16, '<i8' i64, '<i4' i32, '|i1' i8, '|u1' u8, '|b1' bool. The byte-order
// mark may also be '=' (native; hxrt hosts are little-endian) and, for one-byte types, '<' or '|'. Big-endian
// types, other widths, structured and object dtypes are rejected with InvalidArgument naming the descr.
//
// Note [bfloat16 in npy]: NumPy has no bfloat16. Extension dtypes (ml_dtypes) save it as '<V2', a raw two-byte void
// that could be anything (f16 bits, a struct of two bytes, ...), so hxrt refuses '<V2' instead of guessing. hxrt
// writes and reads bf16 with the descr 'bfloat16' (the ml_dtypes name). NumPy without that extension refuses the
// file; to read one in Python, take the raw bytes after the header as uint16 (`np.frombuffer(..., '<u2')`) and
// widen them into the high half of a float32.
//
// Only C-order arrays are accepted ('fortran_order': True is InvalidArgument). The header is parsed strictly:
// exactly the keys 'descr', 'fortran_order' and 'shape', in any order, with any whitespace and trailing commas;
// shape dims are non-negative integers whose product fits in int64, at most Shape::kMaxRank of them.
//
// Errors: NotFound for a missing file; DataLoss for a file that is not a valid .npy (bad magic, header length past
// the end, malformed header, data shorter or longer than the header says); InvalidArgument for a valid .npy this
// reader does not support (big-endian or unknown descr, Fortran order, rank above kMaxRank) and for writing a dtype
// without a descr (quantized types); OutOfRange for dims whose element count or byte size overflows 64 bits. Each
// message names the field and, where it has one, the byte offset. Sizes are checked against the bytes present
// before anything is allocated, so a hostile header cannot make the reader allocate more than the file's size.
//
// Thread-safety: the functions are reentrant; distinct calls may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/host_tensor.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"

namespace hxrt::formats {

inline constexpr char kNpyMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
inline constexpr uint64_t kNpyAlignment = 64;  // of the data offset, in files hxrt writes

// What the header of a .npy file says.
struct NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  DType dtype = DType::kF32;
  std::string descr;  // as written in the file ("<f4")
  Shape shape;
  uint64_t data_offset = 0;  // bytes from the start of the file to the first element
  uint64_t data_bytes = 0;   // storage_bytes(dtype, shape.num_elements())
};

// The descr hxrt writes for `dtype` ("<f4", "bfloat16"); InvalidArgument for dtypes with no .npy form.
Result<std::string> npy_descr(DType dtype);
// The dtype of a descr; InvalidArgument naming the descr when hxrt does not support it.
Result<DType> dtype_from_npy_descr(std::string_view descr);

// Parses the magic, version and header of `bytes` (which may hold only the start of a file) and checks that the
// header lies within `bytes`. Does not look at the data.
Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes);

// Reads a whole .npy file held in memory; the data must be exactly as long as the header says.
Result<HostTensor> read_npy_from_memory(std::span<const std::byte> bytes);
// Reads the .npy file at `path`.
Result<HostTensor> read_npy(const std::string& path);

// The bytes of `tensor` as a .npy file (version 1.0, or 2.0 for headers longer than 65535 bytes).
Result<std::vector<std::byte>> serialize_npy(const HostTensor& tensor);
// Writes `tensor` to `path`, atomically: a temporary file beside it is renamed over it.
Status write_npy(const std::string& path, const HostTensor& tensor);

}  // namespace hxrt::formats
