// The GPUs the built binary can run on: the CUDA machine code (cubins) and PTX embedded in the detaudit
// executable, read from its fat binaries without a GPU. The default architectures (cmake/cuda.cmake)
// must give a T4 (sm_75), an A100 (sm_80), an L4 (sm_89) and an H100/H200 (sm_90) their own machine
// code, and newer chips PTX to compile, or they report "no kernel image" instead of running.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>

namespace {

// The images of every fat binary in `bytes`: (kind, sm) with kind 1 = PTX, 2 = cubin. A fat binary is
// a 16-byte header (magic 0xBA55ED50, u16 version, u16 header size, u64 size of its entries), then
// entries of a header (u16 kind, u16 version, u32 header size, u64 payload size, ..., u32 sm at 28)
// and a payload.
std::set<std::pair<int, int>> fatbin_images(const std::string& bytes) {
  std::set<std::pair<int, int>> out;
  const uint32_t magic = 0xBA55ED50u;
  auto u16 = [&](size_t at) { uint16_t v; std::memcpy(&v, bytes.data() + at, 2); return v; };
  auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, bytes.data() + at, 4); return v; };
  auto u64 = [&](size_t at) { uint64_t v; std::memcpy(&v, bytes.data() + at, 8); return v; };
  for (size_t i = 0; i + 16 <= bytes.size(); ++i) {
    if (u32(i) != magic) continue;
    const size_t header = u16(i + 6), size = size_t(u64(i + 8));
    if (header != 16 || i + header + size > bytes.size()) continue;  // the magic by chance
    for (size_t p = i + header; p + 32 <= i + header + size;) {
      const size_t eh = u32(p + 4), payload = size_t(u64(p + 8));
      if (eh < 32 || payload == 0) break;
      out.insert({int(u16(p)), int(u32(p + 28))});
      p += eh + payload;
    }
    i += header + size - 1;
  }
  return out;
}

std::set<std::string> split(const std::string& s, char sep) {
  std::set<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t end = s.find(sep, at);
    if (end == std::string::npos) end = s.size();
    if (end > at) out.insert(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

TEST(CudaArchitectures, TheDefaultCoversTuringAmpereAdaHopperAndNewerChips) {
  std::ifstream f(std::string(DETAUDIT_SOURCE_DIR) + "/cmake/cuda.cmake");
  ASSERT_TRUE(f);
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  const std::string key = "set(CMAKE_CUDA_ARCHITECTURES \"";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << "no default architectures in cmake/cuda.cmake";
  const size_t from = at + key.size();
  const auto archs = split(text.substr(from, text.find('"', from) - from), ';');
  for (const char* a : {"75-real", "80-real", "89-real", "90-real", "90-virtual"})
    EXPECT_TRUE(archs.count(a)) << a << " is not among the default architectures";
}

TEST(CudaArchitectures, TheBinaryCarriesTheImagesItsArchitecturesName) {
#if !defined(DETAUDIT_HAVE_CUDA)
  GTEST_SKIP() << "built without CUDA (no GPU code to check)";
#else
  const auto archs = split(DETAUDIT_CUDA_ARCHITECTURES, ',');
  std::set<std::pair<int, int>> want;  // (kind, sm): "90-real" a cubin, "90-virtual" PTX, "90" both
  for (const std::string& a : archs) {
    const size_t dash = a.find('-');
    const std::string num = a.substr(0, dash), kind = dash == std::string::npos ? "" : a.substr(dash + 1);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos)
      GTEST_SKIP() << "built for CMAKE_CUDA_ARCHITECTURES=" << DETAUDIT_CUDA_ARCHITECTURES << " (no list to check)";
    if (kind != "virtual") want.insert({2, std::stoi(num)});
    if (kind != "real") want.insert({1, std::stoi(num)});
  }
  std::ifstream f(DETAUDIT_EXE, std::ios::binary);
  ASSERT_TRUE(f) << DETAUDIT_EXE;
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  const auto images = fatbin_images(bytes);
  std::string seen;
  for (auto& [kind, sm] : images) seen += (kind == 1 ? " ptx_" : " sm_") + std::to_string(sm);
  for (auto& [kind, sm] : want)
    EXPECT_TRUE(images.count({kind, sm})) << "no " << (kind == 1 ? "compute_" : "sm_") << sm << " image in "
                                          << DETAUDIT_EXE << "; it has:" << seen;
#endif
}

}  // namespace
