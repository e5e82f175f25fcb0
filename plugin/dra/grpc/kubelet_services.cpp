// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/grpc/kubelet_services.h"

#include <utility>

namespace ibcni::dra::grpc_api {

namespace {

namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

template <class Claim>
ClaimRef refOf(const Claim& c) {
  return {c.namespace_(), c.uid(), c.name()};
}

/// Both versions' Prepare: one answer per claim, keyed by its uid; a claim's failure is its
/// answer's error, never the call's (the kubelet retries the claims that failed).
template <class Request, class Response>
grpc::Status prepareAll(ClaimPreparer& preparer, const Request& request, Response& response) {
  for (const auto& claim : request.claims()) {
    auto outcome = preparer.prepare(refOf(claim));
    auto& answer = (*response.mutable_claims())[claim.uid()];
    answer.set_error(outcome.error);
    for (const auto& d : outcome.devices) {
      auto* device = answer.add_devices();
      for (const auto& r : d.requestNames) {
        device->add_request_names(r);
      }
      device->set_pool_name(d.poolName);
      device->set_device_name(d.deviceName);
      for (const auto& id : d.cdiDeviceIds) {
        device->add_cdi_device_ids(id);
      }
    }
  }
  return grpc::Status::OK;
}

template <class Request, class Response>
grpc::Status unprepareAll(ClaimPreparer& preparer, const Request& request, Response& response) {
  for (const auto& claim : request.claims()) {
    (*response.mutable_claims())[claim.uid()].set_error(preparer.unprepare(refOf(claim)));
  }
  return grpc::Status::OK;
}

}  // namespace

RegistrationService::RegistrationService(std::string driver, std::string endpoint, StatusHandler onStatus)
    : driver_(std::move(driver)), endpoint_(std::move(endpoint)), onStatus_(std::move(onStatus)) {}

grpc::Status RegistrationService::GetInfo(grpc::ServerContext* /*context*/,
                                          const pluginregistration::InfoRequest* /*request*/,
                                          pluginregistration::PluginInfo* response) {
  response->set_type("DRAPlugin");
  response->set_name(driver_);
  response->set_endpoint(endpoint_);
  for (const auto& v : kDraServiceVersions) {
    response->add_supported_versions(v);
  }
  return grpc::Status::OK;
}

grpc::Status RegistrationService::NotifyRegistrationStatus(grpc::ServerContext* /*context*/,
                                                           const pluginregistration::RegistrationStatus* request,
                                                           pluginregistration::RegistrationStatusResponse* /*response*/) {
  onStatus_(request->plugin_registered(), request->error());
  return grpc::Status::OK;
}

grpc::Status DraServiceV1::NodePrepareResources(grpc::ServerContext* /*context*/,
                                                const v1::NodePrepareResourcesRequest* request,
                                                v1::NodePrepareResourcesResponse* response) {
  return prepareAll(preparer_, *request, *response);
}

grpc::Status DraServiceV1::NodeUnprepareResources(grpc::ServerContext* /*context*/,
                                                  const v1::NodeUnprepareResourcesRequest* request,
                                                  v1::NodeUnprepareResourcesResponse* response) {
  return unprepareAll(preparer_, *request, *response);
}

grpc::Status DraServiceV1beta1::NodePrepareResources(grpc::ServerContext* /*context*/,
                                                     const v1beta1::NodePrepareResourcesRequest* request,
                                                     v1beta1::NodePrepareResourcesResponse* response) {
  return prepareAll(preparer_, *request, *response);
}

grpc::Status DraServiceV1beta1::NodeUnprepareResources(grpc::ServerContext* /*context*/,
                                                       const v1beta1::NodeUnprepareResourcesRequest* request,
                                                       v1beta1::NodeUnprepareResourcesResponse* response) {
  return unprepareAll(preparer_, *request, *response);
}

}  // namespace ibcni::dra::grpc_api
