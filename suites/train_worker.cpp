// The training worker: one run of the design in its own process (exchange format, fault-injection
// hook and the parent side: suites/train_design.hpp and train_design.cpp).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <optional>
#include <csignal>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "analysis/phases.hpp"
#include "kernels/fingerprint.hpp"
#include "contract/base64.hpp"
#include "models/autoencoder.hpp"
#include "probes/child.hpp"
#include "probes/registry.hpp"
#include "probes/worker.hpp"
#include "contract/training_run.hpp"
#include "models/png.hpp"
#include "models/prednet_train.hpp"
#include "suites/train_data.hpp"
#include "suites/train_design.hpp"
#include "suites/train_measure.hpp"

namespace detaudit {

namespace {

void emit(int fd, const nlohmann::json& j) { write_all(fd, j.dump() + "\n"); }

}  // namespace

nlohmann::json TrainRunRequest::to_json() const {
  return {{"protocol", kTrainWorkerProtocol},
          {"index", index},
          {"key", key},
          {"model", model},
          {"target", target.str()},
          {"init_seed", init_seed},
          {"data_seed", data_seed},
          {"batches", batches},
          {"batch_size", batch_size},
          {"window", window},
          {"data_dir", data_dir},
          {"data_fingerprint", data_fingerprint},
          {"nudge", nudge},
          {"noise_every", noise_every},
          {"prednet_config", prednet_config}};
}

Status parse_train_request(const std::string& text, TrainRunRequest* out) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) { return Status::invalid("malformed request: " + why); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  static const std::set<std::string> kFields = {"protocol",   "index",     "key",       "model",
                                                "target",     "init_seed", "data_seed", "batches",
                                                "batch_size", "window",    "data_dir",  "data_fingerprint",
                                                "nudge",      "noise_every", "prednet_config"};
  for (auto& [k, v] : j.items())
    if (!kFields.count(k)) return bad(fmt::format("unknown field \"{}\"", k));
  auto str = [&](const char* k, std::string* dst) {
    if (!j.contains(k) || !j[k].is_string()) return bad(fmt::format("\"{}\" must be a string", k));
    *dst = j[k].get<std::string>();
    return Status::ok();
  };
  auto unsigned_in = [&](const char* k, uint64_t lo, uint64_t hi, uint64_t* dst) {
    if (!j.contains(k) || !j[k].is_number_unsigned() || j[k].get<uint64_t>() < lo || j[k].get<uint64_t>() > hi)
      return bad(fmt::format("\"{}\" must be an integer in {}..{}", k, lo, hi));
    *dst = j[k].get<uint64_t>();
    return Status::ok();
  };
  TrainRunRequest q;
  std::string protocol, target;
  uint64_t batches = 0, batch_size = 0, window = 0;
  DETAUDIT_RETURN_IF_ERROR(str("protocol", &protocol));
  if (protocol != kTrainWorkerProtocol) return bad(fmt::format("\"protocol\" must be \"{}\"", kTrainWorkerProtocol));
  if (Status st; !(st = unsigned_in("index", 1, UINT64_MAX, &q.index)) || !(st = str("key", &q.key)) ||
                 !(st = str("model", &q.model)) || !(st = str("target", &target)) ||
                 !(st = unsigned_in("init_seed", 0, UINT64_MAX, &q.init_seed)) ||
                 !(st = unsigned_in("data_seed", 0, UINT64_MAX, &q.data_seed)) ||
                 !(st = unsigned_in("batches", 1, uint64_t(kMaxTrainBatches), &batches)) ||
                 !(st = unsigned_in("batch_size", 1, uint64_t(kMaxTrainBatchSize), &batch_size)) ||
                 !(st = unsigned_in("window", 1, batches, &window)) || !(st = str("data_dir", &q.data_dir)) ||
                 !(st = str("data_fingerprint", &q.data_fingerprint)))
    return st;
  if (q.key.empty()) return bad("\"key\" is empty");
  if (q.model != "autoencoder" && q.model != "prednet") return bad("\"model\" must be \"autoencoder\" or \"prednet\"");
  if (Status st = parse_target(target, &q.target); !st) return bad(st.message());
  Fingerprint fp;
  if (!Fingerprint::from_hex(q.data_fingerprint, &fp))
    return bad("\"data_fingerprint\" must be 32 lowercase hex digits");
  if (!j.contains("nudge") || !j["nudge"].is_number_integer() || j["nudge"].get<int64_t>() < -1)
    return bad("\"nudge\" must be an integer >= -1");
  q.nudge = j["nudge"].get<int64_t>();
  uint64_t noise_every = 0;
  DETAUDIT_RETURN_IF_ERROR(unsigned_in("noise_every", 0, uint64_t(kMaxTrainBatches), &noise_every));
  q.noise_every = int(noise_every);
  DETAUDIT_RETURN_IF_ERROR(str("prednet_config", &q.prednet_config));
  q.batches = int(batches), q.batch_size = int(batch_size), q.window = int(window);
  *out = std::move(q);
  return Status::ok();
}

