// What the addon's sources share for reporting a failed system call to JavaScript.
#ifndef PROCCTL_ERRORS_H
#define PROCCTL_ERRORS_H
#include <node_api.h>

// Throw an Error "WHAT: strerror(err)" with its `errno` property set; returns NULL.
napi_value procctl_throw_errno(napi_env env, int err, const char *what);

#endif
