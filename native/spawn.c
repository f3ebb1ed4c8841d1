// Starting jobs without fork(). Node's child_process forks, and a fork copies the page tables
// of the daemon's heap, so a spawn costs more the more memory the daemon holds (about 2 ms at
// 60 MB, 8 ms at 200 MB). A vfork child runs in the daemon's own memory until it execs, at a
// cost that does not grow with the heap. (glibc's posix_spawn does the same, but leaves its two
// internal signals, 32 and 33, ignored in the job; a job must inherit no ignored signal.)
//
// spawn(file, argv, env, cwd, stdinNull[, steps]) -> { pid, stdin, stdout, stderr, stdinInode }
//   (fds; stdin -1 when stdinNull; stdinInode: the inode of the job's fd 0, absent then). The child runs in a new session (setsid) with every signal at its
//   default disposition and an empty mask, its stdin on a socketpair as libuv
//   would give it, its stdout and stderr on pipes (the daemon splices them into the spool).
//   `steps` (see SpawnSteps below) are done in the child before exec: the session's cgroups to
//   join, signals to ignore, descriptors to keep, resource limits, a user to become. An error thrown by spawn carries `syscall`, the step
//   that failed.
// reap(pids) -> [{ pid, code, signal }] for the listed children that have exited.
// exited() -> the pid of some exited child not yet reaped (left unreaped), or 0.
// stdinReaders([[leader, input, pty], ...]) -> Promise<number[]>: off the main thread, on a
//   thread of idle priority, one answer per entry (see StdinReaders below); stdinReadersLate()
//   and lookThread() go with it.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <node_api.h>
#include "napi-util.h"

#define CHECK(env, call)                                     \
  do {                                                       \
    if ((call) != napi_ok) {                                 \
      napi_throw_error((env), NULL, "procctl spawn: " #call); \
      return NULL;                                           \
    }                                                        \
  } while (0)

static napi_value errno_error(napi_env env, int err) {
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
  return error;
}

static napi_value throw_errno(napi_env env, int err) {
  napi_throw(env, errno_error(env, err));
  return NULL;
}

// A JS string as a malloc'd C string (NUL bytes cannot occur in argv, env or paths: refused).
static char *string_arg(napi_env env, napi_value value, int *bad) {
  char *s = procctl_c_string(env, value);
  if (!s) *bad = 1;
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

// Both ends of a new pair moved above 0..2; on failure both are closed and errno returned.
static int pair_above_stdio(int fds[2]) {
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

static int stdio_pair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return errno;
  return pair_above_stdio(fds);
}

// The job's stdout and stderr: a pipe each (fds[0] the daemon's end), so the daemon can move its
// output into the spool with splice(2), which needs a pipe on one side (native/splice.c).
static int output_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) return errno;
  return pair_above_stdio(fds);
}

// SpawnSteps: what a confined job (src/sandbox/) gets between fork and exec. Limits are set
// here rather than by a wrapper program: no extra exec, and nothing runs unlimited meanwhile.
#define MAX_STEPS 64
#define MAX_OVERLAYS 8
#define MAX_CGROUPS 8
#define CGROUP_PATH_MAX 512
struct steps {
  int nignore;
  int ignore[MAX_STEPS];  // signals set to SIG_IGN (for the sandbox's own processes; see bwrap.ts)
  int nlimits;
  struct { int resource; struct rlimit value; } limits[8];
  int set_user;           // become uid/gid with these supplementary groups
  uid_t uid;
  gid_t gid;
  int ngroups;
  gid_t groups[MAX_STEPS];
  int nkeep;
  int keep[8];            // the daemon's descriptors the job inherits at the same numbers (its channel, bwrap's filter)
  int ncgroups;           // cgroup.procs files the child writes itself into, first of all (src/cgroup/)
  char cgroups[MAX_CGROUPS][CGROUP_PATH_MAX];
  // Review mode (src/sandbox/overlay.ts): a mount namespace of the job's own (in a user namespace
  // of its own when the daemon is not root, its ids mapped to themselves) with overlays mounted.
  int ns;                 // 0, CLONE_NEWNS, or CLONE_NEWNS | CLONE_NEWUSER
  char uid_map[32], gid_map[32];
  int noverlays;
  char *overlay_target[MAX_OVERLAYS];   // malloc'd by parse_steps, freed by free_steps
  char *overlay_options[MAX_OVERLAYS];
  // Or the namespaces with those overlays mounted ahead of time (PrepareMounts): joined, not made.
  int entering;
  int enter_user;         // -1 when the daemon is root (no user namespace)
  int enter_mnt;
};

// What the child needs, all of it made before the vfork: the child allocates nothing.
struct job {
  const char *file;
  char **argv;
  char **envp;
  const char *cwd;
  int in, out, err;     // the child's ends; in = -1 for /dev/null
  const struct steps *steps;
  volatile int error;   // set by the child when it cannot exec (the memory is shared)
  volatile const char *step;  // the step that failed
  int cloned_into;      // index in steps->cgroups of the cgroup the child was cloned into, or -1
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

__attribute__((noreturn)) static void child_fail(struct job *job, int error, const char *step) {
  job->error = error;
  job->step = step;
  _exit(127);
}

static void child_write(struct job *job, const char *path, const char *text, const char *step) {
  size_t len = strlen(text);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) child_fail(job, errno, step);
  if (write(fd, text, len) != (ssize_t)len) {
    int error = errno;
    close(fd);  // PrepareMounts' child shares the daemon's descriptor table
    child_fail(job, error, step);
  }
  close(fd);
}

