#include "common/coordinator_list.h"

#include <chrono>

namespace convoy {
namespace {

std::vector<std::string> Split(const std::string& coordinators) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= coordinators.size()) {
    size_t end = coordinators.find(',', start);
    if (end == std::string::npos) end = coordinators.size();
    if (end > start) out.push_back(coordinators.substr(start, end - start));
    start = end + 1;
  }
  if (out.empty()) out.push_back(coordinators);
  return out;
}

}  // namespace

CoordinatorList::CoordinatorList(const std::string& coordinators) : entries_(Split(coordinators)) {}

std::string CoordinatorList::current() const {
  MutexLock lock(mu_);
  return entries_[at_];
}

bool CoordinatorList::Next() {
  MutexLock lock(mu_);
  at_ = (at_ + 1) % entries_.size();
  ++failures_;
  return failures_ % entries_.size() == 0;
}

void CoordinatorList::MarkGood() {
  MutexLock lock(mu_);
  failures_ = 0;
}

std::shared_ptr<grpc::Channel> CoordinatorList::Connect(
    const std::function<std::shared_ptr<grpc::Channel>(const std::string&)>& make, int timeout_ms) {
  if (entries_.size() == 1) return make(entries_[0]);
  const std::string first = current();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const std::string target = current();
    std::shared_ptr<grpc::Channel> channel = make(target);
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
    grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
           state != GRPC_CHANNEL_SHUTDOWN && channel->WaitForStateChange(state, deadline)) {
      state = channel->GetState(true);
    }
    if (state == GRPC_CHANNEL_READY) {
      MarkGood();
      return channel;
    }
    Next();
  }
  return make(first);
}

}  // namespace convoy
