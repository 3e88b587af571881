// Where the CLI finds its coordinator, CA and token (README "Securing a cluster"), like a
// kubeconfig: a flag, else an environment variable, else ~/.config/convoy/config.yaml
// (written by `convoy login`, mode 0600; refused when group or others may read it, since it
// holds a bearer token).
//
//   coordinator: coord.example:7070
//   ca: |                       # the cluster CA's certificate (PEM)
//     -----BEGIN CERTIFICATE-----
//     ...
//   token: cvy_....
#pragma once

#include <string>

#include "common/status.h"

namespace convoy {

struct ClientConfig {
  std::string coordinator;
  std::string ca_pem;
  std::string token;
  // Plain text: --insecure, or nothing configured and a loopback coordinator.
  bool insecure = false;
};

// $XDG_CONFIG_HOME/convoy/config.yaml, else ~/.config/convoy/config.yaml.
std::string DefaultConfigPath();

// Reads `path`; an absent file is an empty config. Errors name the file (and the key).
StatusOr<ClientConfig> LoadClientConfig(const std::string& path);

// Writes `config` to `path` with mode 0600 (its directory made 0700 when absent).
Status SaveClientConfig(const std::string& path, const ClientConfig& config);

}  // namespace convoy
