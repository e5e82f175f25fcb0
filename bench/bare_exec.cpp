// SPDX-License-Identifier: Apache-2.0
// The floor of an exec'd IPAM plugin: a static program that reads its stdin to the end, as a
// plugin reads its configuration, and exits 0. ipam_bench runs it as it runs the plugins (fork,
// exec, environment, stdin, stdout and stderr through pipes): what a plugin's ADD+DEL takes beyond
// two runs of this is the plugin's own work.
#include <unistd.h>

int main() {
  char buf[4096];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}