// The job's own mount namespace, private so nothing mounted here reaches the host, and its
// overlays: the job (and bwrap, which binds the workspace as this namespace shows it) writes to
// the upper directories, never to the workspace itself.
static void child_mounts(struct job *job) {
  const struct steps *st = job->steps;
  if (st->entering) {
    // The user namespace first: it owns the mount namespace, and joining it gives the caps to enter that.
    if (st->enter_user >= 0 && syscall(SYS_setns, st->enter_user, CLONE_NEWUSER) < 0) child_fail(job, errno, "setns");
    if (syscall(SYS_setns, st->enter_mnt, CLONE_NEWNS) < 0) child_fail(job, errno, "setns");
    return;
  }
  if (syscall(SYS_unshare, st->ns) < 0) child_fail(job, errno, "unshare");
  if (st->ns & CLONE_NEWUSER) {
    child_write(job, "/proc/self/setgroups", "deny", "setgroups");
    child_write(job, "/proc/self/uid_map", st->uid_map, "uid_map");
    child_write(job, "/proc/self/gid_map", st->gid_map, "gid_map");
  }
  if (syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) child_fail(job, errno, "mount");
  for (int i = 0; i < st->noverlays; i++) {
    if (syscall(SYS_mount, "overlay", st->overlay_target[i], "overlay", 0, st->overlay_options[i]) < 0) child_fail(job, errno, "overlay");
  }
}

// The confinement steps, after stdio and before the workdir (so the workdir is entered as the
// user). Raw system calls only: glibc's setuid/setgid/setgroups would try to signal the
// daemon's other threads, whose memory this vfork child shares.
static void child_steps(struct job *job) {
  const struct steps *st = job->steps;
  // Into the session's cgroup before anything of the job runs: "0" means the writer itself.
  for (int i = 0; i < st->ncgroups; i++) {
    if (i == job->cloned_into) continue;  // born there
    int fd = open(st->cgroups[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) child_fail(job, errno, "cgroup");
    close(fd);
  }
  for (int i = 0; i < st->nkeep; i++) {
    if (fcntl(st->keep[i], F_SETFD, 0) < 0) child_fail(job, errno, "fcntl");
  }
  struct kernel_sigaction ign = {SIG_IGN, 0, NULL, 0};
  for (int i = 0; i < st->nignore; i++) syscall(SYS_rt_sigaction, st->ignore[i], &ign, NULL, sizeof ign.mask);
  for (int i = 0; i < st->nlimits; i++) {
    if (syscall(SYS_prlimit64, 0, st->limits[i].resource, &st->limits[i].value, NULL) < 0) child_fail(job, errno, "setrlimit");
  }
  if (st->ns) child_mounts(job);
  if (!st->set_user) return;
  if (syscall(SYS_setgroups, st->ngroups, st->groups) < 0) child_fail(job, errno, "setgroups");
  if (syscall(SYS_setresgid, st->gid, st->gid, st->gid) < 0) child_fail(job, errno, "setgid");
  if (syscall(SYS_setresuid, st->uid, st->uid, st->uid) < 0) child_fail(job, errno, "setuid");
}

// In the vfork child, with every signal blocked: default dispositions, a new session, stdio,
// the workdir, no signal blocked, exec. Only system calls: the parent's memory is ours.
__attribute__((noreturn)) static void child(struct job *job) {
  struct kernel_sigaction dfl = {SIG_DFL, 0, NULL, 0};
  for (int sig = 1; sig < 65; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP) syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
  }
  if (setsid() < 0) child_fail(job, errno, "setsid");
  int in = job->in;
  if (in < 0 && (in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) child_fail(job, errno, "open");
  if (dup2(in, 0) < 0 || dup2(job->out, 1) < 0 || dup2(job->err, 2) < 0) child_fail(job, errno, "dup2");
  if (job->steps) child_steps(job);
  if (chdir(job->cwd) < 0) child_fail(job, errno, "chdir");
  set_all_signals_blocked(0, NULL);
  if (strchr(job->file, '/')) execve(job->file, job->argv, job->envp);
  else execvpe(job->file, job->argv, job->envp);
  child_fail(job, errno, "exec");
}

// --- Born in the session's cgroup ----------------------------------------------------------
// Writing a process into cgroup.procs takes the kernel's cgroup_threadgroup_rwsem for writing,
// which waits for an RCU grace period unless another migration ran moments before: about 10 ms
// on an idle host, on every exec. clone3 with CLONE_INTO_CGROUP starts the child in its cgroup
// and takes that lock only for reading. With CLONE_VM | CLONE_VFORK it is vfork that starts the
// child on a stack of its own and runs child() there; glibc has no wrapper for that, so the
// system call and the jump are a few instructions per architecture. Elsewhere, on kernels before
// 5.7, or where a seccomp profile refuses clone3, the child joins by writing cgroup.procs.
#if defined(__x86_64__)
#define HAVE_CLONE_INTO 1
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#define CGROUP2_MAGIC 0x63677270
#define CHILD_STACK (256 * 1024)

struct clone3_args {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

// clone3(args); in the child, fn(arg) on the new stack (it never returns: it execs or exits).
static long clone3_run(struct clone3_args *args, void (*fn)(struct job *), struct job *arg) {
  long ret;
  register void (*r12)(struct job *) __asm__("r12") = fn;
  register struct job *r13 __asm__("r13") = arg;
  __asm__ volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xor %%ebp, %%ebp\n\t"
      "mov %%r13, %%rdi\n\t"
      "call *%%r12\n\t"
      "ud2\n"
      "1:"
      : "=a"(ret)
      : "a"((long)SYS_clone3), "D"(args), "S"(sizeof *args), "r"(r12), "r"(r13)
      : "rcx", "r11", "memory");
  return ret;
}

static void *child_stack;

// The first of the session's cgroups that is a cgroup2 directory, opened; -1 when there is none.
static int cgroup2_dir(const struct steps *st, int *index) {
  for (int i = 0; i < st->ncgroups; i++) {
    char dir[CGROUP_PATH_MAX];
    strcpy(dir, st->cgroups[i]);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) continue;
    *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    struct statfs fs;
    if (fstatfs(fd, &fs) == 0 && fs.f_type == CGROUP2_MAGIC) {
      *index = i;
      return fd;
    }
    close(fd);
  }
  return -1;
}

