// SPDX-License-Identifier: Apache-2.0
#include "plugin/doctor/cluster_check.h"

#include <algorithm>
#include <utility>

#include "ipam/backends/kubeconfig.h"
#include "ipam/config/node_name.h"

namespace ibcni::doctor {

std::string errorText(const cni::Error& e) {
  return e.msg + (e.details.empty() ? "" : " (" + e.details + ")") + " [CNI error " +
         std::to_string(static_cast<int>(e.code)) + "]";
}

namespace {

// A node hands out only from holds confirmed within leaseDurationSeconds (ipam/README.md "Cluster
// safety", I2): the agent's passes must confirm them well within it, or ADDs pay a backend call.
void checkLease(const ConfigCheckInputs& in, const config::ClusterConf& c, const ipam::PoolReport& report,
                const std::string& poolText, ConfigReport& r) {
  const auto lease = c.leaseDuration.count();
  if (in.agentInterval && *in.agentInterval == 0) {
    r.problems.push_back({poolText + ": no node agent runs (" + in.agentIntervalSource +
                              " is 0): nothing confirms this node's holds between ADDs, and its liveness lapses",
                          "set reconcileInterval (the chart) or IBCNI_RECONCILE_INTERVAL to a few times less than " +
                              c.path + ".leaseDurationSeconds (" + std::to_string(lease) + " s)",
                          true});
  } else if (in.agentInterval && lease < 3 * *in.agentInterval) {
    r.problems.push_back({poolText + ": " + c.path + ".leaseDurationSeconds " + std::to_string(lease) +
                              " is less than 3 x the node agent's interval (" + std::to_string(*in.agentInterval) +
                              " s, " + in.agentIntervalSource + "): one late pass lets the node's liveness lapse, and "
                              "ADDs must confirm the node's holds with the backend between passes",
                          "set " + c.path + ".leaseDurationSeconds to at least " + std::to_string(3 * *in.agentInterval) +
                              ", or run the agent more often",
                          true});
  }
  const bool holds = std::any_of(report.blocks.begin(), report.blocks.end(),
                                 [](const auto& b) { return b.ledgerState == "owned"; });
  const auto ago = report.confirmedAgoSeconds;
  if (holds && (!ago || *ago > lease)) {
    r.problems.push_back(
        {poolText + ": this node's holds were last confirmed by the backend " +
             (ago ? std::to_string(*ago) + " s ago" : std::string("never on this boot")) +
             ", longer than " + c.path + ".leaseDurationSeconds (" + std::to_string(lease) + " s)",
         "check that the node agent runs (`ibcni reconcile` every reconcileInterval); until it does, each ADD past "
         "the lease confirms them first (one backend call) and fails with 11 when the backend cannot",
         true});
  } else if (holds) {
    r.ok.push_back("this node's holds were confirmed by the backend " + std::to_string(*ago) + " s ago (lease " +
                   std::to_string(lease) + " s)");
  }
}

// Who this node claims blocks as (ipam.cluster.nodeName, or the installer's file).
void checkNodeIdentity(const ConfigCheckInputs& in, const config::ClusterConf& c, const std::string& poolText,
                       ClusterCheckReport& k, ConfigReport& r) {
  if (auto id = ipam::clusterNodeIdentity(c, in.nodeNameFile); id) {
    k.node = id->name;
    k.nodeSource = id->source;
    r.ok.push_back(poolText + ": this node claims blocks as " + cni::quoted(k.node) + " (from " + k.nodeSource + ")");
  } else {
    r.problems.push_back({errorText(id.error()), "set " + c.path + ".nodeName, or let the installer write " +
                                                     std::string(config::kNodeNameFile) + " (spec.nodeName)"});
  }
}

// Whether libcurl loads, when the inputs can tell.
void checkLibcurl(const ConfigCheckInputs& in, ClusterCheckReport& k, ConfigReport& r) {
  if (!in.libcurlProblem) {
    return;
  }
  const std::string why = in.libcurlProblem();
  k.libcurl = why.empty() ? "loads" : why;
  if (why.empty()) {
    r.ok.push_back("libcurl loads (cluster mode talks to the backend through it)");
  } else {
    r.problems.push_back({"libcurl cannot be loaded: " + why + "; cluster mode cannot reach the backend",
                          "install libcurl (Debian/Ubuntu: libcurl4; RHEL: libcurl)"});
  }
}

// Where the backend is: the kubeconfig's server (and whether the kubeconfig reads), or etcd's endpoints.
void checkBackendEndpoint(const config::ClusterConf& c, ClusterCheckReport& k, ConfigReport& r) {
  if (c.backend != config::ClusterBackend::kKubernetes) {
    for (const auto& e : c.etcd.endpoints) {
      k.endpoint += (k.endpoint.empty() ? "" : ",") + e;
    }
    return;
  }
  auto kc = ipam::loadKubeconfig(c.kubernetes.kubeconfig, c.kubernetes.context);
  if (kc) {
    k.kubeconfig = "reads";
    k.endpoint = kc->server;
    r.ok.push_back("kubeconfig " + c.kubernetes.kubeconfig + " reads (context " + kc->context + ", server " +
                   kc->server + ", user " + kc->user + ")");
  } else {
    k.kubeconfig = kc.error().describe();
    r.problems.push_back({c.path + ".kubernetes.kubeconfig: " + kc.error().describe(),
                          "the ibcni DaemonSet's installer writes " + std::string(config::kDefaultKubeconfig) +
                              " from its ServiceAccount; check that it runs, or point kubeconfig at a readable one"});
  }
}

// The pool's blocks could not be listed: why, and what to check.
void unlistedBlocks(const cni::Error& e, const std::string& poolText, ClusterCheckReport& k, ConfigReport& r) {
  k.error = errorText(e);
  const bool down = e.code == cni::Errc::kTryAgainLater;
  r.problems.push_back({"this node cannot list " + poolText + "'s blocks: " + k.error,
                        down ? "check that " + (k.endpoint.empty() ? std::string("the backend") : k.endpoint) +
                                   " is reachable from this node (address, port, firewall) and up; ADDs that "
                                   "need a new block fail until it is"
                             : "fix what the message names (credentials, CA, endpoint, configuration)"});
}

// The pool's blocks as listed: the backend's view, this node's holds by the backend and by its
// ledger, and where the two disagree.
void listedBlocks(const ipam::PoolReport& report, const std::string& poolText, ClusterCheckReport& k,
                  ConfigReport& r) {
  k.reachable = true;
  k.listMs = report.listTime.count();
  if (!report.endpoint.empty()) {
    k.endpoint = report.endpoint;
  }
  for (const auto& b : report.blocks) {
    if (b.mine) {
      k.backendBlocks.push_back(b.cidr.empty() ? b.key : b.cidr);
    }
    if (b.ledgerState == "owned") {
      k.ledgerBlocks.push_back(b.cidr.empty() ? b.key : b.cidr);
    }
  }
  k.agree = report.disagreements.empty();
  r.ok.push_back("reaches " + k.endpoint + ": the pool's blocks listed in " + std::to_string(k.listMs) + " ms (" +
                 report.totalBlocks + " blocks of " + std::to_string(report.blockSize) + ", " +
                 std::to_string(report.claimedBlocks) + " claimed by " + std::to_string(report.perNode.size()) +
                 " node(s), " + report.freeBlocks + " free)");
  std::string held;
  for (const auto& b : k.backendBlocks) {
    held += (held.empty() ? "" : ", ") + b;
  }
  if (k.agree) {
    r.ok.push_back(k.backendBlocks.empty()
                       ? "this node holds no block of the pool yet (its first ADD claims one)"
                       : "this node holds " + std::to_string(k.backendBlocks.size()) + " block(s): " + held +
                             " (its ledger and the backend agree)");
  }
  for (const auto& d : report.disagreements) {
    r.problems.push_back({"claim " + d.block + " of " + poolText + ": this node's ledger says " + d.ledger +
                              ", the backend says " + d.backend,
                          "the next `ibcni reconcile` pass (or ADD) settles it: a block the backend gives another "
                          "node is no longer used here, one it lists as this node's is adopted",
                          true});
  }
  for (const auto& w : report.warnings) {
    r.problems.push_back({poolText + ": " + w, "see the message", true});
  }
}

}  // namespace

ClusterCheckReport checkClusterPool(const ConfigCheckInputs& in, const config::ClusterConf& c,
                                    const std::string& poolText, const PoolLister& pools, ConfigReport& r) {
  ClusterCheckReport k;
  k.pool = c.pool;
  k.backend = std::string(config::clusterBackendName(c.backend));
  checkNodeIdentity(in, c, poolText, k, r);
  checkLibcurl(in, k, r);
  checkBackendEndpoint(c, k, r);
  if (pools) {
    auto report = pools();
    if (!report) {
      unlistedBlocks(report.error(), poolText, k, r);
    } else {
      listedBlocks(*report, poolText, k, r);
      checkLease(in, c, *report, poolText, r);
    }
  }
  return k;
}

}  // namespace ibcni::doctor
