// `convoy ui`: the coordinator's web UI (README "The web UI").
#pragma once

#include <string>

#include "client/commands.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// The login URL of `link` (JobService.CreateUiLogin): its scheme, host and port, and the
// path with the one-time code in its fragment. Without a host in the answer (the UI listens
// on every interface), the host of --coordinator when it names one coordinator, else the
// host of `peer` (the gRPC peer that answered, "ipv4:10.0.0.5:7070"). With `job`, the
// login page goes on to that job's page.
std::string UiLoginUrl(const v1::CreateUiLoginResponse& link, const std::string& coordinators,
                       const std::string& peer, const std::string& job = "");

// Asks the coordinator for a one-time login link, valid a minute, and prints its URL on
// stdout; with `open`, opens it with $BROWSER or xdg-open (without a shell). The browser
// exchanges it for a session bound to this CLI's token and role. `job`: open at its page.
int UiCommand(CoordinatorClient& c, const std::string& coordinators, const std::string& job,
              bool open);

}  // namespace convoy
