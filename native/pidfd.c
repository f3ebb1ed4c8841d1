// How a job ended when this process is not its parent (a job adopted after a crash, SPEC §19):
// since Linux 6.15 the kernel keeps a task's exit status in its pidfs inode when it is reaped,
// if a pidfd to it exists, and PIDFD_GET_INFO with PIDFD_INFO_EXIT reads it back, whoever reaped
// it (docs/durability.md "Exit status").
//
// pidfdOpen(pid) -> fd: a pidfd (close-on-exec) to the process `pid`; throws with errno.
// pidfdExit(fd) -> {code, signal} once the process was reaped (one of them null), or {why}: a
//   sentence saying why the status cannot be told (the kernel lacks PIDFD_INFO_EXIT, or the
//   process has not been reaped yet: `running` true then).
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/types.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

// The kernel's uapi (include/uapi/linux/pidfd.h, 6.15): older headers (Debian 12's) lack the
// exit field and its bit, so the struct and constants are ours, under our own names.
struct procctl_pidfd_info {
  __u64 mask;
  __u64 cgroupid;
  __u32 pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  __s32 exit_code;
};
#define PROCCTL_PIDFD_INFO_EXIT (1ULL << 3)
#define PROCCTL_PIDFD_GET_INFO _IOWR(0xFF, 11, struct procctl_pidfd_info)
_Static_assert(sizeof(struct procctl_pidfd_info) == 64, "PIDFD_INFO_SIZE_VER0 is 64 bytes");

static napi_value PidfdOpen(napi_env env, napi_callback_info info) {
  int32_t pid;
  if (!procctl_int32_args(env, info, 1, &pid) || pid <= 0) return procctl_throw_usage(env, "pidfdOpen(pid): a positive pid");
  long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (fd < 0) return procctl_throw_errno(env, errno, "pidfd_open");
  return procctl_int32(env, (int32_t)fd);
}

static napi_value why(napi_env env, const char *text, int running) {
  napi_value result = procctl_object(env);
  procctl_set_string(env, result, "why", text, NAPI_AUTO_LENGTH);
  procctl_set_bool(env, result, "running", running);
  return result;
}

static const char *OLD_KERNEL = "this kernel cannot tell a process's exit status to a process that is not its parent (PIDFD_INFO_EXIT, Linux 6.15 or later)";

static napi_value PidfdExit(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!procctl_int32_args(env, info, 1, &fd)) return procctl_throw_usage(env, "pidfdExit(fd)");
  struct procctl_pidfd_info pi;
  memset(&pi, 0, sizeof pi);
  pi.mask = PROCCTL_PIDFD_INFO_EXIT;
  if (ioctl(fd, PROCCTL_PIDFD_GET_INFO, &pi) != 0) {
    int err = errno;
    // ENOTTY/EINVAL: no PIDFD_GET_INFO (before 6.13); ESRCH: reaped, and no exit information kept (6.13, 6.14).
    if (err == ENOTTY || err == EINVAL || err == ESRCH) return why(env, OLD_KERNEL, 0);
    return procctl_throw_errno(env, err, "ioctl(PIDFD_GET_INFO)");
  }
  if (!(pi.mask & PROCCTL_PIDFD_INFO_EXIT)) {
    // Still alive (or a zombie not yet reaped): the kernel says its pid; else it will never say more.
    if (pi.mask & 1) return why(env, "the process has not been reaped yet", 1);
    return why(env, OLD_KERNEL, 0);
  }
  napi_value result = procctl_object(env);
  int status = pi.exit_code;
  if (WIFSIGNALED(status)) {
    procctl_set_null(env, result, "code");
    procctl_set_int32(env, result, "signal", WTERMSIG(status));
  } else {
    procctl_set_int32(env, result, "code", WEXITSTATUS(status));
    procctl_set_null(env, result, "signal");
  }
  return result;
}

// Called by addon.c, the module's one init.
void procctl_pidfd_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "pidfdOpen", PidfdOpen);
  procctl_export(env, exports, "pidfdExit", PidfdExit);
}
