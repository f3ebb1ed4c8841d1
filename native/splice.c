// A job's output pipe moved into its spool file by the kernel (splice(2)), so that what has left
// the pipe is in the file whatever happens to the daemon next (a SIGKILL included): the daemon
// never holds output it has read and not yet written (docs/durability.md).
//
// splicePipe(pipe, target, buffer, onBatch) -> { pause(), resume(), close() }
//   A uv_poll_t on the pipe: when it is readable, splice into target's file at target's offset
//   (never more than target's room: the end of the spool's segment, the disk budget) until the
//   pipe is empty, read the new bytes back (pread, from the page cache) into `buffer`, and call
//   onBatch(n, status) once per batch of at most buffer.length bytes. With target's file set to
//   -1 it reads the pipe into `buffer` instead (the spool's own write path); with -2 (as made) it
//   asks first, with status 1 and no bytes, once the pipe has bytes queued (a pipe readable with
//   none is at its end: status 2, so a session that prints nothing opens no file). status:
//     0  more may come (the pipe was emptied, or the batch filled the buffer)
//     1  target's room is spent: set a new one or read mode (target.set) before returning
//     2  end of file: no writer is left; the poll is stopped
//    <0  -errno: splice, read or pread failed (-EINVAL: this file takes no splice); stopped
//   The pipe's descriptor is never closed here: JavaScript owns it (a restart hands it on).
//
// spliceTarget() -> { set(fd, offset, room), offset() }
//   Where every pipe of one session goes: stdout and stderr share it, so the file holds their
//   output in the order the daemon took it.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <uv.h>
#include <node_api.h>
#include "errors.h"
#include "handle.h"

enum { MORE = 0, ROOM = 1, END = 2 };

// target.fd: read the pipes into the buffer (READ), or ask JavaScript where to go first (ASK).
enum { READ = -1, ASK = -2 };

typedef struct {
  int fd;        // the spool's current segment, or -1: read mode
  loff_t off;    // where the next spliced byte goes in it
  int64_t room;  // bytes it may still take
  int refs;      // JavaScript's handle and each pipe using it
} target_t;

static void target_unref(target_t *t) {
  if (--t->refs == 0) free(t);
}

typedef struct {
  procctl_handle_t h;  // its life: the poll on the pipe, pause/resume/close, onBatch (handle.h)
  napi_ref buffer_ref;
  target_t *target;
  char *buf;
  size_t buflen;
  int pipe;
  int grown;  // the pipe was asked to hold FAST_PIPE_BYTES (once)
} pipe_t;

// A pipe that fills a whole batch belongs to a fast producer: it is made to hold this much, so the
// producer blocks (and the daemon wakes) a quarter as often, as a socket pair's ~208 KiB did. Only
// such pipes grow: every pipe at this size would use up an unprivileged user's pipe pages
// (fs.pipe-user-pages-soft) after a few hundred sessions; a refusal leaves the pipe as it was.
#define FAST_PIPE_BYTES (256 * 1024)

static void grow_if_full(pipe_t *p, size_t got) {
  if (p->grown || got < p->buflen) return;
  p->grown = 1;
  (void)fcntl(p->pipe, F_SETPIPE_SZ, FAST_PIPE_BYTES);
}

// Once libuv is done with the poll: the buffer and the target let go.
static void pipe_release(procctl_handle_t *h) {
  pipe_t *p = (pipe_t *)h;
  napi_delete_reference(h->env, p->buffer_ref);
  target_unref(p->target);
}

// onBatch(n, status).
static void pipe_call(pipe_t *p, int64_t n, int status) {
  const int64_t args[2] = {n, status};
  procctl_handle_call(&p->h, 2, args);
}

// Read back [off, off + n) of the file just spliced into (the page cache holds it).
static int read_back(int fd, char *buf, size_t n, loff_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, off + (loff_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? errno : EIO;
    got += (size_t)r;
  }
  return 0;
}

// Readable before any target was asked for: JavaScript is asked only when there are bytes to put
// somewhere. A pipe that is readable and holds none has no writer left (a job that printed nothing
// and exited): its end, with no file opened for it (creating one cost 0.1-0.3 ms on ext4, between
// the job's exit and the answer). A read settles it either way: 0 is that end, EAGAIN a wake-up
// with nothing behind it, and bytes that came since are handed on as a read (read mode's batch).
static int pipe_ask(pipe_t *p, int64_t *n) {
  int queued = 0;
  if (ioctl(p->pipe, FIONREAD, &queued) != 0 || queued > 0) return ROOM;
  ssize_t r;
  do r = read(p->pipe, p->buf, p->buflen);
  while (r < 0 && errno == EINTR);
  if (r > 0) *n = r;
  return r > 0 ? MORE : r == 0 ? END : -errno;
}

