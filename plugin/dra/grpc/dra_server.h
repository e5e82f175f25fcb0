// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's two gRPC servers on Unix sockets: the DRAPlugin service on
// <plugins>/<driver>/dra.sock and the Registration service on <registry>/<driver>-reg.sock, which
// the kubelet's plugin watcher finds. The service's socket is up before the registration's, so the
// kubelet never dials an endpoint that is not there yet; on stop the registration's goes first.
// Rolling updates: gRPC removes a Unix socket's path when its server stops, whoever bound it last,
// so two instances cannot share a path. With an instance id (the pod's uid) the sockets are
// <driver>-<id>-reg.sock and dra-<id>.sock, as the upstream kubeletplugin helper names them, and the
// kubelet (1.33+) keeps both registrations while old and new run side by side.
#pragma once

#include <sys/types.h>

#include <expected>
#include <memory>
#include <string>

#include "plugin/dra/claim_preparer.h"
#include "plugin/dra/grpc/kubelet_services.h"

namespace grpc {
class Server;
}

namespace ibcni::dra::grpc_api {

struct ServerPaths {
  std::string registryDir;  ///< the kubelet's plugin registry (/var/lib/kubelet/plugins_registry)
  std::string pluginsDir;   ///< the kubelet's plugin folder (/var/lib/kubelet/plugins)
  std::string instance;     ///< "" or this instance's id (the pod's uid): sockets of its own

  [[nodiscard]] std::string registrationSocket(const std::string& driver) const;
  [[nodiscard]] std::string draSocket(const std::string& driver) const;
};

class DraServer {
 public:
  /// Binds both sockets (a stale file at either path is replaced) and serves until stop().
  [[nodiscard]] static std::expected<std::unique_ptr<DraServer>, std::string> start(
      const ServerPaths& paths, const std::string& driver, ClaimPreparer& preparer,
      RegistrationService::StatusHandler onStatus);
  ~DraServer();
  DraServer(const DraServer&) = delete;
  DraServer& operator=(const DraServer&) = delete;

  /// Stops serving and removes the sockets that are still ours. Idempotent.
  void stop();

 private:
  /// A socket path and the inode this process bound there.
  struct Bound {
    std::string path;
    ino_t inode = 0;
  };
  DraServer(ClaimPreparer& preparer, const std::string& driver, const std::string& endpoint,
            RegistrationService::StatusHandler onStatus);

  DraServiceV1 v1_;
  DraServiceV1beta1 v1beta1_;
  RegistrationService registration_;
  std::unique_ptr<grpc::Server> draServer_;
  std::unique_ptr<grpc::Server> registrationServer_;
  Bound draSocket_;
  Bound registrationSocket_;
};

}  // namespace ibcni::dra::grpc_api
