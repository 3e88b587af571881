// Linked into every test binary of a ThreadSanitizer build (CONVOY_SANITIZE=thread), never into
// the daemons: tells TSAN the ordering that Debian's gRPC guarantees, which it cannot see.
//
// Debian's gRPC and Abseil are not built with -fsanitize=thread. gRPC hands work from one
// thread to another (a queued closure, a finished batch, a poller woken up) under absl::Mutex
// and through its completion queues, all inside uninstrumented code: TSAN sees no
// happens-before edge there, and reports every reactor member written before an operation and
// read in its callback on another thread (a reactor's constructor against its OnDone, gRPC's
// own CallOpSet between StartWrite and OnWriteDone) as a race.
//
// The definitions below interpose functions that Debian's libgrpc, libgrpc++ and libgpr import
// from another shared library (nm -D --undefined-only): the executable's definition wins at
// dynamic link time. Each calls the library's own function (dlsym RTLD_NEXT) and tells TSAN
// what it guarantees:
//  - absl::Mutex and absl::CondVar (libgrpc and libgpr lock with them): Lock acquires, Unlock
//    releases, a wait releases before and acquires after. No lock-order checking is added:
//    gRPC's locks are not ours to check. Convoy's own locks (common/mutex.h, std::mutex) are
//    seen by TSAN without help.
//  - gRPC's documented contract for a batch: what a thread did before grpc_call_start_batch
//    (or grpc_server_request_call) with tag T happens before the thread that gets T's
//    completion from grpc_completion_queue_next or _pluck (the callback API's completions are
//    delivered that way too) runs the callback.
// Nothing here hides an access: a race in Convoy's code, or a misuse of gRPC's API (two writes
// outstanding on one stream), is still reported.
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

template <typename F>
F Real(const char* symbol) {
  void* p = dlsym(RTLD_NEXT, symbol);
  if (p == nullptr) {
    std::fprintf(stderr, "tsan grpc_happens_before: %s not found: %s\n", symbol, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(p);
}

// The Itanium mangling of an absl:: member, with the header's inline namespace (e.g. debian3).
#define CONVOY_STR2(x) #x
#define CONVOY_STR(x) CONVOY_STR2(x)
std::string AbslSymbol(const char* rest) {
  const std::string ns = CONVOY_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
}

void AcquireCompletion(const grpc_event& ev) {
  if (ev.type == GRPC_OP_COMPLETE && ev.tag != nullptr) __tsan_acquire(ev.tag);
}

}  // namespace

// ---- absl::Mutex, absl::CondVar

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>(AbslSymbol("5Mutex4LockEv").c_str());
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>(AbslSymbol("5Mutex6UnlockEv").c_str());
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>(AbslSymbol("5Mutex7TryLockEv").c_str());
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void CondVar::Wait(Mutex* mu) {
  static auto real =
      Real<void (*)(CondVar*, Mutex*)>(AbslSymbol("7CondVar4WaitEPNS0_5MutexE").c_str());
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      AbslSymbol("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE").c_str());
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      AbslSymbol("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE").c_str());
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl

// ---- gRPC batches and completion queues

extern "C" {

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                      void* reserved) {
  static auto real = Real<grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*)>(
      "grpc_call_start_batch");
  if (tag != nullptr) __tsan_release(tag);
  return real(call, ops, nops, tag, reserved);
}

grpc_call_error grpc_server_request_call(grpc_server* server, grpc_call** call,
                                         grpc_call_details* details,
                                         grpc_metadata_array* request_metadata,
                                         grpc_completion_queue* cq_bound_to_call,
                                         grpc_completion_queue* cq_for_notification,
                                         void* tag_new) {
  static auto real =
      Real<grpc_call_error (*)(grpc_server*, grpc_call**, grpc_call_details*, grpc_metadata_array*,
                               grpc_completion_queue*, grpc_completion_queue*, void*)>(
          "grpc_server_request_call");
  if (tag_new != nullptr) __tsan_release(tag_new);
  return real(server, call, details, request_metadata, cq_bound_to_call, cq_for_notification,
              tag_new);
}

grpc_call_error grpc_server_request_registered_call(grpc_server* server, void* registered_method,
                                                    grpc_call** call, gpr_timespec* deadline,
                                                    grpc_metadata_array* request_metadata,
                                                    grpc_byte_buffer** optional_payload,
                                                    grpc_completion_queue* cq_bound_to_call,
                                                    grpc_completion_queue* cq_for_notification,
                                                    void* tag_new) {
  static auto real = Real<grpc_call_error (*)(
      grpc_server*, void*, grpc_call**, gpr_timespec*, grpc_metadata_array*, grpc_byte_buffer**,
      grpc_completion_queue*, grpc_completion_queue*, void*)>(
      "grpc_server_request_registered_call");
  if (tag_new != nullptr) __tsan_release(tag_new);
  return real(server, registered_method, call, deadline, request_metadata, optional_payload,
              cq_bound_to_call, cq_for_notification, tag_new);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                      void* reserved) {
  static auto real = Real<grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*)>(
      "grpc_completion_queue_next");
  const grpc_event ev = real(cq, deadline, reserved);
  AcquireCompletion(ev);
  return ev;
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag, gpr_timespec deadline,
                                       void* reserved) {
  static auto real = Real<grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*)>(
      "grpc_completion_queue_pluck");
  const grpc_event ev = real(cq, tag, deadline, reserved);
  AcquireCompletion(ev);
  return ev;
}

}  // extern "C"
