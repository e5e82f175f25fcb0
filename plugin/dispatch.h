// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "plugin/deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/ipam/ipam.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// What the process prints on stdout and the status it exits with, and what the call's event
/// (ibcni/state/call_events.h) records.
struct Outcome {
  std::string stdoutText;  ///< a result, a version answer, an error object, or nothing
  int exitCode = 0;
  int code = 0;  ///< the CNI error code printed; 0 on success
  /// ADD, DEL, CHECK, GC or STATUS once CNI_COMMAND named one; nullopt for VERSION or none.
  std::optional<cni::Command> verb = std::nullopt;
  std::string network = {};  ///< the configuration's name; empty when it could not be parsed
  std::string stateDir = std::string(config::kDefaultStateDir);  ///< its stateDir, or the default
};

/// Reads one environment variable; nullopt when unset.
using Getenv = std::function<std::optional<std::string>(const char*)>;

/// What an executable does for each verb once the protocol layer has validated the invocation.
class Verbs {
 public:
  virtual ~Verbs() = default;
  /// How the configuration is read (ibcni's keys, or only what an IPAM plugin may look at).
  [[nodiscard]] virtual config::Role role() const = 0;
  [[nodiscard]] virtual cni::Result<cni::AddResult> add(const Invocation& inv) = 0;
  [[nodiscard]] virtual cni::Result<void> del(const Invocation& inv) = 0;
  [[nodiscard]] virtual cni::Result<void> check(const Invocation& inv) = 0;
  [[nodiscard]] virtual cni::Result<void> gc(const Invocation& inv) = 0;
  [[nodiscard]] virtual cni::Result<void> status(const Invocation& inv) = 0;
};

/// ibcni's verbs: commands/ over `deps`.
class PluginVerbs final : public Verbs {
 public:
  explicit PluginVerbs(Deps& deps) : deps_(deps) {}
  config::Role role() const override { return config::Role::kPlugin; }
  cni::Result<cni::AddResult> add(const Invocation& inv) override;
  cni::Result<void> del(const Invocation& inv) override;
  cni::Result<void> check(const Invocation& inv) override;
  cni::Result<void> gc(const Invocation& inv) override;
  cni::Result<void> status(const Invocation& inv) override;

 private:
  Deps& deps_;
};

/// An IPAM plugin's verbs: each is handed to `ipam` with the invocation's request.
class IpamVerbs final : public Verbs {
 public:
  explicit IpamVerbs(ipam::Ipam& ipam) : ipam_(ipam) {}
  config::Role role() const override { return config::Role::kIpamPlugin; }
  cni::Result<cni::AddResult> add(const Invocation& inv) override;
  cni::Result<void> del(const Invocation& inv) override;
  cni::Result<void> check(const Invocation& inv) override;
  cni::Result<void> gc(const Invocation& inv) override;
  cni::Result<void> status(const Invocation& inv) override;

 private:
  ipam::Ipam& ipam_;
};

/// The whole protocol as a pure function of (environment, stdin, verbs): validates the CNI_*
/// environment against the per-verb table, negotiates the version, parses the configuration, runs
/// the verb and turns any error into the spec's error object.
/// @param stdinOk  false when reading stdin failed (error 5)
[[nodiscard]] Outcome dispatch(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Verbs& verbs);

/// dispatch() with ibcni's own verbs.
[[nodiscard]] inline Outcome dispatch(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Deps& deps) {
  PluginVerbs verbs(deps);
  return dispatch(getenv, stdinText, stdinOk, verbs);
}

}  // namespace ibcni::plugin
