#include "client/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace convoy {

std::string DefaultConfigPath() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/convoy/config.yaml";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.config/convoy/config.yaml";
}

StatusOr<ClientConfig> LoadClientConfig(const std::string& path) {
  ClientConfig config;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return config;
    return Status::InvalidArgument(path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    return Status::InvalidArgument(path + " holds a token but others may read it (mode " + mode +
                                   "): run `chmod 600 " + path + "`");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(path + ": line " + std::to_string(e.mark.line + 1) + ": " +
                                   e.msg);
  }
  if (root.IsNull()) return config;
  if (!root.IsMap()) return Status::InvalidArgument(path + ": expected a mapping");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const int line = kv.first.Mark().line + 1;
    if (!kv.second.IsScalar()) {
      return Status::InvalidArgument(path + ": line " + std::to_string(line) + ": " + key +
                                     " must be a string");
    }
    const std::string value = kv.second.as<std::string>();
    if (key == "coordinator") {
      config.coordinator = value;
    } else if (key == "ca") {
      config.ca_pem = value;
    } else if (key == "token") {
      config.token = value;
    } else {
      return Status::InvalidArgument(path + ": line " + std::to_string(line) + ": unknown key '" +
                                     key + "' (known: coordinator, ca, token)");
    }
  }
  return config;
}

Status SaveClientConfig(const std::string& path, const ClientConfig& config) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::InvalidArgument(dir.string() + ": " + ec.message());
    chmod(dir.c_str(), 0700);
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "coordinator" << YAML::Value << config.coordinator;
  if (!config.ca_pem.empty())
    out << YAML::Key << "ca" << YAML::Value << YAML::Literal << config.ca_pem;
  out << YAML::Key << "token" << YAML::Value << config.token;
  out << YAML::EndMap;
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::InvalidArgument(tmp + ": " + std::strerror(errno));
  fchmod(fd, 0600);
  const std::string data = std::string(out.c_str()) + "\n";
  const bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::InvalidArgument(path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace convoy