std::string dataset_fingerprint(const Dataset& data) {
  return fingerprint_bytes(data.pixels.data(), data.pixels.size()).hex();
}

// ------------------------------------------------------------------------------------------------
// Fault injection (test hook, see train_design.hpp)
// ------------------------------------------------------------------------------------------------
namespace {

enum class Fault { kNone, kSegv, kIll, kAbort, kHang };

// The fault DETAUDIT_FAULT asks for this run (the first matching entry). Invalid when an entry meant for
// training is malformed.
Status fault_for(const TrainRunRequest& q, Fault* out) {
  *out = Fault::kNone;
  const char* env = std::getenv("DETAUDIT_FAULT");
  if (!env) return Status::ok();
  const std::string all = env;
  for (size_t at = 0; at <= all.size();) {
    size_t end = all.find(',', at);
    if (end == std::string::npos) end = all.size();
    const std::string entry = all.substr(at, end - at);
    at = end + 1;
    if (entry.rfind("train:", 0) != 0) continue;
    const std::string rest = entry.substr(6);
    const size_t colon = rest.rfind(':');
    const std::string sel = colon == std::string::npos ? "" : rest.substr(0, colon);
    const std::string what = colon == std::string::npos ? "" : rest.substr(colon + 1);
    Fault f = what == "segv"    ? Fault::kSegv
              : what == "ill"   ? Fault::kIll
              : what == "abort" ? Fault::kAbort
              : what == "hang"  ? Fault::kHang
                                : Fault::kNone;
    if (sel.empty() || f == Fault::kNone)
      return Status::invalid(
          fmt::format("DETAUDIT_FAULT entry '{}' is not train:<run index or key part>:segv|ill|abort|hang", entry));
    const bool index = sel.find_first_not_of("0123456789") == std::string::npos;
    if (index ? sel == std::to_string(q.index) : q.key.find(sel) != std::string::npos) {
      *out = f;
      return Status::ok();
    }
  }
  return Status::ok();
}

[[noreturn]] void inject(Fault f) {
  switch (f) {
    case Fault::kSegv: {
      // A real invalid write; the address is read through a volatile so the compiler cannot turn it
      // into a trap instruction.
      volatile uintptr_t addr = 0;
      *reinterpret_cast<volatile int*>(addr) = 1;
      std::raise(SIGSEGV);
      break;
    }
    case Fault::kIll:
      std::raise(SIGILL);
      break;
    case Fault::kAbort:
      std::abort();
    case Fault::kHang:
    case Fault::kNone:
      break;
  }
  for (;;) ::pause();  // hang: until the parent kills the process group
}

// ------------------------------------------------------------------------------------------------
// One run
// ------------------------------------------------------------------------------------------------

nlohmann::json failed(const Status& st) {
  return {{"status", to_string(obs_status_for(st))}, {"reason", st.message()}};
}

// The first held-out sequence as one image: its true frames in the top row, PredNet's predictions of them
// below (frame 0's from nothing), 2-pixel gray gaps; in colour when the frames have 3 channels (the model's
// frames are planar [C][H][W]; the PNG interleaves them), else channel 0 in gray.
std::vector<uint8_t> frames_strip(const PredNetConfig& c, const std::vector<float>& truth, const std::vector<float>& pred) {
  const StripSize size = frames_strip_size(c);
  const int h = c.height, w = c.width, gap = 2, cols = size.cols, rows = size.rows, shown = size.channels;
  const size_t plane = size_t(h) * w, frame = size_t(c.channels()) * plane;
  std::vector<uint8_t> px(size_t(cols) * rows * shown, 128);
  auto to8 = [](float x) { return uint8_t(std::lround(std::clamp(x, 0.0f, 1.0f) * 255.0f)); };
  for (int t = 0; t < c.nt && frame * (t + 1) <= truth.size() && frame * (t + 1) <= pred.size(); ++t)
    for (int ch = 0; ch < shown; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const size_t at = size_t(t) * frame + ch * plane + size_t(y) * w + x, col = size_t(t) * (w + gap) + x;
          px[(size_t(y) * cols + col) * shown + ch] = to8(truth[at]);
          px[(size_t(y + h + gap) * cols + col) * shown + ch] = to8(pred[at]);
        }
  return encode_png(cols, rows, shown, px);
}

nlohmann::json finished(const TrainResult& tr, int window) {
  nlohmann::json run;
  run["status"] = "ok";
  run["final_loss"] = curve_window_mean(std::vector<double>(tr.curve.begin(), tr.curve.end()), window);
  run["curve"] = tr.curve;
  run["curve_fingerprint"] = fingerprint_bytes(tr.curve.data(), tr.curve.size() * sizeof(float)).hex();
  run["initial_weights_fingerprint"] = tr.initial_weights.hex();
  run["weights_fingerprint"] = tr.final_weights.hex();
  run["seconds"] = tr.seconds;
  run["steps_per_second"] = tr.seconds > 0 ? double(tr.curve.size()) / tr.seconds : 0.0;
  std::vector<double> c(tr.curve.begin(), tr.curve.end());
  PhaseResult ph = detect_phases(c);
  run["phases"] = {{"label", ph.label},
                   {"segments", ph.segments.size()},
                   {"escape_step", ph.escape_step ? nlohmann::json(*ph.escape_step) : nlohmann::json(nullptr)},
                   {"censored", ph.censored},
                   {"margin", ph.first_margin ? nlohmann::json(*ph.first_margin) : nlohmann::json(nullptr)}};
  return run;
}

// Builds the backend, loads and checks the data (the same pixels the parent saw), trains. Emits "ready"
// and a "step" per batch; returns the run's result fields.
nlohmann::json run_request(const TrainRunRequest& q, Fault fault, int out_fd) {
  BackendOr made = make_target_backend(q.target);
  if (!made) return failed(made.status());
  std::unique_ptr<Backend> backend = std::move(made).value();
  TrainData data;
  Status st = load_train_data(q.model, q.prednet_config, q.data_dir, q.batch_size, &data);
  // The parent loaded these files a moment ago: any failure now means they changed.
  if (!st) return {{"status", "error"}, {"reason", st.message()}};
  if (data.fingerprint != q.data_fingerprint)
    return {{"status", "error"},
            {"reason", fmt::format("{}: the data changed during the design (pixel fingerprint {}, the design started "
                                   "with {})",
                                   data.images.images_path, data.fingerprint, q.data_fingerprint)}};
  emit(out_fd, {{"event", "ready"}});

  auto on_step = [&](int step, float loss) {
    emit(out_fd, {{"event", "step"}, {"step", step + 1}, {"loss", loss}});
    if (step == 0 && fault != Fault::kNone) inject(fault);
    return true;
  };
  std::optional<WeightNudge> nudge;
  if (q.model == "prednet") {
    PredNetTrainConfig cfg;
    if (!prednet_config(q.prednet_config, q.batch_size, &cfg.net))
      return {{"status", "error"}, {"reason", "unknown PredNet configuration '" + q.prednet_config + "'"}};
    cfg.init_seed = q.init_seed;
    cfg.data_seed = q.data_seed;
    cfg.batches = q.batches;
    PredNetCallbacks cb;
    cb.on_step = on_step;
    cb.on_check = [&](int done, int of) { emit(out_fd, {{"event", "check"}, {"done", done}, {"of", of}}); };
    if (q.nudge >= 0)
      cb.after_init = [&](PredNet& m) {
        WeightNudge n;
        DETAUDIT_RETURN_IF_ERROR(nudge_weight(m, uint64_t(q.nudge), &n));
        nudge = n;
        return Status::ok();
      };
    std::optional<NoiseMeter> meter;
    if (q.noise_every > 0) {
      meter.emplace(q.noise_every, q.batch_size, q.batches, uint64_t(data.train_video.count));
      cb.after_backward = [&](int step, PredNet& m, const Tensor& frames) { return meter->after_backward(step, m, frames); };
    }
    PredNetTrainResult pr;
    st = train_prednet(*backend, data.train_video, data.held_out_video, cfg, cb, &pr);
    if (!st) return failed(st);
    TrainResult tr;
    tr.curve = pr.curve;
    tr.initial_weights = pr.initial_weights;
    tr.final_weights = pr.final_weights;
    tr.seconds = pr.seconds;
    tr.parameters = pr.parameters;
    nlohmann::json run = finished(tr, q.window);
    if (nudge) run["nudge"] = to_json(*nudge);
    if (meter) run["noise"] = to_json(meter->trace());
    run["prediction"] = to_json(NextFrameCheck{uint64_t(pr.held_out.sequences), pr.held_out.mse, pr.held_out.copy_last_mse});
    run["frames_png"] = base64_encode(frames_strip(cfg.net, pr.example_truth, pr.example_prediction));
    return run;
  }
  TrainConfig cfg;
  cfg.init_seed = q.init_seed;
  cfg.data_seed = q.data_seed;
  cfg.batches = q.batches;
  cfg.batch_size = q.batch_size;
  TrainCallbacks cb;
  cb.on_step = on_step;
  if (q.nudge >= 0)
    cb.after_init = [&](Autoencoder& m) {
      WeightNudge n;
      DETAUDIT_RETURN_IF_ERROR(nudge_weight(m, uint64_t(q.nudge), &n));
      nudge = n;
      return Status::ok();
    };
  std::optional<NoiseMeter> meter;
  if (q.noise_every > 0) {
    meter.emplace(q.noise_every, q.batch_size, q.batches, uint64_t(data.images.count));
    cb.after_backward = [&](int step, Autoencoder& m, const Tensor& batch) { return meter->after_backward(step, m, batch); };
  }
  TrainResult tr;
  st = train_autoencoder(*backend, data.images, cfg, cb, &tr);
  if (!st) return failed(st);
  nlohmann::json run = finished(tr, q.window);
  if (nudge) run["nudge"] = to_json(*nudge);
  if (meter) run["noise"] = to_json(meter->trace());
  return run;
}

}  // namespace

int train_worker_main(int in_fd, int out_fd) {
  child_start();
  TrainRunRequest q;
  if (Status st = parse_train_request(read_all(in_fd), &q); !st) {
    fmt::print(stderr, "detaudit train worker: {}\n", st.message());
    return 2;
  }
  Fault fault;
  if (Status st = fault_for(q, &fault); !st) {
    fmt::print(stderr, "detaudit train worker: {}\n", st.message());
    return 2;
  }
  emit(out_fd, {{"event", "run"}, {"run", run_request(q, fault, out_fd)}});
  return 0;
}

}  // namespace detaudit
