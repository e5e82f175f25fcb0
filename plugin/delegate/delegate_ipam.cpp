// SPDX-License-Identifier: Apache-2.0
#include "plugin/delegate/delegate_ipam.h"

#include "plugin/delegate/exec.h"
#include "lib/log/log.h"
#include "lib/result/result_json.h"

namespace ibcni::delegate {

namespace {

std::string joinPath(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs) {
    out += (out.empty() ? "" : ":") + d;
  }
  return out;
}

}  // namespace

cni::Result<std::string> DelegateIpam::run(const Request& request, const char* verb) {
  if (request.args.path.empty()) {
    return cni::fail(cni::Errc::kInvalidEnvironment,
                     "CNI_PATH is empty, but ipam.type = \"" + std::string(request.ipamType) +
                         "\" must be found in it: set CNI_PATH to the directories holding CNI plugins");
  }
  std::string binary = findInPath(std::string(request.ipamType), request.args.path);
  if (binary.empty()) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "ipam.type = \"" + std::string(request.ipamType) + "\": no such IPAM plugin in CNI_PATH; install it "
                     "there or fix ipam.type",
                     "CNI_PATH=" + joinPath(request.args.path));
  }
  // The delegate runs with ibcni's environment; the CNI_* variables are the request's (they are
  // ibcni's own except when GC releases a recorded attachment on its behalf).
  std::vector<std::string> env;
  env.reserve(environment_.size() + 6);
  for (const auto& e : environment_) {
    if (!e.starts_with("CNI_COMMAND=") && !e.starts_with("CNI_CONTAINERID=") && !e.starts_with("CNI_NETNS=") &&
        !e.starts_with("CNI_IFNAME=") && !e.starts_with("CNI_ARGS=") && !e.starts_with("CNI_PATH=")) {
      env.push_back(e);
    }
  }
  env.push_back(std::string("CNI_COMMAND=") + verb);
  env.push_back("CNI_CONTAINERID=" + request.args.containerId);
  env.push_back("CNI_NETNS=" + request.args.netns);
  env.push_back("CNI_IFNAME=" + request.args.ifName);
  env.push_back("CNI_ARGS=" + request.args.rawArgs);
  env.push_back("CNI_PATH=" + joinPath(request.args.path));

  log::debug("running ipam plugin {} {}", binary, verb);
  auto out = runProcess(binary, env, request.rawConfig, timeout_);
  if (!out) {
    return cni::fail(out.error().err == ETIMEDOUT ? cni::Errc::kTryAgainLater : cni::Errc::kIpamFailure,
                     std::string("ipam plugin \"") + std::string(request.ipamType) + "\" " + verb + " could not be run",
                     out.error().describe());
  }
  if (out->exitStatus != 0) {
    auto err = result::parseError(out->stdoutText);
    if (err) {
      // Keep the delegate's code: the runtime (and the user) should see what the IPAM said.
      err->msg = "ipam plugin \"" + std::string(request.ipamType) + "\" " + verb + " failed: " + err->msg;
      return std::unexpected(*err);
    }
    return cni::fail(cni::Errc::kIpamFailure,
                     "ipam plugin \"" + std::string(request.ipamType) + "\" " + verb + " failed with exit status " +
                         std::to_string(out->exitStatus),
                     out->stdoutText.substr(0, 500));
  }
  return std::move(out->stdoutText);
}

cni::Result<cni::AddResult> DelegateIpam::add(const Request& request) {
  auto out = run(request, "ADD");
  if (!out) {
    return std::unexpected(out.error());
  }
  return result::parseResult(*out, cni::Errc::kIpamFailure, "ipam plugin \"" + std::string(request.ipamType) + "\" result");
}

cni::Result<void> DelegateIpam::runVerb(const Request& request, const char* verb) {
  auto out = run(request, verb);
  if (!out) {
    return std::unexpected(out.error());
  }
  return {};
}

cni::Result<void> DelegateIpam::del(const Request& request) {
  if (findInPath(std::string(request.ipamType), request.args.path).empty()) {
    // An IPAM plugin that is not installed can neither hold nor release anything now; failing DEL
    // for it would only leave the pod stuck in Terminating.
    log::warn("ipam.type = \"{}\" is not in CNI_PATH: nothing to release", request.ipamType);
    return {};
  }
  return runVerb(request, "DEL");
}

cni::Result<void> DelegateIpam::check(const Request& request) { return runVerb(request, "CHECK"); }

cni::Result<void> DelegateIpam::gc(const Request& request) { return runVerb(request, "GC"); }

cni::Result<void> DelegateIpam::status(const Request& request) { return runVerb(request, "STATUS"); }

}  // namespace ibcni::delegate
