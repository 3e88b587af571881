// A Launch the worker accepted (worker/supervise/launch_admission.h), with what its ranks need:
// handed to RankRunner::Start once its checkpoints are copied and its code is unpacked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/job_paths.h"
#include "convoy/v1/worker.pb.h"
#include "worker/host/users.h"

namespace convoy {

struct LaunchPlan {
  v1::Launch launch;
  int first_rank = 0;  // the node's first rank (group_rank * local_world_size), for refusals
  std::vector<std::string> argv;
  JobDirs dirs;
  std::string dir_name;  // JobDirName: its directories' name
  // The user its ranks run as (the job's identity, its owner's account, or --run-as); unset:
  // the worker's own.
  std::optional<RunAsUser> user;
  // CONVOY_RESUME_FROM, resolved (or the copy's directory once it is made).
  std::string resume_from;
  // ResumeSource.checkpoint_file (resume_checkpoint: best): the one checkpoint in
  // `resume_from` (a directory then) the ranks start from; empty: the newest there.
  std::string resume_file;
  // Set while a copy of the resume_from job's checkpoints is to be made here (the two jobs'
  // identities differ): its directory in this job's.
  std::string copy_to;
};

}  // namespace convoy
