// Starting jobs without fork(). Node's child_process forks, and a fork copies the page tables
// of the daemon's heap, so a spawn costs more the more memory the daemon holds (about 2 ms at
// 60 MB, 8 ms at 200 MB). A vfork child runs in the daemon's own memory until it execs, at a
// cost that does not grow with the heap. (glibc's posix_spawn does the same, but leaves its two
// internal signals, 32 and 33, ignored in the job; a job must inherit no ignored signal.)
//
// spawn(file, argv, env, cwd, stdinNull) -> { pid, stdin, stdout, stderr }  (fds; stdin -1
//   when stdinNull). The child runs in a new session (setsid) with every signal at its
//   default disposition and an empty mask, its stdio on socketpairs as libuv would give it.
// reap(pids) -> [{ pid, code, signal }] for the listed children that have exited.
// exited() -> the pid of some exited child not yet reaped (left unreaped), or 0.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <node_api.h>

#define CHECK(env, call)                                     \
  do {                                                       \
    if ((call) != napi_ok) {                                 \
      napi_throw_error((env), NULL, "procctl spawn: " #call); \
      return NULL;                                           \
    }                                                        \
  } while (0)

static napi_value throw_errno(napi_env env, int err) {
  napi_value msg, error, code, number;
  napi_create_string_utf8(env, strerror(err), NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, NULL, msg, &error);
  const char *name = err == ENOENT ? "ENOENT" : err == EACCES ? "EACCES" : err == ENOTDIR ? "ENOTDIR"
                   : err == ENOEXEC ? "ENOEXEC" : err == EMFILE ? "EMFILE" : err == ENFILE ? "ENFILE"
                   : err == EAGAIN ? "EAGAIN" : err == ENOMEM ? "ENOMEM" : "ESPAWN";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_create_int32(env, -err, &number);
  napi_set_named_property(env, error, "errno", number);
  napi_throw(env, error);
  return NULL;
}

// A JS string as a malloc'd C string (NUL bytes cannot occur in argv, env or paths: refused).
static char *string_arg(napi_env env, napi_value value, int *bad) {
  size_t len;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok) {
    *bad = 1;
    return NULL;
  }
  char *s = malloc(len + 1);
  if (!s) {
    *bad = 1;
    return NULL;
  }
  napi_get_value_string_utf8(env, value, s, len + 1, &len);
  if (strlen(s) != len) *bad = 1;
  return s;
}

// A JS array of strings as a NULL-terminated vector.
static char **string_vector(napi_env env, napi_value array, int *bad) {
  uint32_t n;
  if (napi_get_array_length(env, array, &n) != napi_ok) {
    *bad = 1;
    return NULL;
  }
  char **v = calloc(n + 1, sizeof(char *));
  if (!v) {
    *bad = 1;
    return NULL;
  }
  for (uint32_t i = 0; i < n && !*bad; i++) {
    napi_value item;
    napi_get_element(env, array, i, &item);
    v[i] = string_arg(env, item, bad);
  }
  return v;
}

static void free_vector(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) free(*p);
  free(v);
}

// Keep our ends clear of 0..2, so a dup2 onto the child's stdio never meets itself.
static int above_stdio(int fd) {
  if (fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

static int stdio_pair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return errno;
  fds[0] = above_stdio(fds[0]);
  fds[1] = above_stdio(fds[1]);
  if (fds[0] < 0 || fds[1] < 0) {
    int err = errno;
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    return err;
  }
  return 0;
}

// What the child needs, all of it made before the vfork: the child allocates nothing.
struct job {
  const char *file;
  char **argv;
  char **envp;
  const char *cwd;
  int in, out, err;     // the child's ends; in = -1 for /dev/null
  volatile int error;   // set by the child when it cannot exec (the memory is shared)
};

// The kernel's struct sigaction (x86_64, arm64): glibc's wrappers refuse its internal signals.
struct kernel_sigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  uint64_t mask;
};

static void set_all_signals_blocked(int blocked, uint64_t *old) {
  uint64_t mask = blocked ? ~(uint64_t)0 : 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, old, sizeof mask);
}

__attribute__((noreturn)) static void child_fail(struct job *job, int error) {
  job->error = error;
  _exit(127);
}

// In the vfork child, with every signal blocked: default dispositions, a new session, stdio,
// the workdir, no signal blocked, exec. Only system calls: the parent's memory is ours.
__attribute__((noreturn)) static void child(struct job *job) {
  struct kernel_sigaction dfl = {SIG_DFL, 0, NULL, 0};
  for (int sig = 1; sig < 65; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP) syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
  }
  if (setsid() < 0) child_fail(job, errno);
  int in = job->in;
  if (in < 0 && (in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) child_fail(job, errno);
  if (dup2(in, 0) < 0 || dup2(job->out, 1) < 0 || dup2(job->err, 2) < 0) child_fail(job, errno);
  if (chdir(job->cwd) < 0) child_fail(job, errno);
  set_all_signals_blocked(0, NULL);
  if (strchr(job->file, '/')) execve(job->file, job->argv, job->envp);
  else execvpe(job->file, job->argv, job->envp);
  child_fail(job, errno);
}

