// A TokenBackend in memory for unit tests: tokens and worker-certificate records, what was
// asked of it (counted), and a gate that holds ForgetCertificate (a slow store). No poller
// (poll_ms 0): a TokenStore on it reads it at Open and for an unknown id only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "coordinator/store/token_store.h"

namespace convoy {

class MemoryTokenBackend : public TokenBackend {
 public:
  int64_t poll_ms() const override { return 0; }
  StatusOr<bool> MayHaveChanged() override {
    MutexLock lock(mu_);
    ++asked_;
    return true;
  }
  StatusOr<std::vector<TokenRow>> LoadAll() override {
    MutexLock lock(mu_);
    ++asked_;
    std::vector<TokenRow> rows;
    for (const auto& [id, row] : rows_) rows.push_back(row);
    return rows;
  }
  Status Insert(const TokenRow& row) override {
    MutexLock lock(mu_);
    rows_[row.record.id] = row;
    return Status::Ok();
  }
  StatusOr<std::vector<std::string>> Revoke(const std::string& id,
                                            const std::string& user) override {
    MutexLock lock(mu_);
    std::vector<std::string> ids;
    for (auto& [rid, row] : rows_) {
      if ((rid == id || row.record.user == user) && !row.record.revoked) {
        row.record.revoked = true;
        ids.push_back(rid);
      }
    }
    return ids;
  }
  StatusOr<bool> TakeUse(const std::string& id) override {
    MutexLock lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end() || it->second.record.uses_left <= 0) return false;
    --it->second.record.uses_left;
    return true;
  }
  Status WriteLastUsed(const std::map<std::string, int64_t>&) override { return Status::Ok(); }
  Status RecordCertificate(const std::string& name, int64_t not_after_s) override {
    MutexLock lock(mu_);
    certs_[name] = not_after_s;
    return Status::Ok();
  }
  StatusOr<int64_t> CertificateNotAfter(const std::string& name) override {
    MutexLock lock(mu_);
    auto it = certs_.find(name);
    return it == certs_.end() ? int64_t{0} : it->second;
  }
  StatusOr<bool> ForgetCertificate(const std::string& name) override {
    MutexLock lock(mu_);
    forgetting_ = true;
    forgetting_cv_.SignalAll();
    while (shut_) open_cv_.Wait(mu_);
    return certs_.erase(name) > 0;
  }

  // How many times the tokens were read or asked whether they changed.
  int asked() {
    MutexLock lock(mu_);
    return asked_;
  }
  // ForgetCertificate waits from Shut to Open.
  void Shut() {
    MutexLock lock(mu_);
    shut_ = true;
  }
  void Open() {
    MutexLock lock(mu_);
    shut_ = false;
    open_cv_.SignalAll();
  }
  // Waits until a ForgetCertificate has begun.
  void WaitForgetting() {
    MutexLock lock(mu_);
    while (!forgetting_) forgetting_cv_.Wait(mu_);
  }

 private:
  Mutex mu_;
  CondVar open_cv_, forgetting_cv_;
  std::map<std::string, TokenRow> rows_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> certs_ GUARDED_BY(mu_);
  int asked_ GUARDED_BY(mu_) = 0;
  bool shut_ GUARDED_BY(mu_) = false;
  bool forgetting_ GUARDED_BY(mu_) = false;
};

}  // namespace convoy
