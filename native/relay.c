// A relay between two stream sockets that leaves the copying to the kernel: splice(2) from one
// socket into a pipe and from the pipe into the other, both ways, on one thread of its own that
// serves every relay through epoll. The network proxy (src/netproxy/) hands a tunnel's two
// sockets here once its CONNECT or SOCKS5 handshake is done: the bytes of a download then never
// cross into JavaScript, and the event loop is not woken for them.
//
// Each direction ends on its own (its source's end of stream becomes a shutdown of the other
// socket's writing side, once everything read has been written); the relay ends when both
// directions have, when either socket fails, or when JavaScript closes it. Then both sockets are
// closed and the callback hears how many bytes went each way.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

// How much one splice asks for at a time, and the pipe size asked for (the kernel may give less).
#define CHUNK (1 << 20)
#define PIPE_SIZE (1 << 20)

struct direction {
  int from, to;
  int pipe[2];
  size_t pending;  // bytes in the pipe, read from `from` and not yet written to `to`
  int eof, done;
  double bytes;    // written to `to`
};

struct relay;
struct endpoint {
  struct relay *relay;
};

struct relay {
  uint32_t id;
  int fd[2];
  struct direction dir[2];  // dir[0]: fd[0] -> fd[1]; dir[1]: fd[1] -> fd[0]
  struct endpoint ends[2];
  int close_asked;          // JavaScript asked it to close (under `lock`)
  napi_threadsafe_function on_end;
  struct relay *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct relay *relays;  // every live relay (under `lock`)
static uint32_t next_id = 1;
static int epfd = -1;
static int wakefd = -1;       // JavaScript wakes the thread here to close relays
static struct endpoint wake_end;

// Move what can be moved one way without blocking: 0, or -1 when the relay must end in failure.
static int pump(struct direction *d) {
  while (!d->done) {
    while (d->pending > 0) {
      ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        d->pending -= (size_t)n;
        d->bytes += (double)n;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        return 0;  // the other side is full: its EPOLLOUT brings us back
      } else {
        return -1;
      }
    }
    if (d->eof) {
      shutdown(d->to, SHUT_WR);
      d->done = 1;
      return 0;
    }
    // The pipe is empty here, so EAGAIN can only mean the source has nothing more for now.
    ssize_t n = splice(d->from, NULL, d->pipe[1], NULL, CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) d->pending += (size_t)n;
    else if (n == 0) d->eof = 1;
    else if (errno == EINTR) continue;
    else if (errno == EAGAIN) return 0;
    else return -1;
  }
  return 0;
}

struct ended {
  double bytes[2];
};

static void call_on_end(napi_env env, napi_value callback, void *context, void *data) {
  struct ended *e = data;
  if (env != NULL && callback != NULL) {
    napi_value args[2], undefined;
    napi_create_double(env, e->bytes[0], &args[0]);
    napi_create_double(env, e->bytes[1], &args[1]);
    napi_get_undefined(env, &undefined);
    napi_call_function(env, undefined, callback, 2, args, NULL);
  }
  free(e);
}

// On the relay thread: take it out of the list, close everything, tell JavaScript.
static void finish(struct relay *r) {
  pthread_mutex_lock(&lock);
  for (struct relay **p = &relays; *p; p = &(*p)->next) {
    if (*p == r) {
      *p = r->next;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < 2; i++) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, r->fd[i], NULL);
    close(r->fd[i]);
    close(r->dir[i].pipe[0]);
    close(r->dir[i].pipe[1]);
  }
  struct ended *e = malloc(sizeof *e);
  if (e) {
    e->bytes[0] = r->dir[0].bytes;
    e->bytes[1] = r->dir[1].bytes;
    if (napi_call_threadsafe_function(r->on_end, e, napi_tsfn_nonblocking) != napi_ok) free(e);
  }
  napi_release_threadsafe_function(r->on_end, napi_tsfn_release);
  free(r);
}

static void *relay_thread(void *unused) {
  struct epoll_event events[64];
  for (;;) {
    int n = epoll_wait(epfd, events, 64, -1);
    if (n < 0) continue;
    for (int i = 0; i < n; i++) {
      struct endpoint *end = events[i].data.ptr;
      if (end == &wake_end) {
        uint64_t count;
        while (read(wakefd, &count, sizeof count) > 0) {}
        // Finish every relay JavaScript asked to close. One at a time: finish() takes the lock.
        for (;;) {
          struct relay *asked = NULL;
          pthread_mutex_lock(&lock);
          for (struct relay *r = relays; r; r = r->next) {
            if (r->close_asked) {
              asked = r;
              break;
            }
          }
          pthread_mutex_unlock(&lock);
          if (!asked) break;
          // Later events of this batch may name it: they are skipped below by id lookup.
          for (int j = i + 1; j < n; j++) {
            struct endpoint *later = events[j].data.ptr;
            if (later != NULL && later != &wake_end && later->relay == asked) events[j].data.ptr = NULL;
          }
          finish(asked);
        }
        continue;
      }
      if (end == NULL) continue;
      struct relay *r = end->relay;
      int failed = pump(&r->dir[0]) < 0 || pump(&r->dir[1]) < 0;
      if (failed || (r->dir[0].done && r->dir[1].done)) {
        for (int j = i + 1; j < n; j++) {
          struct endpoint *later = events[j].data.ptr;
          if (later != NULL && later != &wake_end && later->relay == r) events[j].data.ptr = NULL;
        }
        finish(r);
      }
    }
  }
  return NULL;
}

