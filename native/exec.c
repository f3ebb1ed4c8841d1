// Replace the daemon's process image with a new one, keeping its PID (SPEC §19): the planned
// restart's last step. The descriptors the hand-over keeps were made inheritable just before;
// every other one is close-on-exec and goes with the old image. Returns only when execve
// failed, throwing its errno; then nothing has changed and the old image goes on serving.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <node_api.h>
#include "errors.h"

// A JavaScript array of strings as a NULL-terminated vector; NULL when it is not one.
static char **strings(napi_env env, napi_value array) {
  uint32_t n = 0;
  bool is_array = false;
  if (napi_is_array(env, array, &is_array) != napi_ok || !is_array || napi_get_array_length(env, array, &n) != napi_ok) return NULL;
  char **out = calloc((size_t)n + 1, sizeof(char *));
  if (!out) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    size_t len = 0;
    if (napi_get_element(env, array, i, &item) != napi_ok || napi_get_value_string_utf8(env, item, NULL, 0, &len) != napi_ok) goto fail;
    out[i] = malloc(len + 1);
    if (!out[i] || napi_get_value_string_utf8(env, item, out[i], len + 1, &len) != napi_ok) goto fail;
  }
  return out;
fail:
  for (uint32_t i = 0; i < n; i++) free(out[i]);
  free(out);
  return NULL;
}

static void release(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) free(*p);
  free(v);
}

// execImage(file, argv, env): replace this process image; throws with errno when the kernel refuses.
static napi_value ExecImage(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, NULL, "execImage(file, argv, env)");
    return NULL;
  }
  size_t len = 0;
  if (napi_get_value_string_utf8(env, args[0], NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "execImage: file must be a string");
    return NULL;
  }
  char *file = malloc(len + 1);
  char **argv = strings(env, args[1]);
  char **envp = strings(env, args[2]);
  if (!file || !argv || !envp || napi_get_value_string_utf8(env, args[0], file, len + 1, &len) != napi_ok) {
    free(file);
    release(argv);
    release(envp);
    napi_throw_type_error(env, NULL, "execImage: argv and env must be arrays of strings");
    return NULL;
  }
  // The new image starts with no signal blocked, whatever this thread had blocked.
  sigset_t none, old;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, &old);
  execve(file, argv, envp);
  int err = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  free(file);
  release(argv);
  release(envp);
  return procctl_throw_errno(env, err, "execve");
}

void procctl_exec_init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "execImage", NAPI_AUTO_LENGTH, ExecImage, NULL, &fn);
  napi_set_named_property(env, exports, "execImage", fn);
}
