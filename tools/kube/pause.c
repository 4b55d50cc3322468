/* The pod sandbox's process for loadlab's local cluster (scripts/kube-up.sh): it holds the
 * pod's namespaces and does nothing until it is told to stop. Kubernetes' own pause image
 * comes from a registry, which the cluster here does not reach; this one is built by the
 * project and imported into containerd. As PID 1 of its pod it also reaps orphaned children. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &on_stop, NULL);
  sigaction(SIGTERM, &on_stop, NULL);
  sigaction(SIGCHLD, &on_child, NULL);
  for (;;) {
    pause();
  }
  return EXIT_FAILURE;
}
