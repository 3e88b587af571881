// systemd's notification protocol for convoy-coordinator.service (Type=notify,
// WatchdogSec=): READY=1 once the gRPC port serves, WATCHDOG=1 while the ticker advances,
// STOPPING=1 on shutdown. Every call is a no-op when NOTIFY_SOCKET is unset (not started
// by systemd), so main calls them unconditionally.
#pragma once

#include <cstdint>
#include <string>

namespace convoy {

// Sends READY=1 with a STATUS= line. Thread-safe (one datagram).
void NotifyReady(const std::string& status);
// Sends STOPPING=1.
void NotifyStopping();
// Sends WATCHDOG=1.
void NotifyWatchdog();
// The watchdog interval systemd asked for (WATCHDOG_USEC, when WATCHDOG_PID is unset or this
// process), in microseconds; 0 when there is no watchdog.
uint64_t WatchdogIntervalUs();

}  // namespace convoy
