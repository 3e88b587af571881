// A std::mutex that Clang's thread-safety analysis understands (libstdc++'s is not
// annotated), and the attribute macros, after Abseil's thread_annotations.h and LevelDB's
// port/thread_annotations.h. Build with clang and -Wthread-safety (CI does) to check that
// every member marked GUARDED_BY(mu_) is touched only with mu_ held. Abseil (which gRPC
// includes) may define the same macro names to the same attributes: the first one wins.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define CONVOY_TSA(x) __attribute__((x))
#else
#define CONVOY_TSA(x)
#endif

#ifndef CAPABILITY
#define CAPABILITY(x) CONVOY_TSA(capability(x))
#endif
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY CONVOY_TSA(scoped_lockable)
#endif
#ifndef GUARDED_BY
#define GUARDED_BY(x) CONVOY_TSA(guarded_by(x))
#endif
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) CONVOY_TSA(pt_guarded_by(x))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) CONVOY_TSA(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) CONVOY_TSA(acquired_after(__VA_ARGS__))
#endif
#ifndef REQUIRES
#define REQUIRES(...) CONVOY_TSA(requires_capability(__VA_ARGS__))
#endif
#ifndef EXCLUDES
#define EXCLUDES(...) CONVOY_TSA(locks_excluded(__VA_ARGS__))
#endif
#ifndef ACQUIRE
#define ACQUIRE(...) CONVOY_TSA(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) CONVOY_TSA(release_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) CONVOY_TSA(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) CONVOY_TSA(lock_returned(x))
#endif
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS CONVOY_TSA(no_thread_safety_analysis)
#endif

namespace convoy {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For code that must state that the caller holds it (no runtime check).
  void AssertHeld() const CONVOY_TSA(assert_capability(this)) {}

  // The underlying mutex, for std::condition_variable (see CondVar).
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for a scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable over a Mutex that the caller holds.
class CondVar {
 public:
  // Waits with `mu` held (released while blocked, held again on return).
  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Waits at most `timeout`; false when it timed out.
  template <typename Duration>
  bool WaitFor(Mutex& mu, Duration timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace convoy