// The child's pid, started in its v2 cgroup; 0 when this way is not open here (the caller vforks).
static pid_t clone_into(struct job *job) {
  static int unavailable;
  if (unavailable || !job->steps) return 0;
  int index;
  int fd = cgroup2_dir(job->steps, &index);
  if (fd < 0) return 0;
  if (!child_stack) {
    void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
      close(fd);
      return 0;
    }
    child_stack = stack;
  }
  struct clone3_args args;
  memset(&args, 0, sizeof args);
  args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.stack = (uint64_t)(uintptr_t)child_stack;
  args.stack_size = CHILD_STACK;
  args.cgroup = (uint64_t)fd;
  job->cloned_into = index;
  long pid = clone3_run(&args, child, job);  // the raw call: -errno on failure
  close(fd);
  if (pid > 0) return (pid_t)pid;
  int error = (int)-pid;
  job->cloned_into = -1;
  // No clone3 or no CLONE_INTO_CGROUP (an old kernel, or a seccomp profile answering ENOSYS):
  // never again. Anything else (EPERM from a profile, or this cgroup refused): this time only.
  if (error == ENOSYS || error == EINVAL || error == E2BIG) unavailable = 1;
  return 0;
}
#else
static pid_t clone_into(struct job *job) {
  return 0;
}
#endif