// One batch: spliced (or read) into the buffer; returns its status, *n its size.
static int pipe_batch(pipe_t *p, int64_t *n) {
  target_t *t = p->target;
  *n = 0;
  if (t->fd == ASK) return pipe_ask(p, n);
  if (t->fd < 0) {
    ssize_t r;
    do r = read(p->pipe, p->buf, p->buflen);
    while (r < 0 && errno == EINTR);
    if (r > 0) {
      *n = r;
      grow_if_full(p, (size_t)r);
    }
    return r > 0 ? MORE : r == 0 ? END : -errno;
  }
  size_t total = 0;
  int status = MORE;
  loff_t start = t->off;
  int fd = t->fd;
  while (total < p->buflen) {
    if (t->room <= 0) {
      status = ROOM;
      break;
    }
    size_t want = p->buflen - total;
    if ((int64_t)want > t->room) want = (size_t)t->room;
    ssize_t r = splice(p->pipe, NULL, fd, &t->off, want, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (r > 0) {
      total += (size_t)r;
      t->room -= r;
      continue;
    }
    if (r == 0) status = END;
    else if (errno == EINTR) continue;
    else status = errno == EAGAIN ? -EAGAIN : -errno;
    break;
  }
  *n = (int64_t)total;
  grow_if_full(p, total);
  if (total > 0) {
    int err = read_back(fd, p->buf, total, start);
    if (err != 0) return -err;
  }
  return status;
}

static void pipe_readable(uv_poll_t *handle, int status, int events) {
  pipe_t *p = (pipe_t *)handle->data;
  (void)events;
  if (status < 0) {
    pipe_call(p, 0, status);
    procctl_handle_stop(&p->h);
    return;
  }
  // A bounded number of batches, then back to the loop (level-triggered: it comes back), so one
  // fast job cannot keep the others' output waiting.
  for (int round = 0; round < 16 && !p->h.stopped && !p->h.paused; round++) {
    int64_t n;
    int fd = p->target->fd;
    int st = pipe_batch(p, &n);
    if (st == -EAGAIN) {
      if (n > 0) pipe_call(p, n, MORE);
      return;
    }
    pipe_call(p, n, st);
    if (p->h.stopped) return;
    // A splice that failed, and JavaScript turned to another file or to reading: go on that way.
    if (st < 0 && fd >= 0 && p->target->fd != fd) continue;
    if (st == END || st < 0) {
      procctl_handle_stop(&p->h);
      return;
    }
    if (st == ROOM && (p->target->fd == ASK || (p->target->fd >= 0 && p->target->room <= 0))) return;  // nothing set: wait for the next turn
  }
}

static const procctl_handle_kind_t pipe_kind = {"splicePipe", "procctl.splice", pipe_readable, pipe_release};

static void target_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  target_unref((target_t *)data);
}

static target_t *target_of(napi_env env, napi_value obj) {
  void *t = NULL;
  if (napi_unwrap(env, obj, &t) != napi_ok) return NULL;
  return (target_t *)t;
}

static napi_value TargetSet(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  target_t *t = NULL;
  int32_t fd;
  int64_t off = 0, room = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&t) != napi_ok || !t || argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
      (fd >= 0 && (argc < 3 || napi_get_value_int64(env, argv[1], &off) != napi_ok || napi_get_value_int64(env, argv[2], &room) != napi_ok || off < 0))) {
    napi_throw_type_error(env, NULL, "target.set(fd, offset, room), set(-1) to read, or set(-2) to ask");
    return NULL;
  }
  t->fd = fd < 0 ? (fd == ASK ? ASK : READ) : fd;
  t->off = fd < 0 ? 0 : (loff_t)off;
  t->room = fd < 0 ? 0 : room;
  return NULL;
}

static napi_value TargetOffset(napi_env env, napi_callback_info info) {
  target_t *t = NULL;
  napi_value out;
  napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&t);
  napi_create_int64(env, t ? (int64_t)t->off : -1, &out);
  return out;
}

static napi_value SpliceTarget(napi_env env, napi_callback_info info) {
  (void)info;
  target_t *t = calloc(1, sizeof *t);
  if (!t) return procctl_throw_errno(env, ENOMEM, "spliceTarget");
  t->fd = ASK;
  t->refs = 1;
  napi_value obj, set_fn, off_fn;
  napi_create_object(env, &obj);
  if (napi_wrap(env, obj, t, target_finalize, NULL, NULL) != napi_ok) {
    free(t);
    napi_throw_error(env, NULL, "spliceTarget: cannot wrap");
    return NULL;
  }
  napi_create_function(env, "set", NAPI_AUTO_LENGTH, TargetSet, t, &set_fn);
  napi_create_function(env, "offset", NAPI_AUTO_LENGTH, TargetOffset, t, &off_fn);
  napi_set_named_property(env, obj, "set", set_fn);
  napi_set_named_property(env, obj, "offset", off_fn);
  return obj;
}

static napi_value SplicePipe(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  int32_t fd;
  napi_valuetype type;
  bool is_buffer = false;
  target_t *t;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0 ||
      !(t = target_of(env, argv[1])) || napi_is_buffer(env, argv[2], &is_buffer) != napi_ok || !is_buffer || napi_typeof(env, argv[3], &type) != napi_ok ||
      type != napi_function) {
    napi_throw_type_error(env, NULL, "splicePipe(fd, target, buffer, onBatch): a descriptor, a spliceTarget(), a Buffer and a function");
    return NULL;
  }
  int err = procctl_set_nonblock(fd);
  if (err != 0) return procctl_throw_errno(env, err, "splicePipe: fcntl");
  pipe_t *p = calloc(1, sizeof *p);
  if (!p) return procctl_throw_errno(env, ENOMEM, "splicePipe");
  void *data;
  size_t len;
  napi_get_buffer_info(env, argv[2], &data, &len);
  p->buf = data;
  p->buflen = len;
  p->pipe = fd;
  p->target = t;
  t->refs++;
  napi_create_reference(env, argv[2], 1, &p->buffer_ref);
  static const char *const what[] = {"splicePipe"};
  return procctl_handle_start(env, &p->h, &pipe_kind, 1, &fd, what, argv[3]);
}

// Called by addon.c, the module's one init.
void procctl_splice_init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "spliceTarget", NAPI_AUTO_LENGTH, SpliceTarget, NULL, &fn);
  napi_set_named_property(env, exports, "spliceTarget", fn);
  napi_create_function(env, "splicePipe", NAPI_AUTO_LENGTH, SplicePipe, NULL, &fn);
  napi_set_named_property(env, exports, "splicePipe", fn);
}
