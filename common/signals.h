// Shutdown signals for the daemons: blocked in every thread, awaited by main.
#pragma once

#include <signal.h>

namespace convoy {

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts after)
// and ignores SIGPIPE. Returns the set for sigwait. Call first thing in main.
inline sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

}  // namespace convoy
