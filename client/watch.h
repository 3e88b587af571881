// `convoy watch`: follows a job's WatchJob stream until the job ends, showing one live line
// per rank (redrawn in place on a terminal; plain lines at most every 2 s otherwise; JSON
// lines with --output json). Reconnects for up to a minute when the stream breaks (e.g. a
// coordinator restart).
#pragma once

#include <string>

#include "convoy/v1/job.grpc.pb.h"

namespace convoy {

// Returns 0 when the job SUCCEEDED, 1 when it ended otherwise, 3/4/5 on RPC errors.
int WatchJob(v1::JobService::Stub& stub, const std::string& id, bool json, bool tty);

}  // namespace convoy
