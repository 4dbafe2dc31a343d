// SPDX-License-Identifier: Apache-2.0
//
// The sandbox ("pause") process of the test nodes' pods, written for this test environment: it
// holds the pod's namespaces, reaps the orphans that land on it as PID 1 of a shared PID
// namespace, and exits 0 on SIGINT or SIGTERM. Built static by testenv/kube/build-images.sh.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (slurm-bridge test environment)");
    return 0;
  }
  if (getpid() != 1) {
    fputs("pause: warning: not PID 1\n", stderr);
  }
  struct sigaction quit_action = {.sa_handler = quit};
  struct sigaction reap_action = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &quit_action, NULL) < 0 || sigaction(SIGTERM, &quit_action, NULL) < 0 ||
      sigaction(SIGCHLD, &reap_action, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