// The child's pid, or -1 with job->error set. Returns once the child has exec'd (or failed).
static pid_t start_job(struct job *job) {
  uint64_t old;
  set_all_signals_blocked(1, &old);
  job->cloned_into = -1;
  pid_t pid = clone_into(job);
  if (pid == 0) pid = vfork();
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

// A non-negative integer property of a JS value (an array element or an object key).
static int uint_at(napi_env env, napi_value from, uint32_t index, const char *key, double max, double *out) {
  napi_value v;
  if ((key ? napi_get_named_property(env, from, key, &v) : napi_get_element(env, from, index, &v)) != napi_ok) return 0;
  if (napi_get_value_double(env, v, out) != napi_ok || !(*out >= 0) || *out > max || *out != (double)(uint64_t)*out) return 0;
  return 1;
}

// A JS array's length, or -1 when `key` is absent; -2 when it is not an array or is too long.
static int array_at(napi_env env, napi_value from, const char *key, uint32_t max, napi_value *out) {
  bool has = false, is_array = false;
  uint32_t n = 0;
  if (napi_has_named_property(env, from, key, &has) != napi_ok || !has) return -1;
  if (napi_get_named_property(env, from, key, out) != napi_ok) return -2;
  napi_valuetype type;
  if (napi_typeof(env, *out, &type) == napi_ok && type == napi_undefined) return -1;
  if (napi_is_array(env, *out, &is_array) != napi_ok || !is_array || napi_get_array_length(env, *out, &n) != napi_ok || n > max) return -2;
  return (int)n;
}

static int limit_resource(const char *name) {
  if (strcmp(name, "cpu") == 0) return RLIMIT_CPU;
  if (strcmp(name, "as") == 0) return RLIMIT_AS;
  if (strcmp(name, "nofile") == 0) return RLIMIT_NOFILE;
  if (strcmp(name, "nproc") == 0) return RLIMIT_NPROC;
  if (strcmp(name, "fsize") == 0) return RLIMIT_FSIZE;
  return -1;
}

// steps.mounts: {userns: bool, overlays: [{target, options}]}, or absent. Returns 1 when malformed.
static int parse_mounts(napi_env env, napi_value from, struct steps *st) {
  bool has = false, userns = false;
  napi_value mounts, list, item, v;
  napi_valuetype type = napi_undefined;
  if (napi_has_named_property(env, from, "mounts", &has) != napi_ok) return 1;
  if (!has) return 0;
  if (napi_get_named_property(env, from, "mounts", &mounts) != napi_ok || napi_typeof(env, mounts, &type) != napi_ok) return 1;
  if (type == napi_undefined) return 0;
  if (type != napi_object || napi_get_named_property(env, mounts, "userns", &v) != napi_ok || napi_get_value_bool(env, v, &userns) != napi_ok) return 1;
  int n = array_at(env, mounts, "overlays", MAX_OVERLAYS, &list);
  if (n < 0) return 1;
  int bad = 0;
  for (int i = 0; i < n; i++) {
    if (napi_get_element(env, list, i, &item) != napi_ok) return 1;
    if (napi_get_named_property(env, item, "target", &v) != napi_ok) return 1;
    st->overlay_target[i] = string_arg(env, v, &bad);
    if (napi_get_named_property(env, item, "options", &v) != napi_ok) return 1;
    st->overlay_options[i] = string_arg(env, v, &bad);
    st->noverlays++;
    if (bad) return 1;
  }
  st->ns = CLONE_NEWNS | (userns ? CLONE_NEWUSER : 0);
  // enter: {user, mnt}, descriptors of namespaces PrepareMounts made (user -1 without one).
  if (napi_has_named_property(env, mounts, "enter", &has) != napi_ok) return 1;
  if (has && napi_get_named_property(env, mounts, "enter", &item) == napi_ok && napi_typeof(env, item, &type) == napi_ok && type != napi_undefined) {
    int32_t user, mnt;
    if (type != napi_object || napi_get_named_property(env, item, "user", &v) != napi_ok || napi_get_value_int32(env, v, &user) != napi_ok ||
        napi_get_named_property(env, item, "mnt", &v) != napi_ok || napi_get_value_int32(env, v, &mnt) != napi_ok || mnt < 0 || user < -1 || userns != (user >= 0)) return 1;
    st->entering = 1;
    st->enter_user = user;
    st->enter_mnt = mnt;
  }
  snprintf(st->uid_map, sizeof st->uid_map, "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
  snprintf(st->gid_map, sizeof st->gid_map, "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
  return 0;
}

static void free_steps(struct steps *st) {
  for (int i = 0; i < st->noverlays; i++) {
    free(st->overlay_target[i]);
    free(st->overlay_options[i]);
  }
}

// SpawnSteps from JS: {ignore?: number[], keep?: fds (above 2), limits?: [name, soft, hard][], user?: {uid, gid, groups},
// cgroups?: cgroup.procs paths}.
// Returns 0, or 1 when the object is malformed.
static int parse_steps(napi_env env, napi_value from, struct steps *st) {
  napi_value list, item, v;
  double d, soft, hard;
  int n = array_at(env, from, "ignore", MAX_STEPS, &list);
  if (n == -2) return 1;
  for (int i = 0; i < n; i++) {
    if (!uint_at(env, list, i, NULL, 64, &d) || d < 1) return 1;
    st->ignore[st->nignore++] = (int)d;
  }
  n = array_at(env, from, "keep", 8, &list);
  if (n == -2) return 1;
  for (int i = 0; i < n; i++) {
    if (!uint_at(env, list, i, NULL, 1048576, &d) || d < 3) return 1;
    st->keep[st->nkeep++] = (int)d;
  }
  n = array_at(env, from, "limits", 8, &list);
  if (n == -2) return 1;
  for (int i = 0; i < n; i++) {
    char name[16];
    size_t len;
    if (napi_get_element(env, list, i, &item) != napi_ok || napi_get_element(env, item, 0, &v) != napi_ok ||
        napi_get_value_string_utf8(env, v, name, sizeof name, &len) != napi_ok) return 1;
    int resource = limit_resource(name);
    if (resource < 0 || !uint_at(env, item, 1, NULL, 9007199254740991.0, &soft) || !uint_at(env, item, 2, NULL, 9007199254740991.0, &hard) || soft > hard) return 1;
    st->limits[st->nlimits].resource = resource;
    st->limits[st->nlimits].value.rlim_cur = (rlim_t)soft;
    st->limits[st->nlimits].value.rlim_max = (rlim_t)hard;
    st->nlimits++;
  }
  n = array_at(env, from, "cgroups", MAX_CGROUPS, &list);
  if (n == -2) return 1;
  for (int i = 0; i < n; i++) {
    size_t len;
    if (napi_get_element(env, list, i, &item) != napi_ok ||
        napi_get_value_string_utf8(env, item, st->cgroups[i], CGROUP_PATH_MAX, &len) != napi_ok || len >= CGROUP_PATH_MAX - 1 ||
        strlen(st->cgroups[i]) != len) return 1;
    st->ncgroups++;
  }
  if (parse_mounts(env, from, st)) return 1;
  bool has = false;
  napi_valuetype type = napi_undefined;
  if (napi_has_named_property(env, from, "user", &has) == napi_ok && has && napi_get_named_property(env, from, "user", &item) == napi_ok) {
    napi_typeof(env, item, &type);
  }
  if (type == napi_undefined) return 0;
  if (type != napi_object || !uint_at(env, item, 0, "uid", 4294967294.0, &d)) return 1;
  st->uid = (uid_t)d;
  if (!uint_at(env, item, 0, "gid", 4294967294.0, &d)) return 1;
  st->gid = (gid_t)d;
  n = array_at(env, item, "groups", MAX_STEPS, &list);
  if (n == -2) return 1;
  for (int i = 0; i < n; i++) {
    if (!uint_at(env, list, i, NULL, 4294967294.0, &d)) return 1;
    st->groups[st->ngroups++] = (gid_t)d;
  }
  st->set_user = 1;
  return 0;
}

static napi_value Spawn(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value args[6];
  CHECK(env, napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc < 5) {
    return procctl_throw_usage(env, "spawn(file, argv, env, cwd, stdinNull[, steps])");
  }
  struct steps steps;
  memset(&steps, 0, sizeof steps);
  napi_valuetype steps_type = napi_undefined;
  if (argc > 5) napi_typeof(env, args[5], &steps_type);
  if (steps_type != napi_undefined && (steps_type != napi_object || parse_steps(env, args[5], &steps))) {
    free_steps(&steps);
    return procctl_throw_usage(env, "spawn: steps must be {ignore?: signal numbers, keep?: descriptors above 2, limits?: [cpu|as|nofile|nproc|fsize, soft, hard][], user?: {uid, gid, groups}, cgroups?: paths, mounts?: {userns, overlays: [{target, options}]}}");
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
  if ((!stdin_null && (rc = stdio_pair(in))) || (rc = output_pipe(out)) || (rc = output_pipe(err))) {
    throw_errno(env, rc);
    goto done;
  }

  struct job job = {file, argv, envp, cwd, stdin_null ? -1 : in[1], out[1], err[1], steps_type == napi_undefined ? NULL : &steps, 0, NULL, -1};
  pid_t pid = start_job(&job);
  if (pid < 0) {
    napi_value error = errno_error(env, job.error), step;
    napi_create_string_utf8(env, job.step ? (const char *)job.step : "vfork", NAPI_AUTO_LENGTH, &step);
    napi_set_named_property(env, error, "syscall", step);
    napi_throw(env, error);
    goto done;
  }
  napi_create_object(env, &result);
  procctl_set_int32(env, result, "pid", pid);
  procctl_set_int32(env, result, "stdin", in[0]);
  // The job's fd 0 is the other socket of the pair: its inode names it as /proc shows it (socket:[N]).
  struct stat st;
  if (!stdin_null && fstat(in[1], &st) == 0) {
    napi_value ino;
    napi_create_double(env, (double)st.st_ino, &ino);
    napi_set_named_property(env, result, "stdinInode", ino);
  }
  procctl_set_int32(env, result, "stdout", out[0]);
  procctl_set_int32(env, result, "stderr", err[0]);
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
  free_steps(&steps);
  return result;
}

static napi_value Reap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1], list;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  uint32_t n = 0;
  if (argc < 1 || napi_get_array_length(env, args[0], &n) != napi_ok) {
    return procctl_throw_usage(env, "reap(pids)");
  }
  CHECK(env, napi_create_array(env, &list));
  uint32_t found = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    int32_t pid;
    napi_get_element(env, args[0], i, &item);
    if (napi_get_value_int32(env, item, &pid) != napi_ok || pid <= 0) continue;
    int status;
    struct rusage usage;
    pid_t r;
    do r = wait4(pid, &status, WNOHANG, &usage);
    while (r < 0 && errno == EINTR);
    if (r != pid) continue;
    napi_value entry = procctl_object(env), peak;
    procctl_set_int32(env, entry, "pid", pid);
    // The largest resident size of the child or of any descendant it waited for (kB on Linux).
    napi_create_double(env, (double)usage.ru_maxrss * 1024, &peak);
    napi_set_named_property(env, entry, "maxRssBytes", peak);
    if (WIFEXITED(status)) {
      procctl_set_int32(env, entry, "code", WEXITSTATUS(status));
      procctl_set_null(env, entry, "signal");
    } else {
      procctl_set_null(env, entry, "code");
      procctl_set_int32(env, entry, "signal", WTERMSIG(status));
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
  return procctl_int32(env, r == 0 ? si.si_pid : 0);
}

// --- Who reads a session's input -----------------------------------------------------------
// The waiting-for-input watcher asks, for each quiet session, whether a process of its tree is
// blocked reading the session's stdin: /proc/PID/syscall for each process, /proc/PID/fd/N for
// the fd it reads, /proc/PID/task/PID/children to walk the tree. A few hundred small reads a
// second with a thousand sessions; done here off the main thread (see "The looks run" below),
// they never hold up a request. src/interrupt/kernel.ts holds the same walk in JS, used when
// this addon is absent.

// Syscalls that block reading one fd (its first argument), and those that wait on several.
static int is_read_call(long nr) {
  return nr == SYS_read || nr == SYS_readv || nr == SYS_pread64;
}

static int is_wait_call(long nr) {
  switch (nr) {
#ifdef SYS_poll
    case SYS_poll:
#endif
#ifdef SYS_select
    case SYS_select:
#endif
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
#endif
    case SYS_pselect6:
    case SYS_ppoll:
    case SYS_epoll_pwait:
      return 1;
    default:
      return 0;
  }
}

// A small /proc file into buf (NUL-terminated); its length, or -1.
static ssize_t read_small(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n;
  do n = read(fd, buf, size - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return n;
}

// Whether fd `fd` of `pid` is the session's input: `input` itself, or on a terminal /dev/tty.
static int is_input(pid_t pid, unsigned long long fd, const char *input, int pty) {
  if (fd > INT_MAX) return 0;
  char path[64], target[PATH_MAX];
  snprintf(path, sizeof path, "/proc/%d/fd/%llu", (int)pid, fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n < 0) return 0;
  target[n] = 0;
  return strcmp(target, input) == 0 || (pty && strcmp(target, "/dev/tty") == 0);
}

#define MAX_TREE 64

// pid when a process of the tree is blocked reading the input, -pid for the first one found in
// poll/select with it as fd 0 (less certain), else 0. Breadth first, at most MAX_TREE processes.
static int find_reader(pid_t leader, const char *input, int pty) {
  pid_t queue[MAX_TREE];
  int head = 0, tail = 0, waiting = 0;
  char buf[4096], path[64];
  queue[tail++] = leader;
  while (head < tail) {
    pid_t pid = queue[head++];
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
    if (read_small(path, buf, sizeof buf) > 0 && buf[0] != 'r') {  // "running": in no syscall
      char *end;
      long nr = strtol(buf, &end, 10);
      if (*end == ' ') {
        unsigned long long arg0 = strtoull(end + 1, NULL, 0);
        if (is_read_call(nr) && is_input(pid, arg0, input, pty)) return pid;
        if (is_wait_call(nr) && !waiting && is_input(pid, 0, input, pty)) waiting = -pid;
      }
    }
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0) continue;
    for (char *p = buf; *p && tail < MAX_TREE;) {
      char *end;
      long child = strtol(p, &end, 10);
      if (end == p) break;
      if (child > 0) queue[tail++] = (pid_t)child;
      p = end;
    }
  }
  return waiting;
}

// The looks run on a thread of the addon's own, "procctl-looks", at SCHED_IDLE: it runs only
// when the core has nothing else to run, so a look never takes the core from the daemon's main
// thread (which serves requests) the way a libuv pool thread at normal priority does the moment
// the watcher's tick wakes it. The pool is shared with fs work, so its threads keep their policy.
// The thread is made at the first look, fed by a queue under a lock, and hands each batch back
// to the main thread through a threadsafe function, which resolves the promise. That function
// keeps the event loop alive only while a batch is out. A batch the thread has not answered
// within LOOK_LATE_MS of being asked for late (stdinReadersLate, from src/interrupt/kernel.ts:
// a CPU-bound machine can starve an idle thread) runs on the pool as well; the first answer
// wins, and the thread skips what is left of an answered batch. When the thread cannot be made,
// every look runs on the pool, as before (lookThread says why, for the log). A planned restart
// (src/daemon/handover) execs a new image in this PID: the exec ends the thread (its SIGKILL
// from the kernel is taken at once; the exec takes no longer with it), and a batch still out
// goes with the old image, where nothing waits for it: the exec is synchronous, and the new
// image's watcher starts its looks afresh. All its descriptors are close-on-exec.

struct look {
  pid_t leader;
  int pty;
  char *input;
  int result;       // the thread's answer
  int pool_result;  // the pool's, when the batch ran there
};

struct looker;

struct looks {
  struct looker *looker;   // NULL when it never went to the thread
  napi_async_work work;  // its run on the pool, if any
  napi_deferred deferred;
  uint32_t n;
  struct look *items;
  struct looks *next;      // in the thread's queue (under the looker's lock)
  struct looks *next_out;  // among the batches out, not answered (main thread)
  atomic_int answered;     // the promise is settled: the thread need not finish it
  int holders;             // the thread and the pool, each while it has the batch (main thread)
  bool on_pool;
  bool settled;
};

struct looker {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct looks *head, *tail;  // queued for the thread (under lock)
  bool stop;                  // the environment is going (under lock)
  int holders;                // the environment, and the thread while it runs (under lock)
  // Main thread only:
  int state;                  // 0: not made yet; 1: running; -1: could not be made (the pool)
  char failure[128];
  napi_threadsafe_function tsfn;
  struct looks *out;          // batches given to the thread, not answered yet
  uint32_t waiting;           // how many: the threadsafe function is ref'd while > 0
  atomic_int policy_error;    // the thread's sched_setscheduler errno, 0 when at SCHED_IDLE, -1 when left at normal priority
  atomic_bool idle;           // whether the thread is to run at SCHED_IDLE (lookThreadIdle; by default yes)
};

static void free_looks(struct looks *l) {
  for (uint32_t i = 0; i < l->n; i++) free(l->items[i].input);
  free(l->items);
  free(l);
}

static void looker_release(struct looker *k) {
  pthread_mutex_lock(&k->lock);
  bool last = --k->holders == 0;
  pthread_mutex_unlock(&k->lock);
  if (!last) return;
  for (struct looks *l = k->head, *next; l; l = next) {
    next = l->next;
    free_looks(l);
  }
  pthread_mutex_destroy(&k->lock);
  pthread_cond_destroy(&k->wake);
  free(k);
}

static void settle_looks(napi_env env, struct looks *l, bool pool, napi_status status);

// The thread: take a batch, look, hand it back; until the environment goes.
static void *looks_thread(void *data) {
  struct looker *k = data;
  pthread_setname_np(pthread_self(), "procctl-looks");
  struct sched_param none = {0};
  if (atomic_load(&k->idle)) atomic_store(&k->policy_error, sched_setscheduler(0, SCHED_IDLE, &none) == 0 ? 0 : errno);
  else atomic_store(&k->policy_error, -1);
  pthread_mutex_lock(&k->lock);
  for (;;) {
    while (!k->head && !k->stop) pthread_cond_wait(&k->wake, &k->lock);
    if (k->stop) break;
    struct looks *l = k->head;
    if (!(k->head = l->next)) k->tail = NULL;
    pthread_mutex_unlock(&k->lock);
    for (uint32_t i = 0; i < l->n && !atomic_load(&l->answered); i++) l->items[i].result = find_reader(l->items[i].leader, l->items[i].input, l->items[i].pty);
    pthread_mutex_lock(&k->lock);
    // Under the lock: once `stop` is set, the threadsafe function may be gone.
    if (k->stop || napi_call_threadsafe_function(k->tsfn, l, napi_tsfn_nonblocking) != napi_ok) break;
  }
  pthread_mutex_unlock(&k->lock);
  looker_release(k);
  return NULL;
}

// The main thread's side of a batch the thread is done with. No env: the environment is going.
static void looks_back(napi_env env, napi_value js_callback, void *context, void *data) {
  struct looks *l = data;
  if (!env) return;
  l->holders--;
  settle_looks(env, l, false, napi_ok);
}

// Stop the thread before Node closes the threadsafe function (this hook is added after it, and
// hooks run in reverse order); the thread frees what is left when it has stopped.
static void looker_stop(void *data) {
  struct looker *k = data;
  pthread_mutex_lock(&k->lock);
  k->stop = true;
  pthread_cond_signal(&k->wake);
  pthread_mutex_unlock(&k->lock);
}

static void looker_gone(void *data) {
  looker_release(data);
}

// Make the thread, once. False (and the reason kept) when it cannot be.
static bool looker_start(napi_env env, struct looker *k) {
  if (k->state) return k->state > 0;
  k->state = -1;
  napi_value name;
  if (napi_create_string_utf8(env, "procctl:looks", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, k, looks_back, &k->tsfn) != napi_ok) {
    snprintf(k->failure, sizeof k->failure, "cannot make the threadsafe function");
    return false;
  }
  napi_unref_threadsafe_function(env, k->tsfn);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  // No signal handler of the daemon's runs on it: it starts with every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  k->holders++;
  pthread_t thread;
  int err = pthread_create(&thread, &attr, looks_thread, k);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (err) {
    k->holders--;
    snprintf(k->failure, sizeof k->failure, "pthread_create: %s", strerror(err));
    napi_release_threadsafe_function(k->tsfn, napi_tsfn_abort);
    return false;
  }
  napi_add_env_cleanup_hook(env, looker_stop, k);
  k->state = 1;
  return true;
}

static void looks_execute(napi_env env, void *data) {
  struct looks *l = data;
  for (uint32_t i = 0; i < l->n && !atomic_load(&l->answered); i++) l->items[i].pool_result = find_reader(l->items[i].leader, l->items[i].input, l->items[i].pty);
}

static void looks_complete(napi_env env, napi_status status, void *data) {
  struct looks *l = data;
  napi_delete_async_work(env, l->work);
  l->holders--;
  settle_looks(env, l, true, status);
}

// Run a batch on the pool (besides the thread, or instead of it); false when it cannot be queued.
static bool looks_to_pool(napi_env env, struct looks *l) {
  napi_value name;
  if (napi_create_string_utf8(env, "procctl:stdinReaders", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, looks_execute, looks_complete, l, &l->work) != napi_ok) return false;
  if (napi_queue_async_work(env, l->work) != napi_ok) {
    napi_delete_async_work(env, l->work);
    return false;
  }
  l->on_pool = true;
  l->holders++;
  return true;
}

// The environment's looker (NULL when it could not be allocated: the looks run on the pool).
static struct looker *the_looker(napi_env env, napi_callback_info info, size_t *argc, napi_value *args) {
  void *data = NULL;
  if (napi_get_cb_info(env, info, argc, args, NULL, &data) != napi_ok) *argc = 0;
  return data;
}

// Off the list of batches out; the threadsafe function stops holding the loop with the last.
static void looks_answered(napi_env env, struct looker *k, struct looks *l) {
  for (struct looks **p = &k->out; *p; p = &(*p)->next_out) {
    if (*p == l) {
      *p = l->next_out;
      if (--k->waiting == 0) napi_unref_threadsafe_function(env, k->tsfn);
      return;
    }
  }
}

// The first answer settles the promise (the thread's or the pool's); the batch is freed when
// neither has it any more.
static void settle_looks(napi_env env, struct looks *l, bool pool, napi_status status) {
  if (!l->settled && (status == napi_ok || l->holders == 0)) {
    l->settled = true;
    atomic_store(&l->answered, 1);
    if (l->looker) looks_answered(env, l->looker, l);
    napi_value answer;
    if (status == napi_ok && napi_create_array_with_length(env, l->n, &answer) == napi_ok) {
      for (uint32_t i = 0; i < l->n; i++) napi_set_element(env, answer, i, procctl_int32(env, pool ? l->items[i].pool_result : l->items[i].result));
      napi_resolve_deferred(env, l->deferred, answer);
    } else {
      napi_value msg, error;
      napi_create_string_utf8(env, "procctl stdinReaders: the look did not run", NAPI_AUTO_LENGTH, &msg);
      napi_create_error(env, NULL, msg, &error);
      napi_reject_deferred(env, l->deferred, error);
    }
  }
  if (l->holders > 0) return;
  free_looks(l);
}


// stdinReaders([[leader, input, pty], ...]) -> Promise<number[]>: for each entry, pid when a
// process of the leader's tree is blocked reading `input` (what the leader's fd 0 pointed at,
// `pipe:[123]`, `/dev/pts/4`; on a terminal also /dev/tty), -pid when one waits in poll/select
// with it as fd 0, 0 when none does. The /proc reads run on the looks thread (above).
static napi_value StdinReaders(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1], promise;
  struct looker *k = the_looker(env, info, &argc, args);
  uint32_t n = 0;
  bool is_array = false;
  if (argc < 1 || napi_is_array(env, args[0], &is_array) != napi_ok || !is_array || napi_get_array_length(env, args[0], &n) != napi_ok) {
    return procctl_throw_usage(env, "stdinReaders([[leader, input, pty], ...])");
  }
  struct looks *l = calloc(1, sizeof *l);
  if (!l || !(l->items = calloc(n ? n : 1, sizeof *l->items))) {
    free(l);
    return throw_errno(env, ENOMEM);
  }
  int bad = 0;
  for (uint32_t i = 0; i < n && !bad; i++) {
    napi_value entry, v;
    int32_t leader = 0;
    bool pty = false;
    l->n = i + 1;
    if (napi_get_element(env, args[0], i, &entry) != napi_ok || napi_get_element(env, entry, 0, &v) != napi_ok ||
        napi_get_value_int32(env, v, &leader) != napi_ok || leader <= 0 || napi_get_element(env, entry, 1, &v) != napi_ok) {
      bad = 1;
      break;
    }
    l->items[i].input = string_arg(env, v, &bad);
    if (napi_get_element(env, entry, 2, &v) == napi_ok) napi_get_value_bool(env, v, &pty);
    l->items[i].leader = leader;
    l->items[i].pty = pty;
  }
  if (bad) {
    free_looks(l);
    return procctl_throw_usage(env, "stdinReaders: each entry is [leader pid, input as a string without NUL bytes, pty]");
  }
  if (napi_create_promise(env, &l->deferred, &promise) != napi_ok) {
    free_looks(l);
    napi_throw_error(env, NULL, "procctl stdinReaders: cannot queue the look");
    return NULL;
  }
  if (k && looker_start(env, k)) {
    l->looker = k;
    l->holders = 1;
    l->next_out = k->out;
    k->out = l;
    if (k->waiting++ == 0) napi_ref_threadsafe_function(env, k->tsfn);
    pthread_mutex_lock(&k->lock);
    if (k->tail) k->tail->next = l;
    else k->head = l;
    k->tail = l;
    pthread_cond_signal(&k->wake);
    pthread_mutex_unlock(&k->lock);
  } else if (!looks_to_pool(env, l)) {
    // The promise is made: it is rejected rather than left pending.
    settle_looks(env, l, true, napi_generic_failure);
  }
  return promise;
}

// stdinReadersLate(): every batch still out with the thread runs on the pool as well; the first
// answer settles its promise. For a caller whose look has waited too long (an idle thread
// waits as long as the machine's cores are busy). Returns how many batches went.
static napi_value StdinReadersLate(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  struct looker *k = the_looker(env, info, &argc, NULL);
  int32_t moved = 0;
  if (k) {
    for (struct looks *l = k->out; l; l = l->next_out) {
      if (!l->on_pool && looks_to_pool(env, l)) moved++;
    }
  }
  return procctl_int32(env, moved);
}

// lookThread() -> { state: 'none' | 'thread' | 'pool', why?, policy? }: where the looks run:
// not asked yet, on the idle thread (policy: 'idle', or why it is not), or on the pool (why).
static napi_value LookThread(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  struct looker *k = the_looker(env, info, &argc, NULL);
  napi_value answer = procctl_object(env), v;
  int state = k ? k->state : -1;
  napi_create_string_utf8(env, state == 0 ? "none" : state > 0 ? "thread" : "pool", NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, answer, "state", v);
  if (state < 0) {
    napi_create_string_utf8(env, k ? k->failure : "no looker", NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, answer, "why", v);
  } else if (state > 0) {
    int err = atomic_load(&k->policy_error);
    napi_create_string_utf8(env, err == 0 ? "idle" : err == -1 ? "normal" : strerror(err), NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, answer, "policy", v);
  }
  return answer;
}

// lookThreadIdle(idle): whether the looks thread, when it is made, runs at SCHED_IDLE (by default)
// or at normal priority. An idle thread that hands a batch back holds the threadsafe function's
// lock while it wakes the main thread, which preempts it and may then wait for that lock; where
// jobs share the daemon's CPU group (no cpu controller for sessions), the idle thread may wait
// long for the core, and the main thread with it. The daemon asks for normal priority there.
static napi_value LookThreadIdle(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1];
  struct looker *k = the_looker(env, info, &argc, args);
  bool idle = true;
  if (argc < 1 || napi_get_value_bool(env, args[0], &idle) != napi_ok) return procctl_throw_usage(env, "lookThreadIdle(idle: boolean)");
  if (k) atomic_store(&k->idle, idle);
  return NULL;
}

// The looks' functions share one looker per environment (a worker has its own).
static void looks_init(napi_env env, napi_value exports) {
  struct looker *k = calloc(1, sizeof *k);
  if (k) {
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->wake, NULL);
    k->holders = 1;
    atomic_store(&k->idle, true);
    napi_add_env_cleanup_hook(env, looker_gone, k);
  }
  const struct { const char *name; napi_callback fn; } fns[] = {
    {"stdinReaders", StdinReaders}, {"stdinReadersLate", StdinReadersLate}, {"lookThread", LookThread}, {"lookThreadIdle", LookThreadIdle}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, k, &f) == napi_ok) napi_set_named_property(env, exports, fns[i].name, f);
  }
}

