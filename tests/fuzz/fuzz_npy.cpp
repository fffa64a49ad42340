// Fuzzes the .npy reader (kernels/npy.hpp) that `detaudit import` runs on a framework's outputs:
// parse_npy on any bytes must answer with a status, never throw, crash or allocate beyond the input. An
// array it accepts must hold exactly the elements its shape declares, and encode and parse again to the
// same descr, shape and bytes.
#include <cstring>
#include <string>

#include "kernels/npy.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  detaudit::NpyArray a;
  const detaudit::Status st = detaudit::parse_npy("fuzz.npy", data, size, &a);
  if (!st.is_ok()) {
    if (st.message().empty()) detaudit::fuzz::fail("rejected without a message", "");
    if (st.message().find('\n') != std::string::npos) detaudit::fuzz::fail("a message of more than one line", st.message());
    return 0;
  }
  if (a.data.size() != a.elements() * a.item_bytes())
    detaudit::fuzz::fail("data size differs from the shape", detaudit::npy_shape_text(a.shape) + " " + a.descr);
  const auto again = detaudit::npy_encode(a.descr, a.shape, a.data.data(), a.data.size());
  detaudit::NpyArray b;
  const detaudit::Status st2 = detaudit::parse_npy("again.npy", again.data(), again.size(), &b);
  if (!st2.is_ok()) detaudit::fuzz::fail("an accepted array does not encode and parse again", st2.message());
  if (b.descr != a.descr || b.shape != a.shape || b.data != a.data)
    detaudit::fuzz::fail("an accepted array changes on an encode/parse round trip", detaudit::npy_shape_text(a.shape));
  return 0;
}
