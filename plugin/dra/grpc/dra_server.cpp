// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/grpc/dra_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <utility>

namespace ibcni::dra::grpc_api {

namespace {

/// The inode at `path`, 0 when there is none.
ino_t inodeAt(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

/// A server of `services` on Unix socket `path`, its parent made and a stale file replaced.
std::expected<std::unique_ptr<grpc::Server>, std::string> serve(std::initializer_list<grpc::Service*> services,
                                                                const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) {
    return std::unexpected("make the folder of " + path + ": " + ec.message());
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return std::unexpected("remove the stale socket " + path + ": " + std::strerror(errno));
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  // The kubelet calls one driver at a time per pod and rarely: one completion queue, few pollers
  // (every thread costs a stack and a malloc arena of the daemon's resident set).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  for (auto* service : services) {
    builder.RegisterService(service);
  }
  auto server = builder.BuildAndStart();
  if (!server) {
    return std::unexpected("serve gRPC on " + path + ": the socket could not be bound");
  }
  return server;
}

}  // namespace

std::string ServerPaths::registrationSocket(const std::string& driver) const {
  return registryDir + "/" + driver + (instance.empty() ? "" : "-" + instance) + "-reg.sock";
}

std::string ServerPaths::draSocket(const std::string& driver) const {
  return pluginsDir + "/" + driver + "/dra" + (instance.empty() ? "" : "-" + instance) + ".sock";
}

DraServer::DraServer(ClaimPreparer& preparer, const std::string& driver, const std::string& endpoint,
                     RegistrationService::StatusHandler onStatus)
    : v1_(preparer), v1beta1_(preparer), registration_(driver, endpoint, std::move(onStatus)) {}

std::expected<std::unique_ptr<DraServer>, std::string> DraServer::start(const ServerPaths& paths,
                                                                         const std::string& driver,
                                                                         ClaimPreparer& preparer,
                                                                         RegistrationService::StatusHandler onStatus) {
  const std::string endpoint = paths.draSocket(driver);
  std::unique_ptr<DraServer> s(new DraServer(preparer, driver, endpoint, std::move(onStatus)));
  // One server, both versions: the kubelet picks the newest both sides know.
  auto dra = serve({&s->v1_, &s->v1beta1_}, endpoint);
  if (!dra) {
    return std::unexpected(dra.error());
  }
  s->draServer_ = std::move(*dra);
  s->draSocket_ = {endpoint, inodeAt(endpoint)};
  const std::string registration = paths.registrationSocket(driver);
  auto reg = serve({&s->registration_}, registration);
  if (!reg) {
    return std::unexpected(reg.error());
  }
  s->registrationServer_ = std::move(*reg);
  s->registrationSocket_ = {registration, inodeAt(registration)};
  return s;
}

void DraServer::stop() {
  auto removeIfOurs = [](Bound& b) {
    if (!b.path.empty() && b.inode != 0 && inodeAt(b.path) == b.inode) {
      ::unlink(b.path.c_str());
    }
    b = {};
  };
  // The registration first: the kubelet's watcher sees the plugin go before its endpoint does.
  removeIfOurs(registrationSocket_);
  // A call in progress gets a second to finish (its handler runs to the end either way, its
  // steps recorded ahead); without a deadline a connected kubelet held the stop for 5 s.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
  if (registrationServer_) {
    registrationServer_->Shutdown(deadline);
    registrationServer_.reset();
  }
  if (draServer_) {
    draServer_->Shutdown(deadline);
    draServer_.reset();
  }
  removeIfOurs(draSocket_);
}

DraServer::~DraServer() { stop(); }

}  // namespace ibcni::dra::grpc_api
