#include "suites/train_data.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/fingerprint.hpp"
#include "kernels/npy.hpp"
#include "probes/workload.hpp"  // available_memory_bytes
#include "suites/train_design.hpp"

namespace detaudit {

bool prednet_config(const std::string& name, int batch_size, PredNetConfig* out) {
  PredNetConfig c = prednet_quick();
  if (name == "paper") {
    c = prednet_paper();
  } else if (name == "tiny") {
    c.height = c.width = 32;
    c.stacks = {1, 4, 8};
    c.layer_weights = {1, 0, 0};
    c.nt = 4;
  } else if (name != "quick") {
    return false;
  }
  c.batch = batch_size;
  *out = c;
  return true;
}

Status load_video_npy(const std::string& path, const PredNetConfig& c, VideoSet* train, VideoSet* held_out,
                      std::string* fingerprint) {
  // The header is judged before the data is read: dtype, shape against the configuration, sequence count
  // and the memory the frames take (the file's data once, plus the held-out tenth copied out of it).
  uint64_t n = 0, t = 0, h = 0, w = 0, ch = 1, held = 0;
  auto header_ok = [&](const NpyArray& a) -> Status {
    if (a.descr != "|u1")
      return Status::invalid(
          fmt::format("{}: dtype '{}'; video frames must be uint8 ('|u1'), pixels 0..255", path, a.descr));
    if (a.shape.size() != 4 && a.shape.size() != 5)
      return Status::invalid(
          fmt::format("{}: shape {} is not [N, T, H, W] or [N, T, H, W, C]", path, npy_shape_text(a.shape)));
    n = a.shape[0], t = a.shape[1], h = a.shape[2], w = a.shape[3], ch = a.shape.size() == 5 ? a.shape[4] : 1;
    if (h != uint64_t(c.height) || w != uint64_t(c.width) || ch != uint64_t(c.channels()) || t < uint64_t(c.nt))
      return Status::invalid(
          fmt::format("{}: shape {}: the PredNet configuration needs frames of {}x{} with {} channel(s) "
                      "and at least {} frames per sequence",
                      path, npy_shape_text(a.shape), c.height, c.width, c.channels(), c.nt));
    // The last tenth (at least one batch) is held out for the next-frame check; the rest trains.
    held = std::max<uint64_t>(uint64_t(c.batch), n / 10);
    if (n < held + uint64_t(c.batch))
      return Status::invalid(
          fmt::format("{}: {} sequences; PredNet needs at least {} (one batch to train on and one held out)", path, n,
                      2 * c.batch));
    const double need = double(n + held) * double(t * h * w * ch);
    std::string source;
    const uint64_t have = available_memory_bytes(&source);
    if (have != 0 && need > double(have))
      return Status::invalid(
          fmt::format("{}: its {} frames would need {:.1f} GiB of memory; {:.1f} GiB are "
                      "available ({})",
                      path, n * t, need / (1u << 30), double(have) / (1u << 30), source));
    return Status::ok();
  };
  NpyArray a;
  DETAUDIT_RETURN_IF_ERROR(read_npy(path, &a, header_ok));
  // The fingerprint is that of the training and held-out pixels one after the other: the file's data.
  if (fingerprint) *fingerprint = fingerprint_bytes(a.data.data(), a.data.size()).hex();
  auto shape = [&](uint64_t count, VideoSet* v) {
    v->count = int(count), v->frames = int(t), v->rows = int(h), v->cols = int(w), v->channels = int(ch);
  };
  shape(n - held, train);
  shape(held, held_out);
  const size_t split = (n - held) * train->pixels_per_sequence();
  held_out->pixels.assign(a.data.begin() + ptrdiff_t(split), a.data.end());
  a.data.resize(split);  // the training part keeps the file's buffer: no copy of the larger part
  train->pixels = std::move(a.data);
  return Status::ok();
}

Status load_train_data(const std::string& model, const std::string& prednet_name, const std::string& data_dir,
                       int batch_size, TrainData* out) {
  TrainData t;
  if (model == "prednet" && data_dir.size() > 4 && data_dir.compare(data_dir.size() - 4, 4, ".npy") == 0) {
    PredNetConfig c;
    if (!prednet_config(prednet_name, batch_size, &c))
      return Status::invalid(fmt::format("PredNet configuration '{}': quick, tiny or paper", prednet_name));
    DETAUDIT_RETURN_IF_ERROR(load_video_npy(data_dir, c, &t.train_video, &t.held_out_video, &t.fingerprint));
    t.images.images_path = data_dir;
    t.description = fmt::format("{}: {} + {} held-out sequences of {} frames {}x{}x{}; PredNet {}", data_dir,
                                t.train_video.count, t.held_out_video.count, t.train_video.frames, t.train_video.channels,
                                t.train_video.rows, t.train_video.cols, prednet_name);
    *out = std::move(t);
    return Status::ok();
  }
  DETAUDIT_RETURN_IF_ERROR(load_dataset(data_dir, "train", &t.images));
  if (model == "autoencoder") {
    DETAUDIT_RETURN_IF_ERROR(
        check_dataset_for_model(t.images, model, kAutoencoderImageSide, kAutoencoderImageSide, batch_size));
    t.fingerprint = dataset_fingerprint(t.images);
    t.description = fmt::format("{} images {}x{} from {}", t.images.count, t.images.rows, t.images.cols,
                                t.images.images_path);
  } else if (model == "prednet") {
    DETAUDIT_RETURN_IF_ERROR(check_dataset_for_model(t.images, model, kSpriteSide, kSpriteSide, 1));
    PredNetConfig c;
    if (!prednet_config(prednet_name, batch_size, &c))
      return Status::invalid(fmt::format("PredNet configuration '{}': quick, tiny or paper", prednet_name));
    if (std::string e = c.validate(); !e.empty()) return Status::invalid("PredNet: " + e);
    SpriteConfig sc;
    sc.frames = c.nt, sc.rows = c.height, sc.cols = c.width, sc.channels = c.channels();
    DETAUDIT_RETURN_IF_ERROR(make_moving_sprites(t.images, sc, kPredNetSpriteSeed, 0, kPredNetTrainSequences, &t.train_video));
    DETAUDIT_RETURN_IF_ERROR(make_moving_sprites(t.images, sc, kPredNetSpriteSeed, kPredNetHeldOutFirst,
                                                 kPredNetHeldOutSequences, &t.held_out_video));
    std::vector<uint8_t> all = t.train_video.pixels;
    all.insert(all.end(), t.held_out_video.pixels.begin(), t.held_out_video.pixels.end());
    t.fingerprint = fingerprint_bytes(all.data(), all.size()).hex();
    t.description = fmt::format("moving sprites: {} + {} held-out sequences of {} frames {}x{}{} (seed {}) cut from {}; "
                                "PredNet {}",
                                kPredNetTrainSequences, kPredNetHeldOutSequences, sc.frames, sc.rows, sc.cols,
                                sc.channels == 1 ? "" : fmt::format(" in {} equal channels", sc.channels),
                                kPredNetSpriteSeed, t.images.images_path, prednet_name);
  } else {
    return Status::invalid(fmt::format("model '{}': autoencoder or prednet", model));
  }
  *out = std::move(t);
  return Status::ok();
}

}  // namespace detaudit
