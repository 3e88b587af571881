#include "trainer/spec_options.h"

#include <cstdlib>

#include "spec/trainer_spec_env.h"

namespace convoy::trainer {

void ApplyTrainerSpec(const v1::TrainerSpec& t, Options* o) {
  if (!t.model().empty()) o->model = t.model();
  if (t.has_epochs()) o->epochs = t.epochs();
  if (t.max_steps() > 0) o->max_steps = t.max_steps();
  if (t.has_batch_size()) o->batch_size = t.batch_size();
  if (t.has_lr()) o->lr = t.lr();
  if (t.has_momentum()) o->momentum = t.momentum();
  if (!t.optimizer().empty()) o->optimizer = t.optimizer();
  if (!t.lr_schedule().empty()) o->lr_schedule = t.lr_schedule();
  if (t.clip_grad_norm() > 0) o->clip_grad_norm = t.clip_grad_norm();
  if (t.has_accumulate()) o->accumulate = t.accumulate();
  if (t.has_bucket_mb()) o->bucket_mb = t.bucket_mb();
  if (t.checkpoint_every() > 0) o->checkpoint_every = t.checkpoint_every();
  if (t.has_snapshot_every()) o->snapshot_every = t.snapshot_every();
  if (!t.data_dir().empty()) o->data_dir = t.data_dir();
  if (t.has_seed()) o->seed = t.seed();
  if (!t.ddp().empty()) o->ddp = t.ddp();
  if (!t.allreduce().empty()) o->allreduce = t.allreduce();
  if (!t.amp().empty()) o->amp = t.amp();
  if (!t.compression().empty()) o->compression = t.compression();
  if (t.has_powersgd_rank()) o->powersgd_rank = t.powersgd_rank();
  if (t.powersgd_start_step() > 0) o->powersgd_start_step = t.powersgd_start_step();
}

std::string ReadTrainerSpecEnvironment(Options* o) {
  const char* text = std::getenv(kTrainerSpecEnv);
  if (text == nullptr) return "";
  auto trainer = DecodeTrainerSpec(text);
  if (!trainer.ok()) return trainer.status().message();
  ApplyTrainerSpec(*trainer, o);
  return "";
}

}  // namespace convoy::trainer