// --- Mounts made ahead -----------------------------------------------------------------------
// A review session's overlay costs its exec the mount itself, and the kernel makes several
// inodes in the upper directory's file system for it (1-8 ms on an ext4 without a journal). So
// the next session's namespaces can be made ahead, off the request: a child that shares the
// daemon's memory and descriptor table (CLONE_VM | CLONE_VFORK | CLONE_FILES) makes them as
// child_mounts would, opens them into that shared table and exits; the spawner then joins them
// (steps.mounts.enter). The child's exit signal is 0, so the reaper's waitid never names it.
struct premount {
  napi_async_work work;
  napi_deferred deferred;
  struct steps st;
  struct job job;         // for child_mounts: its steps, and where a failure is written
  int user, mnt;
};

#define PREMOUNT_STACK (64 * 1024)

static int premount_child(void *data) {
  struct premount *p = data;
  struct steps *st = &p->st;
  st->entering = 0;
  child_mounts(&p->job);
  // Each descriptor is written down as soon as it exists: the parent closes what a failure left.
  if ((st->ns & CLONE_NEWUSER) && (p->user = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC)) < 0) child_fail(&p->job, errno, "open");
  if ((p->mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0) child_fail(&p->job, errno, "open");
  _exit(0);
}

static void premount_execute(napi_env env, void *data) {
  struct premount *p = data;
  uint64_t old;
  set_all_signals_blocked(1, &old);  // no handler of the daemon's may run in the child (glibc's own signals included)
  void *stack = mmap(NULL, PREMOUNT_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    p->job.error = errno;
    p->job.step = "mmap";
  } else {
    pid_t pid = clone(premount_child, (char *)stack + PREMOUNT_STACK, CLONE_VM | CLONE_VFORK | CLONE_FILES, p);
    if (pid < 0) {
      p->job.error = errno;
      p->job.step = "clone";
    } else {
      int status = 0;
      while (waitpid(pid, &status, __WALL) < 0 && errno == EINTR) {}
      // Killed before it could say (a signal, the OOM killer), or gone without both descriptors: failed.
      if (!p->job.error && (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || p->mnt < 0)) {
        p->job.error = EIO;
        p->job.step = "child";
      }
    }
    munmap(stack, PREMOUNT_STACK);
  }
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
  // A failure after the first descriptor was opened leaves it in the table: closed here.
  if (p->job.error) {
    if (p->user >= 0) close(p->user);
    if (p->mnt >= 0) close(p->mnt);
    p->user = p->mnt = -1;
  }
}

