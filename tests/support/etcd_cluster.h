// Real etcd members (Debian's etcd-server, /usr/bin/etcd) on loopback ports, for the tests of
// the etcd store and leader election (issue 30): started by the test, stopped and removed with
// their data when the object goes. Each member dies with the test process too
// (PR_SET_PDEATHSIG), so none is ever left running.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace convoy::testing {

class EtcdCluster {
 public:
  // Whether etcd is installed (tests skip with the reason when not).
  static bool Available();

  // Starts `members` members as one new cluster and waits (at most 30 s) until it has a
  // leader. Fails the test when it cannot.
  explicit EtcdCluster(int members = 1);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // HOST:PORT of every member's client URL, and the coordinator's --store form of them.
  std::vector<std::string> endpoints() const;
  std::string url() const;

  // kill -9 of member `i`; Start(i) brings it back on its data (it rejoins the cluster).
  void Kill(int i);
  void Start(int i);
  bool running(int i) const { return members_[i].pid > 0; }

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = 0;
  };
  TempDir dir_{"convoy-etcd"};
  std::vector<Member> members_;
  std::string initial_cluster_;
  bool started_once_ = false;
};

// One member for the whole test binary, started at the first call (a test that needs etcd
// checks Available() first and skips without it), stopped when the binary exits. Tests share
// it under prefixes of their own.
EtcdCluster& SharedEtcd();

// A key prefix no other user of SharedEtcd in any process has: "/t<pid>-<n>/".
std::string UniqueEtcdPrefix();

}  // namespace convoy::testing
