// Directories whose listings are kept while nothing changes in them (src/sandbox/listings.ts):
// an inotify instance read on demand, on the caller's thread, so a change the kernel has queued
// before the call is in its answer. No watch is read by the event loop: a change made just before
// a request cannot lose a race with it.
//
// dirWatchOpen() -> fd: a new inotify instance (non-blocking, close-on-exec); throws with errno.
// dirWatchAdd(fd, path) -> wd > 0, or -errno (ENOSPC when the user's watches are spent, ENOENT,
//   ENOTDIR): a watch on the directory itself (a symbolic link is not followed) for entries made,
//   removed or renamed in it, for it being removed or renamed, and for a change of its own or an
//   entry's mode or owner (IN_ATTRIB: what the walk may list).
// dirWatchDrain(fd) -> [wd, mask, name, wd, mask, name, ...]: every event queued now, flat
//   (name "" where the event has none); wd -1 with IN_Q_OVERFLOW when the kernel dropped some.
#define _GNU_SOURCE
#include <errno.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

#define DIR_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW)

static napi_value DirWatchOpen(napi_env env, napi_callback_info info) {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return procctl_throw_errno(env, errno, "inotify_init1");
  return procctl_int32(env, fd);
}

static napi_value DirWatchAdd(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_int32(env, args[0], &fd) != napi_ok) {
    return procctl_throw_usage(env, "dirWatchAdd(fd, path)");
  }
  char *path = procctl_c_string(env, args[1]);
  if (!path) return procctl_throw_usage(env, "dirWatchAdd(fd, path): a path without NUL bytes");
  int wd = inotify_add_watch(fd, path, DIR_EVENTS);
  int err = errno;
  free(path);
  return procctl_int32(env, wd < 0 ? -err : wd);
}

static void push(napi_env env, napi_value list, uint32_t *n, napi_value v) {
  napi_set_element(env, list, (*n)++, v);
}

static napi_value DirWatchDrain(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!procctl_int32_args(env, info, 1, &fd)) return procctl_throw_usage(env, "dirWatchDrain(fd)");
  napi_value list;
  napi_create_array(env, &list);
  uint32_t n = 0;
  char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) break;
    if (got < 0) return procctl_throw_errno(env, errno, "read of an inotify instance");
    if (got == 0) break;
    for (char *p = buf; p < buf + got;) {
      const struct inotify_event *e = (const struct inotify_event *)p;
      napi_value name;
      napi_create_string_utf8(env, e->len > 0 ? e->name : "", NAPI_AUTO_LENGTH, &name);
      push(env, list, &n, procctl_int32(env, e->wd));
      push(env, list, &n, procctl_int32(env, (int32_t)e->mask));
      push(env, list, &n, name);
      p += sizeof *e + e->len;
    }
  }
  return list;
}

// Called by addon.c, the module's one init.
void procctl_dirwatch_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "dirWatchOpen", DirWatchOpen);
  procctl_export(env, exports, "dirWatchAdd", DirWatchAdd);
  procctl_export(env, exports, "dirWatchDrain", DirWatchDrain);
}