// Start the thread and its epoll set once: 0, or an errno.
static int start_thread(void) {
  if (epfd >= 0) return 0;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return errno;
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int err = errno;
    close(ep);
    return err;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &wake_end};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev) < 0) {
    int err = errno;
    close(ep);
    close(wake);
    return err;
  }
  epfd = ep;
  wakefd = wake;
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&thread, &attr, relay_thread, NULL);
  pthread_attr_destroy(&attr);
  if (err) {
    close(ep);
    close(wake);
    epfd = wakefd = -1;
  }
  return err;
}

// close(): ask the thread to end the relay (it may have ended already: then nothing happens).
static napi_value RelayClose(napi_env env, napi_callback_info info) {
  void *data;
  napi_get_cb_info(env, info, NULL, NULL, NULL, &data);
  uint32_t id = (uint32_t)(uintptr_t)data;
  int found = 0;
  pthread_mutex_lock(&lock);
  for (struct relay *r = relays; r; r = r->next) {
    if (r->id == id) {
      r->close_asked = 1;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  if (found) {
    uint64_t one = 1;
    ssize_t ignored = write(wakefd, &one, sizeof one);
    (void)ignored;
  }
  return NULL;
}

// relay(fdA, fdB, onEnd(bytesAtoB, bytesBtoA)) -> close(): the two sockets become the relay's
// (it closes them); onEnd is called once, on the event loop, when the relay has ended.
static napi_value Relay(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fds[2];
  napi_valuetype type;
  if (argc < 3 || napi_get_value_int32(env, argv[0], &fds[0]) != napi_ok || napi_get_value_int32(env, argv[1], &fds[1]) != napi_ok ||
      fds[0] < 0 || fds[1] < 0 || napi_typeof(env, argv[2], &type) != napi_ok || type != napi_function) {
    return procctl_throw_usage(env, "relay(fdA, fdB, onEnd)");
  }
  int err = start_thread();
  if (err) return procctl_throw_errno(env, err, "relay: cannot start its thread");
  struct relay *r = calloc(1, sizeof *r);
  if (!r) return procctl_throw_errno(env, ENOMEM, "relay");
  for (int i = 0; i < 2; i++) r->dir[i].pipe[0] = r->dir[i].pipe[1] = -1;
  for (int i = 0; i < 2; i++) {
    if (pipe2(r->dir[i].pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
      err = errno;
      goto fail;
    }
    fcntl(r->dir[i].pipe[1], F_SETPIPE_SZ, PIPE_SIZE);  // a smaller pipe only means more turns
    int flags = fcntl(fds[i], F_GETFL);
    if (flags < 0 || fcntl(fds[i], F_SETFL, flags | O_NONBLOCK) < 0) {
      err = errno;
      goto fail;
    }
  }
  r->fd[0] = fds[0];
  r->fd[1] = fds[1];
  r->dir[0].from = r->dir[1].to = fds[0];
  r->dir[0].to = r->dir[1].from = fds[1];
  napi_value name;
  napi_create_string_utf8(env, "procctl.relay", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, NULL, call_on_end, &r->on_end) != napi_ok) {
    err = EINVAL;
    goto fail;
  }
  // It must not keep the daemon's loop alive by itself: what owns the sockets closes it.
  napi_unref_threadsafe_function(env, r->on_end);
  for (int i = 0; i < 2; i++) r->ends[i].relay = r;
  // Registered under the lock: the thread may serve the first socket at once, but cannot finish
  // (and free) the relay before this is done with it.
  pthread_mutex_lock(&lock);
  r->id = next_id++;
  if (next_id == 0) next_id = 1;
  uint32_t id = r->id;
  r->next = relays;
  relays = r;
  // Edge-triggered: the thread moves all it can on each event. Adding reports what is ready now.
  int added = 1;
  for (int i = 0; i < 2 && added; i++) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = &r->ends[i]};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0) added = 0;
  }
  // Should that fail, the thread ends it at once: onEnd still comes, with nothing moved.
  if (!added) r->close_asked = 1;
  pthread_mutex_unlock(&lock);
  if (!added) {
    uint64_t one = 1;
    ssize_t ignored = write(wakefd, &one, sizeof one);
    (void)ignored;
  }
  napi_value close_fn;
  napi_create_function(env, "close", NAPI_AUTO_LENGTH, RelayClose, (void *)(uintptr_t)id, &close_fn);
  return close_fn;

fail:
  for (int i = 0; i < 2; i++) {
    if (r->dir[i].pipe[0] >= 0) close(r->dir[i].pipe[0]);
    if (r->dir[i].pipe[1] >= 0) close(r->dir[i].pipe[1]);
  }
  free(r);
  return procctl_throw_errno(env, err, "relay");
}

// dupDescriptor(fd) -> a new descriptor for the same socket (close-on-exec), so the relay can own
// it while Node closes its own.
static napi_value DupDescriptor(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!procctl_int32_args(env, info, 1, &fd) || fd < 0) return procctl_throw_usage(env, "dupDescriptor(fd)");
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) return procctl_throw_errno(env, errno, "dupDescriptor");
  return procctl_int32(env, copy);
}

// shutdownRead(fd): nothing more is read from this socket, and (a Unix stream socket) the peer's
// further writes fail with EPIPE: a restart's last moment answers every request it holds, and a
// client never writes one that no image reads (SPEC §19).
static napi_value ShutdownRead(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!procctl_int32_args(env, info, 1, &fd) || fd < 0) return procctl_throw_usage(env, "shutdownRead(fd)");
  if (shutdown(fd, SHUT_RD) < 0 && errno != ENOTCONN) return procctl_throw_errno(env, errno, "shutdownRead");
  return NULL;
}

void procctl_relay_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "relay", Relay);
  procctl_export(env, exports, "dupDescriptor", DupDescriptor);
  procctl_export(env, exports, "shutdownRead", ShutdownRead);
}
