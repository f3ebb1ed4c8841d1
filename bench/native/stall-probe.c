/*
 * How often this machine holds up a thread that is running (bench/tails.ts reads it beside the
 * p99 ratios): windows of pure arithmetic of WINDOW_US, and windows that read one byte from each of
 * PAGES pages picked at random in a 256 MiB buffer (the same pages every window, so after the
 * first they are only the TLB's misses, never the kernel's faults), each after GAP_US of arithmetic
 * that touches no memory, as a server's requests come apart. A window that took STALL_US
 * more than the fastest of its kind was held up by something outside it (an interrupt, or on a
 * VM the hypervisor: which, the probe cannot tell). Prints one line a kind:
 *   compute WINDOW_US PERCENT_STALLED MEDIAN_STALL_US
 *   pages PAGES PERCENT_STALLED MEDIAN_STALL_US
 * Usage: stall-probe WINDOW_US PAGES GAP_US WINDOWS (run it where the thread it speaks for runs).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STALL_US 20.0
#define BUFFER (256ul << 20)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The share of windows at least STALL_US over the fastest, and the median of those excesses. */
static void report(const char *kind, long size, double *took, int n) {
  double fastest = took[0];
  for (int i = 1; i < n; i++)
    if (took[i] < fastest) fastest = took[i];
  int stalled = 0;
  for (int i = 0; i < n; i++)
    if (took[i] - fastest >= STALL_US) took[stalled++] = took[i] - fastest;
  qsort(took, stalled, sizeof *took, by_value);
  printf("%s %ld %.3f %.1f\n", kind, size, 100.0 * stalled / n, stalled ? took[stalled / 2] : 0.0);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: stall-probe WINDOW_US PAGES GAP_US WINDOWS\n");
    return 2;
  }
  double window = atof(argv[1]);
  long pages = atol(argv[2]);
  double gap = atof(argv[3]);
  int n = atoi(argv[4]);
  double *took = malloc(sizeof *took * n);
  size_t *at = malloc(sizeof *at * pages);
  volatile char *buffer = malloc(BUFFER);
  if (!took || !at || !buffer || n < 1) return 1;
  volatile double x = 1;

  /* Loops of arithmetic that take WINDOW_US on this CPU, found by doubling. */
  long loops = 1000;
  for (;;) {
    double a = now_us();
    for (long i = 0; i < loops; i++) x = x * 1.0000001 + 1e-9;
    if (now_us() - a >= window) break;
    loops *= 2;
  }
  for (int w = 0; w < n; w++) {
    double a = now_us();
    for (long i = 0; i < loops; i++) x = x * 1.0000001 + 1e-9;
    took[w] = now_us() - a;
  }
  report("compute", (long)window, took, n);

  memset((char *)buffer, 1, BUFFER);
  srandom(1);
  for (long i = 0; i < pages; i++) at[i] = (size_t)(random() % (BUFFER / 4096)) * 4096;
  long sum = 0;
  for (int w = 0; w < n; w++) {
    for (double until = now_us() + gap; now_us() < until;) x = x * 1.0000001 + 1e-9;
    double a = now_us();
    for (long i = 0; i < pages; i++) sum += buffer[at[i] + (w & 63)];
    took[w] = now_us() - a;
  }
  report("pages", pages, took, n);
  return sum == -1;
}
