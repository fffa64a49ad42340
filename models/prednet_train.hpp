// Training PredNet (models/prednet.hpp) on video sequences (models/sprites.hpp VideoSet), the PredNet
// training regression's loop, and its sanity check against copying the last frame
// (the prediction MSE must beat "copy the last frame").
//
// Batch b takes the sequences BatchOrder(train count, batch, data_seed) gives (models/autoencoder.hpp),
// their first nt frames, pixels / 255, step-major (frame t of sample n at row t*batch + n). Adam with
// lr, then lr_late from step lr_drop_at (the paper drops 1e-3 to 1e-4 halfway). The curve is each step's
// loss L (models/prednet.hpp), rounded to float as the autoencoder's curve is.
// Held-out evaluation: the mean squared error of the predictions of frames 1 .. nt-1 (Ahat_0 from the
// frames before) against the true frames, and the same error of the last frame's copy, accumulated in
// double over every pixel of every held-out sequence (in batches of `batch`).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "models/prednet.hpp"
#include "models/sprites.hpp"

namespace detaudit {

struct PredNetTrainConfig {
  PredNetConfig net = prednet_quick();
  uint64_t init_seed = 1, data_seed = 1;
  int batches = 100;
  float lr_late = 1e-4f;
  int lr_drop_at = -1;  // step from which lr_late applies; -1: batches / 2
};

struct PredictionCheck {
  int sequences = 0;
  double mse = 0;            // PredNet's next-frame prediction, frames 1 .. nt-1
  double copy_last_mse = 0;  // frame t-1 as the prediction of frame t
  bool beats_copy_last() const { return mse < copy_last_mse; }
};

struct PredNetTrainResult {
  std::vector<float> curve;
  Fingerprint initial_weights, final_weights;
  double seconds = 0;
  size_t parameters = 0;
  PredictionCheck held_out;
  // Sequence 0 of the held-out set: its true frames and PredNet's predictions (Ahat_0; frame 0's is
  // the prediction from nothing), nt x C x H x W floats in [0, 1] each.
  std::vector<float> example_truth, example_prediction;
};

struct PredNetCallbacks {
  // After the initial weights are set, before they are fingerprinted (condition (e)'s nudge).
  std::function<Status(PredNet& model)> after_init;
  // After a step's backward, before its update (the noise measurements of `train --noise-scale`): the
  // model holds the batch's gradient, frames the batch. What it leaves in grads() is the update's.
  std::function<Status(int step, PredNet& model, const Tensor& frames)> after_backward;
  // After each step's update (return false to stop), as TrainCallbacks::on_step.
  std::function<bool(int step, float loss)> on_step;
  // After each batch of the held-out check (done of `of` sequences): a sign of life for a watchdog, since
  // the check of a large configuration takes as long as several training steps.
  std::function<void(int done, int of)> on_check;
};

// Checks that train and held_out match cfg.net (frames >= nt, rows, cols, channels) and hold at least
// one batch.
Status train_prednet(Backend& backend, const VideoSet& train, const VideoSet& held_out, const PredNetTrainConfig& cfg,
                     const PredNetCallbacks& cb, PredNetTrainResult* out);

// The held-out check alone, for a model trained elsewhere.
Status check_predictions(PredNet& model, const VideoSet& held_out, PredictionCheck* out,
                         std::vector<float>* example_truth = nullptr, std::vector<float>* example_prediction = nullptr,
                         const std::function<void(int done, int of)>& on_batch = {});

}  // namespace detaudit
