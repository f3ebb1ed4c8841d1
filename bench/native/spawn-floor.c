/*
 * The kernel's floor for the exec round trip (bench/exec-roundtrip.ts): posix_spawn of the
 * daemon's shell with its arguments, and waitpid for it, nothing else. Compiled at bench time
 * with the system's cc. One run per byte read on stdin; each answers a line with the run's
 * wall time and this process's own CPU time (user + system; not the shell's, as the daemon's
 * and Node's figures leave out their children's), both in milliseconds, so the bench can interleave it with the daemon and with Node's spawn.
 * Usage: spawn-floor FILE ARG... (the environment is the one it was started with).
 */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double ms(struct timespec t) { return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static double tv(struct timeval t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; }
static double cpu(void) {
  struct rusage self;
  getrusage(RUSAGE_SELF, &self);
  return tv(self.ru_utime) + tv(self.ru_stime);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: spawn-floor FILE ARG...\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  char c;
  while (read(0, &c, 1) == 1) {
    double cpu0 = cpu();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid;
    int err = posix_spawn(&pid, argv[1], NULL, NULL, argv + 1, environ);
    if (err) {
      fprintf(stderr, "posix_spawn %s: error %d\n", argv[1], err);
      return 1;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
      perror("waitpid");
      return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.6f %.6f %d\n", ms(t1) - ms(t0), cpu() - cpu0, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return 0;
}
