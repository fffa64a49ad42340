// NumPy .npy files of float arrays: what `detaudit export` writes (a workload's inputs and its oracle's
// output) and what `detaudit import` reads back (a framework's outputs). Here in kernels/, beside the
// fingerprint, because it is plain bytes in and out with no detaudit types: suites/ (export, import) and
// models/ (a later PredNet .npy loader) may both use it, and neither may include the other's folder.
//
// Format (numpy.lib.format, version 1.0): "\x93NUMPY" | major 1 | minor 0 | header length (u16 LE) |
// header: an ASCII Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and ended by '\n' so that the data starts at a multiple of 64 | the data, C order.
// Versions 2.0 and 3.0 (a u32 header length) are read too; version 1.0 is written.
//
// Strict, because a framework's bytes are judged bit for bit: only '<f4' and '<f8' (little-endian
// float32, float64) and '|u1' (uint8: video frames, suites/train_data.hpp) are read; big-endian ('>f4'), any other dtype, Fortran order, a header over
// kMaxNpyHeaderBytes, more than kMaxNpyDims dimensions, a shape whose element or byte count overflows
// or exceeds kMaxNpyDataBytes, a data part shorter or longer than the shape says, and anything malformed
// in the header give Status::invalid with one line naming the file and the problem. The header is read
// and checked before the data, so memory never grows with what a header claims.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

inline constexpr size_t kMaxNpyHeaderBytes = 65535;            // version 1.0's limit; numpy's own is 10,000
inline constexpr size_t kMaxNpyDims = 32;                      // numpy's NPY_MAXDIMS before 2.0
inline constexpr uint64_t kMaxNpyDataBytes = uint64_t(1) << 34;  // 16 GiB

struct NpyArray {
  std::string descr;            // "<f4", "<f8" or "|u1"
  std::vector<uint64_t> shape;  // () for a scalar: one element
  std::vector<uint8_t> data;    // C order, little-endian: the bytes as they are in the file
  size_t item_bytes() const { return descr == "<f8" ? 8 : descr == "|u1" ? 1 : 4; }
  uint64_t elements() const;
};

// "(3, 4)", "(5,)", "()": a shape as numpy prints it (messages, the manifest's words).
std::string npy_shape_text(const std::vector<uint64_t>& shape);

// The whole file: header, then `bytes` bytes of data (which must be shape's elements x the item size of
// descr, "<f4", "<f8" or "|u1").
std::vector<uint8_t> npy_encode(const std::string& descr, const std::vector<uint64_t>& shape, const void* data,
                                size_t bytes);

// From memory; `name` stands for the file in messages. Fuzzed (tests/fuzz/fuzz_npy.cpp): any bytes give
// a status, never an exception or an allocation beyond n.
Status parse_npy(const std::string& name, const uint8_t* data, size_t n, NpyArray* out);
// From a file: its size is taken first, the header read and checked, then exactly the data it declares.
// `header_ok`, when given, judges the header (descr and shape in *out, no data yet) before the data is
// read: a file whose shape is not the one expected is refused without reading (or allocating) its data.
Status read_npy(const std::string& path, NpyArray* out,
                const std::function<Status(const NpyArray& header)>& header_ok = nullptr);

}  // namespace detaudit
