// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ibcni/ipam/ipam.h"

namespace ibcni::delegate {

using ipam::Request;

/// Runs the IPAM plugin named by ipam.type from CNI_PATH, per the spec's delegation rules: the same
/// environment (CNI_* taken from the request) with CNI_COMMAND set to the verb, the complete request configuration on stdin, its
/// stdout parsed as a result or an error, its stderr left to the runtime's log.
class DelegateIpam final : public ipam::Ipam {
 public:
  /// @param environment  the KEY=VALUE environment ibcni was started with
  explicit DelegateIpam(std::vector<std::string> environment,
                        std::chrono::milliseconds timeout = std::chrono::seconds(120))
      : environment_(std::move(environment)), timeout_(timeout) {}

  cni::Result<cni::AddResult> add(const Request& request) override;
  /// Succeeds (with a warning) when the plugin is not in CNI_PATH: nothing can be released then.
  cni::Result<void> del(const Request& request) override;
  cni::Result<void> check(const Request& request) override;
  cni::Result<void> gc(const Request& request) override;
  cni::Result<void> status(const Request& request) override;

 private:
  /// Runs the plugin for `verb` and returns its stdout.
  cni::Result<std::string> run(const Request& request, const char* verb);
  /// Runs a verb whose stdout carries nothing on success.
  cni::Result<void> runVerb(const Request& request, const char* verb);

  std::vector<std::string> environment_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ibcni::delegate
