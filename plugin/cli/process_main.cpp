// SPDX-License-Identifier: Apache-2.0
#include "plugin/cli/process_main.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <unistd.h>

#include "ibcni/os/file_io.h"
#include "lib/log/log.h"
#include "lib/log/timing.h"
#include "lib/result/result_json.h"

namespace ibcni::plugin {

namespace {

// The network configuration on stdin (at most 16 MiB). Not read when stdin is a terminal and
// CNI_COMMAND is unset: a person ran the plugin by hand with some other CNI_* variable set (a
// runtime never gives a terminal, and without any, runCommandLine shows the help instead). Dispatch
// fails with error 4 before it looks at a configuration, so none is waited for.
os::SysResult<std::string> readInput() {
  const char* command = std::getenv("CNI_COMMAND");
  if ((command == nullptr || *command == '\0') && ::isatty(STDIN_FILENO) == 1) {
    return std::string();
  }
  return os::readAllFd(STDIN_FILENO, std::size_t{16} << 20, "stdin");
}

}  // namespace

int runMain(const Entry& entry) {
  log::timing::start();
  auto input = readInput();
  log::timing::lap("stdin");
  Outcome out;
  try {
    out = entry(
        [](const char* name) -> std::optional<std::string> {
          const char* v = std::getenv(name);
          return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
        },
        input ? std::string_view(*input) : std::string_view(), input.has_value());
  } catch (const std::exception& e) {  // only bad_alloc or a bug can get here
    out = {result::printError({cni::Errc::kInternal, "unexpected exception", e.what()}, ""), 1};
  }
  log::timing::lap("finish");
  log::timing::report();
  log::flush();
  if (!out.stdoutText.empty()) {
    std::fwrite(out.stdoutText.data(), 1, out.stdoutText.size(), stdout);
  }
  if (std::fflush(stdout) != 0) {
    return 1;
  }
  return out.exitCode;
}

void appendCallEvent(state::CallEvents* sink, const Outcome& out, std::chrono::steady_clock::time_point start) noexcept {
  if (sink == nullptr || !out.verb) {
    return;
  }
  try {
    const auto elapsed = std::chrono::steady_clock::now() - start;
    state::CallEvent event;
    event.endUnixMillis = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    event.verb = *out.verb;
    event.network = out.network;
    event.code = out.code;
    event.durationSeconds = std::chrono::duration<double>(elapsed).count();
    if (auto r = sink->append(out.stateDir, event); !r) {
      log::debug("call event not recorded: {}", r.error().describe());
    }
  } catch (const std::exception& e) {  // bad_alloc: the event is lost, the call is not
    log::debug("call event not recorded: {}", e.what());
  }
}

}  // namespace ibcni::plugin
