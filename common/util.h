// Small helpers shared by the daemons and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace convoy {

// Splits "HOST:PORT" (or "[v6]:PORT"). Error names `flag` when the text is malformed.
StatusOr<std::pair<std::string, int>> ParseHostPort(const std::string& text,
                                                    const std::string& flag);

// "A:1,B:2": each part as ParseHostPort takes it (the error names `flag`), in order.
StatusOr<std::vector<std::pair<std::string, int>>> ParseHostPortList(const std::string& text,
                                                                     const std::string& flag);

// The HOST:PORT parts of --coordinator ("A:7070" or "A:7070,B:7070"), each checked as
// ParseHostPort does (the error names `flag`); and of them the host that decides whether
// plain text is allowed: the first that is not loopback, else the first.
StatusOr<std::string> CheckCoordinators(const std::string& coordinators, const std::string& flag);

// A size in bytes as Kubernetes writes quantities: a number of bytes, or a number with a unit:
// Ki, Mi, Gi, Ti (powers of 1024) or K, M, G, T (powers of 1000). Nothing when `text` is not
// such a size, or (`*overflow` set) when it is one that does not fit in 64 bits. The callers
// (the spec's memory_per_proc, the worker's --memory) name the field in their errors.
std::optional<int64_t> ParseByteQuantity(const std::string& text, bool* overflow);

// True for "localhost", 127.0.0.0/8 and ::1: where plain text (--insecure) may be used.
bool IsLoopbackHost(const std::string& host);

// "SIGKILL" for 9, "signal 64" for an unknown number.
std::string SignalName(int signal);

// "64 GiB", "512 MiB", "1.5 TiB": a size in binary units, for logs and messages.
std::string HumanBytes(int64_t bytes);

// True when `name` is a valid job or worker name: [A-Za-z0-9._-], 1..63 characters, not
// starting with '.' or '-'.
bool IsValidName(const std::string& name);

// A new random 128-bit identity (a job's uid, a cluster's id): 32 lower-case hex characters
// from the kernel's random source (getrandom). Never fails: aborts if the kernel cannot give
// randomness, which it always can once booted.
std::string RandomHexId();

// A unix time in seconds as ISO 8601 UTC to the second: "2026-11-26T23:19:00Z".
std::string UtcIso8601(int64_t unix_s);

// True when `id` has the form RandomHexId makes: exactly 32 characters of [0-9a-f].
bool IsHexId(const std::string& id);

}  // namespace convoy
