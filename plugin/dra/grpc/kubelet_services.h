// SPDX-License-Identifier: Apache-2.0
// The kubelet's gRPC APIs as ibcni-dra serves them: the plugin watcher's Registration (the
// handshake on <registry>/<driver>-reg.sock) and the DRAPlugin service in its v1 and v1beta1
// versions, both translated to ClaimPreparer's plain values. The only folder that sees gRPC and
// the generated messages.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "k8s.io/kubelet/pkg/apis/dra/v1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1beta1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.grpc.pb.h"
#include "plugin/dra/claim_preparer.h"

namespace ibcni::dra::grpc_api {

/// The versions of the DRAPlugin service ibcni-dra serves, newest first, as the kubelet names them.
inline const std::vector<std::string> kDraServiceVersions{"v1.DRAPlugin", "v1beta1.DRAPlugin"};

/// pluginregistration's Registration: GetInfo says what the plugin is and where its service is;
/// NotifyRegistrationStatus is the kubelet's verdict, handed to `onStatus`.
class RegistrationService final : public pluginregistration::Registration::Service {
 public:
  using StatusHandler = std::function<void(bool registered, const std::string& error)>;
  RegistrationService(std::string driver, std::string endpoint, StatusHandler onStatus);

  grpc::Status GetInfo(grpc::ServerContext* context, const pluginregistration::InfoRequest* request,
                       pluginregistration::PluginInfo* response) override;
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* context,
                                        const pluginregistration::RegistrationStatus* request,
                                        pluginregistration::RegistrationStatusResponse* response) override;

 private:
  std::string driver_;
  std::string endpoint_;
  StatusHandler onStatus_;
};

/// DRAPlugin v1.
class DraServiceV1 final : public k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::Service {
 public:
  explicit DraServiceV1(ClaimPreparer& preparer) : preparer_(preparer) {}
  grpc::Status NodePrepareResources(grpc::ServerContext* context,
                                    const k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesRequest* request,
                                    k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext* context, const k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesRequest* request,
      k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesResponse* response) override;

 private:
  ClaimPreparer& preparer_;
};

/// DRAPlugin v1beta1: the same messages without Device.share_id.
class DraServiceV1beta1 final : public k8s::io::kubelet::pkg::apis::dra::v1beta1::DRAPlugin::Service {
 public:
  explicit DraServiceV1beta1(ClaimPreparer& preparer) : preparer_(preparer) {}
  grpc::Status NodePrepareResources(
      grpc::ServerContext* context, const k8s::io::kubelet::pkg::apis::dra::v1beta1::NodePrepareResourcesRequest* request,
      k8s::io::kubelet::pkg::apis::dra::v1beta1::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext* context,
      const k8s::io::kubelet::pkg::apis::dra::v1beta1::NodeUnprepareResourcesRequest* request,
      k8s::io::kubelet::pkg::apis::dra::v1beta1::NodeUnprepareResourcesResponse* response) override;

 private:
  ClaimPreparer& preparer_;
};

}  // namespace ibcni::dra::grpc_api