static void premount_complete(napi_env env, napi_status status, void *data) {
  struct premount *p = data;
  if (status == napi_ok && !p->job.error) {
    napi_value answer = procctl_object(env);
    procctl_set_int32(env, answer, "user", p->user);
    procctl_set_int32(env, answer, "mnt", p->mnt);
    napi_resolve_deferred(env, p->deferred, answer);
  } else {
    napi_value error = errno_error(env, p->job.error ? p->job.error : EIO), step;
    napi_create_string_utf8(env, p->job.step ? (const char *)p->job.step : "async", NAPI_AUTO_LENGTH, &step);
    napi_set_named_property(env, error, "syscall", step);
    napi_reject_deferred(env, p->deferred, error);
  }
  napi_delete_async_work(env, p->work);
  free_steps(&p->st);
  free(p);
}

// prepareMounts({mounts: {userns, overlays}}) -> Promise<{user, mnt}>: the namespaces a review
// job would get, with its overlays mounted, as descriptors (close-on-exec) for steps.mounts.enter.
// Rejected with an Error whose code and syscall (the step) say what failed.
static napi_value PrepareMounts(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1], promise, name;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  struct premount *p = calloc(1, sizeof *p);
  if (!p) {
    napi_throw_error(env, NULL, "procctl prepareMounts: out of memory");
    return NULL;
  }
  p->user = p->mnt = -1;
  p->job.steps = &p->st;
  p->job.cloned_into = -1;
  napi_valuetype type = napi_undefined;
  if (argc < 1 || napi_typeof(env, args[0], &type) != napi_ok || type != napi_object || parse_mounts(env, args[0], &p->st) || p->st.noverlays == 0 || p->st.entering) {
    free_steps(&p->st);
    free(p);
    return procctl_throw_usage(env, "prepareMounts({mounts: {userns, overlays: [{target, options}]}})");
  }
  if (napi_create_promise(env, &p->deferred, &promise) != napi_ok ||
      napi_create_string_utf8(env, "procctl:prepareMounts", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, premount_execute, premount_complete, p, &p->work) != napi_ok) {
    free_steps(&p->st);
    free(p);
    napi_throw_error(env, NULL, "procctl prepareMounts: cannot queue the work");
    return NULL;
  }
  if (napi_queue_async_work(env, p->work) != napi_ok) {
    napi_delete_async_work(env, p->work);
    free_steps(&p->st);
    free(p);
    napi_throw_error(env, NULL, "procctl prepareMounts: cannot queue the work");
    return NULL;
  }
  return promise;
}

// mountsChanged(fd) -> whether the mount table behind fd (an open /proc/self/mountinfo) changed
// since the last call on it: the kernel marks the file POLLPRI once per change (one poll, no read).
static napi_value MountsChanged(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1];
  int32_t fd;
  CHECK(env, napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc < 1 || napi_get_value_int32(env, args[0], &fd) != napi_ok || fd < 0) return procctl_throw_usage(env, "mountsChanged(fd)");
  struct pollfd p = {fd, POLLPRI, 0};
  int r;
  do r = poll(&p, 1, 0);
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    throw_errno(env, errno);
    return NULL;
  }
  return procctl_bool(env, r > 0 && (p.revents & (POLLPRI | POLLERR)) != 0);
}

// Called by addon.c, the module's one init.
void procctl_spawn_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "exited", Exited);
  procctl_export(env, exports, "spawn", Spawn);
  procctl_export(env, exports, "reap", Reap);
  looks_init(env, exports);
  procctl_export(env, exports, "prepareMounts", PrepareMounts);
  procctl_export(env, exports, "mountsChanged", MountsChanged);
}
