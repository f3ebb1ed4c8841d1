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
#include <sys/prctl.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

static napi_value IdleThread(napi_env env, napi_callback_info info) {
  struct sched_param param = {.sched_priority = 0};
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return procctl_throw_errno(env, errno, "sched_setscheduler(SCHED_IDLE)");
  return procctl_bool(env, true);
}

// nameThread(name): the calling thread's name as ps, top -H and /proc/<pid>/task/*/comm show it
// (the kernel keeps 15 bytes). Node names none of its threads.
static napi_value NameThread(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg;
  char name[16];
  size_t len;
  if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) != napi_ok) return NULL;
  if (argc < 1 || napi_get_value_string_utf8(env, arg, name, sizeof name, &len) != napi_ok) return procctl_throw_usage(env, "nameThread(name: string)");
  if (prctl(PR_SET_NAME, name, 0, 0, 0) != 0) return procctl_throw_errno(env, errno, "prctl(PR_SET_NAME)");
  return procctl_bool(env, true);
}

// yieldCpu(): sched_yield for the calling thread: a thread ready on this CPU (the client woken by
// the answer just written) runs before the daemon's own work after it (src/base/yield-cpu.ts).
static napi_value YieldCpu(napi_env env, napi_callback_info info) {
  sched_yield();
  return NULL;
}

// Called by addon.c, the module's one init.
void procctl_sched_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "idleThread", IdleThread);
  procctl_export(env, exports, "nameThread", NameThread);
  procctl_export(env, exports, "yieldCpu", YieldCpu);
}
