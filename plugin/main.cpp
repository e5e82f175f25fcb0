// SPDX-License-Identifier: Apache-2.0
// Wiring only: read stdin, build the real dependencies, dispatch, print, exit. This is the one
// place where errors become bytes on stdout and an exit status.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <unistd.h>

#include "dispatch.h"
#include "log/log.h"
#include "production_deps.h"
#include "result/result_json.h"

namespace {

bool readStdin(std::string& out) {
  char buf[65536];
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return true;
    } else if (errno != EINTR) {
      return false;
    }
  }
}

}  // namespace

int main() {
  std::string input;
  bool stdinOk = readStdin(input);
  ibcni::plugin::Outcome out;
  try {
    ibcni::plugin::ProductionDeps production;
    out = ibcni::plugin::dispatch(
        [](const char* name) -> std::optional<std::string> {
          const char* v = std::getenv(name);
          return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
        },
        input, stdinOk, production.deps());
  } catch (const std::exception& e) {  // only bad_alloc or a bug can get here
    out = {ibcni::result::printError({ibcni::cni::Errc::kInternal, "unexpected exception", e.what()}, ""), 1};
  }
  ibcni::log::flush();
  if (!out.stdoutText.empty()) {
    std::fwrite(out.stdoutText.data(), 1, out.stdoutText.size(), stdout);
  }
  if (std::fflush(stdout) != 0) {
    return 1;
  }
  return out.exitCode;
}
