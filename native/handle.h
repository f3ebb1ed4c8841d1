// The life of a spliced handle (splice.c: a job's pipe into its spool; tap.c: a terminal's master
// into its tap pipe), owned here once: its uv_poll_t handles on the daemon's loop, started, held
// (pause), started again (resume), stopped and closed; the JavaScript callback it calls from the
// loop; and the object { pause(), resume(), close() } JavaScript holds it by. What each kind does
// when its descriptor is ready (the splices) stays in its own file, as the kind's poll callback.
//
// A kind's struct starts with a procctl_handle_t (so a handle and its kind's struct are one
// allocation, calloc'd by the kind); every poll's data points at it. It is freed once both libuv
// (every poll closed) and JavaScript (its object collected, or never handed out) are done with it.
#ifndef PROCCTL_HANDLE_H
#define PROCCTL_HANDLE_H

#include <stdint.h>
#include <uv.h>
#include <node_api.h>

#define PROCCTL_HANDLE_MAX_POLLS 2

typedef struct procctl_handle procctl_handle_t;

typedef struct {
  const char *name;      // the JavaScript function that makes it, in its errors ("splicePipe")
  const char *resource;  // the async resource's name ("procctl.splice")
  uv_poll_cb readable;   // polls[0]'s callback, watching UV_READABLE | UV_DISCONNECT from start and resume
  // What the kind holds beyond the handle (a reference, a shared target): let go once libuv is
  // done with every poll, or at once when the start failed before any poll was made. May be NULL.
  void (*release)(procctl_handle_t *h);
} procctl_handle_kind_t;

struct procctl_handle {
  uv_poll_t polls[PROCCTL_HANDLE_MAX_POLLS];  // [0] the descriptor read; the kind starts any other
  const procctl_handle_kind_t *kind;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  int npolls;
  int open_polls;  // polls libuv has not yet closed
  int paused;      // JavaScript held it (a restart's quiet moment)
  int stopped;     // no more calls into JS: the end, a failure, or close()
  int js_gone;     // its JS object was collected (or never made)
};

// Polls fds[0..npolls) (each names where its uv_poll_t's failure to start is said), starts polls[0],
// and returns the object JavaScript holds the handle by. On failure throws and returns NULL; the
// handle is then let go (kind->release included) without a call into JavaScript.
napi_value procctl_handle_start(napi_env env, procctl_handle_t *h, const procctl_handle_kind_t *kind, int npolls, const int *fds, const char *const *what,
                                napi_value callback);

// No more polling and no more calls into JavaScript; the polls are closed (once).
void procctl_handle_stop(procctl_handle_t *h);

// callback(...args) from the event loop (nextTicks and microtasks run after it); a throw in it is
// the process's uncaught exception.
void procctl_handle_call(procctl_handle_t *h, size_t argc, const int64_t *args);

// The descriptor made non-blocking; 0 or an errno.
int procctl_set_nonblock(int fd);

#endif
