// The data of a training design, loaded the same way by the design (to check it and fingerprint it
// before any run) and by every training worker (which must see the same bytes):
//   autoencoder: 28x28 IDX images (Fashion-MNIST by default, or --data DIR);
//   prednet: moving sprites (models/sprites.hpp) cut from those images, kPredNetTrainSequences sequences
//            for training and kPredNetHeldOutSequences (from sequence index kPredNetHeldOutFirst on, so
//            never one of the training ones) for the next-frame check, nt frames of 64x64 each, from the
//            fixed seed kPredNetSpriteSeed (the design's data_seed orders the batches, as for the
//            autoencoder);
//            or the user's own sequences: --data FILE.npy, uint8 [N, T, H, W] or [N, T, H, W, C] (C last),
//            whose last tenth (at least one batch) is held out (load_video_npy).
#pragma once
#include <string>

#include "contract/training_run.hpp"  // kPredNetTrainSequences
#include "models/idx.hpp"
#include "models/prednet.hpp"
#include "models/sprites.hpp"

namespace detaudit {

inline constexpr uint64_t kPredNetHeldOutFirst = 1'000'000;
inline constexpr uint64_t kPredNetSpriteSeed = 2017;

struct TrainData {
  Dataset images;                        // the IDX images (prednet: the sprites' source)
  VideoSet train_video, held_out_video;  // prednet
  std::string fingerprint;               // of the pixels a run trains on (images, or both video sets)
  std::string description;               // one line for the progress and the report
};

// A PredNet configuration by name, with the design's batch size: "quick" (models/prednet.hpp
// prednet_quick: 1 x 64 x 64, stacks (1, 16, 32, 64), nt 10), "tiny" (1 x 32 x 32, stacks (1, 4, 8),
// nt 4: a smoke test of the whole design in seconds, not a regression) or "paper" (prednet_paper: the
// KITTI network, 3 x 128 x 160, stacks (3, 48, 96, 192), nt 10; trained on moving sprites in three equal
// channels, or on the user's RGB .npy). False for another name.
bool prednet_config(const std::string& name, int batch_size, PredNetConfig* out);

// An .npy video: dtype '|u1', shape [N, T, H, W] or [N, T, H, W, C] matching c (frames of c.height x
// c.width with c.channels(), T >= c.nt), at least two batches of sequences. Status::invalid naming the
// file and the problem otherwise (kernels/npy.hpp: truncated, corrupt, big-endian, Fortran order...), or
// one whose frames need more memory than the machine has available (judged from the header, before any
// data is read). The data is read once and split without copying its larger part; `fingerprint`, when
// given, is that of the file's pixels (the training sequences followed by the held-out ones).
Status load_video_npy(const std::string& path, const PredNetConfig& c, VideoSet* train, VideoSet* held_out,
                      std::string* fingerprint = nullptr);

// Status::invalid (bad or unusable files, named; an unknown PredNet configuration) or unavailable (no data
// set) with one line. prednet_config is read for model "prednet" only.
Status load_train_data(const std::string& model, const std::string& prednet_config, const std::string& data_dir,
                       int batch_size, TrainData* out);

}  // namespace detaudit
