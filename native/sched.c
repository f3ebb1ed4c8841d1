// The calling thread's CPU priority. The daemon's sampling thread (src/runner/sample-thread.ts)
// reads every running session's cgroup and /proc files once a second; it asks the kernel to run
// it only when nothing else wants the CPU, so a request on the daemon's own thread preempts it at
// once. SCHED_IDLE is the lowest policy the kernel gives without privileges (below nice 19), and
// Node has no call for it: os.setPriority sets a nice value only.
//
// idleThread() -> true once the calling thread (not the process: Linux applies a pid of 0 to the
// caller alone) runs under SCHED_IDLE; throws with errno when the kernel refuses.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

static napi_value IdleThread(napi_env env, napi_callback_info info) {
  struct sched_param param = {.sched_priority = 0};
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return procctl_throw_errno(env, errno, "sched_setscheduler(SCHED_IDLE)");
  return procctl_bool(env, true);
}

// Called by addon.c, the module's one init.
void procctl_sched_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "idleThread", IdleThread);
}
