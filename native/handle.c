// The life of a spliced handle, shared by splice.c and tap.c: see handle.h.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include "errors.h"
#include "handle.h"

// The most arguments procctl_handle_call passes (splice.c's onBatch(n, status)).
#define MAX_ARGS 2

// What the handle holds in JavaScript, and the kind's own, let go: libuv is done with it.
static void handle_release(procctl_handle_t *h) {
  napi_delete_reference(h->env, h->callback);
  napi_async_destroy(h->env, h->context);
  if (h->kind->release) h->kind->release(h);
}

static void handle_poll_closed(uv_handle_t *poll) {
  procctl_handle_t *h = (procctl_handle_t *)poll->data;
  if (--h->open_polls > 0) return;
  handle_release(h);
  if (h->js_gone) free(h);
}

void procctl_handle_stop(procctl_handle_t *h) {
  if (h->stopped) return;
  h->stopped = 1;
  for (int i = 0; i < h->npolls; i++) uv_poll_stop(&h->polls[i]);
  for (int i = 0; i < h->npolls; i++) uv_close((uv_handle_t *)&h->polls[i], handle_poll_closed);
}

void procctl_handle_call(procctl_handle_t *h, size_t argc, const int64_t *args) {
  napi_handle_scope scope;
  napi_value callback, recv, argv[MAX_ARGS];
  if (argc > MAX_ARGS) argc = MAX_ARGS;
  if (napi_open_handle_scope(h->env, &scope) != napi_ok) return;
  napi_get_reference_value(h->env, h->callback, &callback);
  napi_get_global(h->env, &recv);
  for (size_t i = 0; i < argc; i++) napi_create_int64(h->env, args[i], &argv[i]);
  napi_status st = napi_make_callback(h->env, h->context, recv, callback, argc, argv, NULL);
  if (st == napi_pending_exception) {
    napi_value error;
    napi_get_and_clear_last_exception(h->env, &error);
    napi_fatal_exception(h->env, error);
  }
  napi_close_handle_scope(h->env, scope);
}

static procctl_handle_t *handle_of(napi_env env, napi_callback_info info) {
  procctl_handle_t *h = NULL;
  napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&h);
  return h;
}

static napi_value HandlePause(napi_env env, napi_callback_info info) {
  procctl_handle_t *h = handle_of(env, info);
  if (h && !h->stopped && !h->paused) {
    h->paused = 1;
    for (int i = 0; i < h->npolls; i++) uv_poll_stop(&h->polls[i]);
  }
  return NULL;
}

static napi_value HandleResume(napi_env env, napi_callback_info info) {
  procctl_handle_t *h = handle_of(env, info);
  if (h && !h->stopped && h->paused) {
    h->paused = 0;
    // polls[0] first: what the kind waits for on another poll (tap.c: room in its pipe) it finds again from there.
    int err = uv_poll_start(&h->polls[0], UV_READABLE | UV_DISCONNECT, h->kind->readable);
    if (err != 0) {
      char what[96];
      snprintf(what, sizeof what, "%s resume", h->kind->name);
      return procctl_throw_errno(env, -err, what);
    }
  }
  return NULL;
}

static napi_value HandleClose(napi_env env, napi_callback_info info) {
  procctl_handle_t *h = handle_of(env, info);
  if (h) procctl_handle_stop(h);
  return NULL;
}

static void handle_finalize(napi_env env, void *data, void *hint) {
  procctl_handle_t *h = (procctl_handle_t *)data;
  (void)env;
  (void)hint;
  h->js_gone = 1;
  if (!h->stopped) procctl_handle_stop(h);
  else if (h->open_polls == 0) free(h);
}

napi_value procctl_handle_start(napi_env env, procctl_handle_t *h, const procctl_handle_kind_t *kind, int npolls, const int *fds, const char *const *what,
                                napi_value callback) {
  h->env = env;
  h->kind = kind;
  h->js_gone = 1;  // no object yet: a failure below frees it as soon as libuv is done
  napi_create_reference(env, callback, 1, &h->callback);
  napi_value name;
  napi_create_string_utf8(env, kind->resource, NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &h->context);
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) {
    handle_release(h);
    free(h);
    char say[96];
    snprintf(say, sizeof say, "%s: no event loop", kind->name);
    return procctl_throw_errno(env, EINVAL, say);
  }
  if (npolls < 1 || npolls > PROCCTL_HANDLE_MAX_POLLS) {
    // A caller's mistake, not the machine's: h->polls has room for PROCCTL_HANDLE_MAX_POLLS only.
    handle_release(h);
    free(h);
    char say[128];
    snprintf(say, sizeof say, "%s: %d descriptors to poll, expected 1 to %d (raise PROCCTL_HANDLE_MAX_POLLS in native/handle.h)", kind->name, npolls,
             PROCCTL_HANDLE_MAX_POLLS);
    return procctl_throw_errno(env, EINVAL, say);
  }
  for (int i = 0; i < npolls; i++) {
    h->polls[i].data = h;
    int err = uv_poll_init(loop, &h->polls[i], fds[i]);
    if (err == 0) continue;
    // Only the polls made so far are closed.
    h->npolls = h->open_polls = i;
    if (i == 0) {
      handle_release(h);
      free(h);
    } else {
      procctl_handle_stop(h);
    }
    return procctl_throw_errno(env, -err, what[i]);
  }
  h->npolls = h->open_polls = npolls;
  int err = uv_poll_start(&h->polls[0], UV_READABLE | UV_DISCONNECT, kind->readable);
  if (err != 0) {
    procctl_handle_stop(h);
    return procctl_throw_errno(env, -err, kind->name);
  }
  h->js_gone = 0;
  napi_value handle, fn;
  napi_create_object(env, &handle);
  static const struct { const char *name; napi_callback fn; } methods[] = {{"pause", HandlePause}, {"resume", HandleResume}, {"close", HandleClose}};
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
    napi_create_function(env, methods[i].name, NAPI_AUTO_LENGTH, methods[i].fn, h, &fn);
    napi_set_named_property(env, handle, methods[i].name, fn);
  }
  // Freed once both libuv and JavaScript are done with it: tied to the handle object.
  napi_add_finalizer(env, handle, h, handle_finalize, NULL, NULL);
  return handle;
}

int procctl_set_nonblock(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return errno;
  if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno;
  return 0;
}