// The child's pid, or -1 with job->error set. Returns once the child has exec'd (or failed).
static pid_t start_job(struct job *job) {
  uint64_t old;
  set_all_signals_blocked(1, &old);
  pid_t pid = vfork();
  if (pid == 0) child(job);
  int error = pid < 0 ? errno : 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
  if (pid < 0) {
    job->error = error;
    return -1;
  }
  if (job->error) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return -1;
  }
  return pid;
}

static napi_value set_int(napi_env env, napi_value obj, const char *key, int value) {
  napi_value v;
  napi_create_int32(env, value, &v);
  napi_set_named_property(env, obj, key, v);
  return obj;
}

static napi_value Spawn(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value args[5];
  CHECK(env, napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc < 5) {
    napi_throw_type_error(env, NULL, "spawn(file, argv, env, cwd, stdinNull)");
    return NULL;
  }
  int bad = 0;
  char *file = string_arg(env, args[0], &bad);
  char **argv = string_vector(env, args[1], &bad);
  char **envp = string_vector(env, args[2], &bad);
  char *cwd = string_arg(env, args[3], &bad);
  bool stdin_null = false;
  napi_get_value_bool(env, args[4], &stdin_null);
  napi_value result = NULL;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  int rc = 0;
  if (bad) {
    napi_throw_type_error(env, NULL, "spawn: arguments must be strings without NUL bytes");
    goto done;
  }
  if ((!stdin_null && (rc = stdio_pair(in))) || (rc = stdio_pair(out)) || (rc = stdio_pair(err))) {
    throw_errno(env, rc);
    goto done;
  }

  struct job job = {file, argv, envp, cwd, stdin_null ? -1 : in[1], out[1], err[1], 0};
  pid_t pid = start_job(&job);
  if (pid < 0) {
    throw_errno(env, job.error);
    goto done;
  }
  napi_create_object(env, &result);
  set_int(env, result, "pid", pid);
  set_int(env, result, "stdin", in[0]);
  set_int(env, result, "stdout", out[0]);
  set_int(env, result, "stderr", err[0]);
  in[0] = out[0] = err[0] = -1;  // now the caller's

done:
  for (int i = 0; i < 2; i++) {
    if (in[i] >= 0) close(in[i]);
    if (out[i] >= 0) close(out[i]);
    if (err[i] >= 0) close(err[i]);
  }
  free(file);
  free(cwd);
  free_vector(argv);
  free_vector(envp);
  return result;
}

static napi_value Reap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1], list;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  uint32_t n = 0;
  if (argc < 1 || napi_get_array_length(env, args[0], &n) != napi_ok) {
    napi_throw_type_error(env, NULL, "reap(pids)");
    return NULL;
  }
  CHECK(env, napi_create_array(env, &list));
  uint32_t found = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    int32_t pid;
    napi_get_element(env, args[0], i, &item);
    if (napi_get_value_int32(env, item, &pid) != napi_ok || pid <= 0) continue;
    int status;
    pid_t r;
    do r = waitpid(pid, &status, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r != pid) continue;
    napi_value entry, nul;
    napi_create_object(env, &entry);
    napi_get_null(env, &nul);
    set_int(env, entry, "pid", pid);
    if (WIFEXITED(status)) {
      set_int(env, entry, "code", WEXITSTATUS(status));
      napi_set_named_property(env, entry, "signal", nul);
    } else {
      napi_set_named_property(env, entry, "code", nul);
      set_int(env, entry, "signal", WTERMSIG(status));
    }
    napi_set_element(env, list, found++, entry);
  }
  return list;
}

// The pid of a child that has exited and is not yet reaped, or 0; it stays unreaped (WNOWAIT),
// so a child that is not ours is left to whoever started it.
static napi_value Exited(napi_env env, napi_callback_info info) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int r;
  do r = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT);
  while (r < 0 && errno == EINTR);
  napi_value pid;
  napi_create_int32(env, r == 0 ? si.si_pid : 0, &pid);
  return pid;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  napi_create_function(env, "exited", NAPI_AUTO_LENGTH, Exited, NULL, &fn);
  napi_set_named_property(env, exports, "exited", fn);
  napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, Spawn, NULL, &fn);
  napi_set_named_property(env, exports, "spawn", fn);
  napi_create_function(env, "reap", NAPI_AUTO_LENGTH, Reap, NULL, &fn);
  napi_set_named_property(env, exports, "reap", fn);
  return exports;
}
