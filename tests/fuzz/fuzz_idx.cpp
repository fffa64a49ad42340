// Fuzzes the IDX reader (models/idx.hpp), raw and gzip. The first input byte picks the form: even, the
// rest is the file as is (corrupt gzip streams are reached through the seeds' gzip headers); odd, the
// rest is gzip-compressed first, so the IDX header and sizes behind a valid gzip stream get fuzzed too.
// Both parsers (images, labels) see every input, from memory and from a file: what they accept must
// match its header, and the file reader must answer exactly as the memory parser does.
#include <zlib.h>

#include <string>
#include <vector>

#include "models/idx.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

using detaudit::fuzz::fail;

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail("deflateInit2", "");
  std::vector<uint8_t> out(deflateBound(&z, uLong(size)) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = uInt(size);
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) fail("deflate", "");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void same(const detaudit::Status& mem, const detaudit::Status& file, const char* what) {
  if (mem.is_ok() != file.is_ok() || mem.message() != file.message())
    fail("the file reader and the memory parser disagree",
         std::string(what) + ": memory '" + mem.message() + "', file '" + file.message() + "'");
  if (!mem.is_ok() && mem.message().empty()) fail("rejected without a message", what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = detaudit::fuzz::scratch_path("-idx");
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (data[0] & 1) bytes = gzip(bytes.data(), bytes.size());
  detaudit::fuzz::write_scratch(path, bytes.data(), bytes.size());

  detaudit::IdxImages im, im_file;
  const detaudit::Status si = detaudit::parse_idx_images(path, bytes.data(), bytes.size(), &im);
  same(si, detaudit::read_idx_images(path, &im_file), "images");
  if (si) {
    if (im.count <= 0 || im.rows <= 0 || im.cols <= 0 ||
        im.pixels.size() != size_t(im.count) * size_t(im.rows) * size_t(im.cols))
      fail("images accepted with sizes that do not match", std::to_string(im.pixels.size()));
    if (im.pixels != im_file.pixels || im.count != im_file.count || im.rows != im_file.rows || im.cols != im_file.cols)
      fail("the file reader and the memory parser read different images", "");
  }
  detaudit::IdxLabels lb, lb_file;
  const detaudit::Status sl = detaudit::parse_idx_labels(path, bytes.data(), bytes.size(), &lb);
  same(sl, detaudit::read_idx_labels(path, &lb_file), "labels");
  if (sl) {
    if (lb.count <= 0 || lb.labels.size() != size_t(lb.count))
      fail("labels accepted with a size that does not match", std::to_string(lb.labels.size()));
    if (lb.labels != lb_file.labels || lb.count != lb_file.count)
      fail("the file reader and the memory parser read different labels", "");
  }
  return 0;
}
