// What the addon's functions each wrote out for their N-API calls: reading a call's arguments
// (int32s, a string), refusing bad ones with a TypeError that says how the call is made, and
// building the values they return (a number, a boolean, an object of named values), and adding a
// function to the module's exports. Static inline: each source file compiles its own, nothing to link.
#ifndef PROCCTL_NAPI_UTIL_H
#define PROCCTL_NAPI_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <node_api.h>

// The most arguments procctl_int32_args reads.
#define PROCCTL_MAX_INT_ARGS 4

// Throw a TypeError whose message is `usage` (the call as it is made, and what it wants); returns
// NULL for the caller to return.
static inline napi_value procctl_throw_usage(napi_env env, const char *usage) {
  napi_throw_type_error(env, NULL, usage);
  return NULL;
}

// The first `want` arguments of a call (at most PROCCTL_MAX_INT_ARGS), each an int32, into out[];
// false when fewer were given or one is not a number.
static inline bool procctl_int32_args(napi_env env, napi_callback_info info, size_t want, int32_t *out) {
  size_t argc = PROCCTL_MAX_INT_ARGS;
  napi_value argv[PROCCTL_MAX_INT_ARGS];
  if (want > PROCCTL_MAX_INT_ARGS || napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) return false;
  for (size_t i = 0; i < want; i++) {
    if (napi_get_value_int32(env, argv[i], &out[i]) != napi_ok) return false;
  }
  return true;
}

// A JavaScript string as a malloc'd, NUL-terminated copy, its length in *len (when len is not
// NULL); NULL when `value` is not a string or memory ran out. The caller frees it.
static inline char *procctl_string_copy(napi_env env, napi_value value, size_t *len) {
  size_t n;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &n) != napi_ok) return NULL;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  napi_get_value_string_utf8(env, value, s, n + 1, &n);
  if (len) *len = n;
  return s;
}

// The same for a path, an argument or a name, where a NUL byte cannot stand: NULL when the
// string holds one (the copy is freed).
static inline char *procctl_c_string(napi_env env, napi_value value) {
  size_t len;
  char *s = procctl_string_copy(env, value, &len);
  if (s && strlen(s) != len) {
    free(s);
    return NULL;
  }
  return s;
}

// A name or path argument given as a string or a Buffer (bytes that are not UTF-8), as a
// NUL-terminated heap copy; NULL when it is neither or holds a NUL byte. The caller frees it.
static inline char *procctl_name_arg(napi_env env, napi_value value) {
  bool is_buffer = false;
  napi_is_buffer(env, value, &is_buffer);
  if (!is_buffer) return procctl_c_string(env, value);
  void *data;
  size_t len;
  if (napi_get_buffer_info(env, value, &data, &len) != napi_ok || memchr(data, 0, len)) return NULL;
  char *s = malloc(len + 1);
  if (!s) return NULL;
  memcpy(s, data, len);
  s[len] = '\0';
  return s;
}

static inline napi_value procctl_int32(napi_env env, int32_t value) {
  napi_value v;
  napi_create_int32(env, value, &v);
  return v;
}

static inline napi_value procctl_bool(napi_env env, bool value) {
  napi_value v;
  napi_get_boolean(env, value, &v);
  return v;
}

static inline napi_value procctl_null(napi_env env) {
  napi_value v;
  napi_get_null(env, &v);
  return v;
}

static inline napi_value procctl_object(napi_env env) {
  napi_value v;
  napi_create_object(env, &v);
  return v;
}

// obj[key] = value, for the objects the functions return.
static inline void procctl_set_int32(napi_env env, napi_value obj, const char *key, int32_t value) {
  napi_set_named_property(env, obj, key, procctl_int32(env, value));
}

static inline void procctl_set_uint32(napi_env env, napi_value obj, const char *key, uint32_t value) {
  napi_value v;
  napi_create_uint32(env, value, &v);
  napi_set_named_property(env, obj, key, v);
}

static inline void procctl_set_string(napi_env env, napi_value obj, const char *key, const char *text, size_t len) {
  napi_value v;
  napi_create_string_utf8(env, text, len, &v);
  napi_set_named_property(env, obj, key, v);
}

static inline void procctl_set_bool(napi_env env, napi_value obj, const char *key, bool value) {
  napi_set_named_property(env, obj, key, procctl_bool(env, value));
}

static inline void procctl_set_null(napi_env env, napi_value obj, const char *key) {
  napi_set_named_property(env, obj, key, procctl_null(env));
}

// exports[name] = a function that runs `fn`: what each file's init does for each of its functions.
static inline void procctl_export(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value f;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f);
  napi_set_named_property(env, exports, name, f);
}

#endif
