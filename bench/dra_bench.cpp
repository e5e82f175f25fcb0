// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's claim preparation as the kubelet sees it, side by side in one run with ibcni's CNI
// ADD of as many VFs, the floor under it, and the publication of a node's ResourceSlices
// (docs/benchmarks.md):
//
//   prepare     NodePrepareResources then NodeUnprepareResources (DRAPlugin v1, timed apart) of a
//               claim of 1 VF and of one of 8 VFs, over ibcni-dra's own Unix socket with a gRPC
//               client kept connected as the kubelet keeps it; ibcni-dra is the built program, on a
//               FakeSysfsTree node of one PF and 8 VFs (tests/unit/dra/dra_devices.h addEightVfs),
//               its checkpoint on disk (under /var/tmp, the file system of /var/lib/kubelet) and
//               its CDI specs on tmpfs (/dev/shm, as /var/run/cdi is); the claims (allocated,
//               reserved for their pods, as the scheduler leaves them) in a real kube-apiserver.
//   floor       a bare gRPC unary round trip (the same request) to a no-op DRAPlugin v1 server on a
//               Unix socket of this process (the same server options as ibcni-dra's), plus one bare
//               GET of the claim with the HTTP client and kubeconfig ibcni-dra uses (CurlHttpClient
//               keeping its connection, GnuTLS's libcurl first, as ibcni-dra's); Prepare / floor.
//   breakdown   where Prepare's time goes: the GET's phases (curl -w: TCP connect, TLS handshake,
//               request to first byte) and the same GET on a kept connection; in this process, on
//               the same sysfs and file systems, device discovery (discoverDevices) and the three
//               durable writes of a Prepare (checkpoint twice, CDI spec: the bytes ibcni-dra wrote,
//               each to a temporary file, fsync'd, renamed, the folder fsync'd).
//   cni         ibcni's exec'd ADD then DEL (sriov mode, ibcni-ipam in process, state on tmpfs) of
//               1 VF and of 8 VFs (8 ADDs into one fresh pod netns, one network each, as a pod of 8
//               rails gets them), each VF a veth end standing in for it as in cni_bench: there is no
//               VF here, and a FakeSysfsTree VF has no netdev to move, so the same VFs cannot be
//               given to both; a real VF adds the GUID set through the PF and the rebind to ADD.
//   slices      SlicePublisher::publish (KubeSliceApi over a CurlHttpClient keeping its connection,
//               as ibcni-dra's) of 64 VFs
//               to the same API server: the first publication of a node, an unchanged pass, a
//               change (a VF's port goes down), each on fresh nodes.
//   rss         VmHWM and VmRSS of the ibcni-dra process (/proc/PID/status) after all of it.
// Each round runs the prepare, floor, breakdown and cni parts in an order rotated per round; the
// 8-VF parts run every other round.
//
// Targets: Prepare of 1 VF p99 under 50 ms; ibcni-dra's peak resident set (VmHWM) under 20 MiB.
//
// The bench runs in network and mount namespaces of its own (unshared at start: root), a private
// control plane (tests/support/control_plane.h) on their loopback.
//   dra_bench [--dra PATH] [--ibcni PATH] [--rounds N] [--warmup N] [--slice-samples N] [--no-targets]
// Exit status: 0, 1 when a target or a check failed, 2 on a usage or setup error, 77 when the
// upstream components (scripts/build-upstream.sh) are not built (skipped).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_stats.h"
#include "cni_bench.h"
#include "fakes/fake_sysfs_tree.h"
#include "ibcni/os/file_io.h"
#include "ipam/backends/kubeconfig.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1/api.grpc.pb.h"
#include "lib/http/curl_http_client.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/ib_devices.h"
#include "plugin/dra/kube_claim_api.h"
#include "plugin/dra/kube_api.h"
#include "plugin/dra/kube_slice_api.h"
#include "plugin/dra/resource_slices.h"
#include "plugin/dra/slice_publisher.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"
#include "support/control_plane.h"
#include "support/daemon_process.h"
#include "support/exec_program.h"
#include "unit/dra/dra_devices.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace dra = ibcni::dra;
namespace http = ibcni::http;
namespace ipam = ibcni::ipam;
namespace os = ibcni::os;
namespace support = ibcni::testing;
namespace sysfs = ibcni::sysfs;
using Clock = std::chrono::steady_clock;
using ibcni::bench::ms;
using ibcni::bench::Stats;
using ibcni::bench::stats;
using ibcni::testing::ApiProxy;
using ibcni::testing::ControlPlane;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr double kTargetPrepareP99Ms = 50;
constexpr double kTargetRssMiB = 20;
constexpr int kVfs = 8;

struct Args {
  std::string dra = IBCNI_DRA_BINARY;
  std::string ibcni = IBCNI_BINARY;
  int rounds = 200;
  int warmup = 5;
  int sliceSamples = 10;
  bool targets = true;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--dra PATH] [--ibcni PATH] [--rounds N] [--warmup N] [--slice-samples N] [--no-targets]\n",
               argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-targets") {
      a.targets = false;
    } else if (arg == "--dra" && i + 1 < argc) {
      a.dra = argv[++i];
    } else if (arg == "--ibcni" && i + 1 < argc) {
      a.ibcni = argv[++i];
    } else if (arg == "--rounds" && i + 1 < argc) {
      a.rounds = std::atoi(argv[++i]);
    } else if (arg == "--warmup" && i + 1 < argc) {
      a.warmup = std::atoi(argv[++i]);
    } else if (arg == "--slice-samples" && i + 1 < argc) {
      a.sliceSamples = std::atoi(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (a.rounds < 2 || a.warmup < 0 || a.sliceSamples < 1) {
    usage(argv[0]);
  }
  return a;
}

/// Thrown to end the run (the control plane is stopped on the way out): `status` is the exit status.
struct Failure {
  int status;
  std::string what;
};

[[noreturn]] void fail(const std::string& what, int status = 2) { throw Failure{status, what}; }

// ---------------------------------------------------------------------------------------------
// The no-op DRAPlugin of the floor

class NoopDra final : public v1::DRAPlugin::Service {
 public:
  grpc::Status NodePrepareResources(grpc::ServerContext* /*context*/, const v1::NodePrepareResourcesRequest* request,
                                    v1::NodePrepareResourcesResponse* response) override {
    for (const auto& c : request->claims()) {
      (void)(*response->mutable_claims())[c.uid()];
    }
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext* /*context*/,
                                      const v1::NodeUnprepareResourcesRequest* request,
                                      v1::NodeUnprepareResourcesResponse* response) override {
    for (const auto& c : request->claims()) {
      (void)(*response->mutable_claims())[c.uid()];
    }
    return grpc::Status::OK;
  }
};

/// A server of `service` on Unix socket `path`, built as ibcni-dra builds its own
/// (plugin/dra/grpc/dra_server.cpp: one completion queue, one to two pollers).
std::unique_ptr<grpc::Server> serveNoop(grpc::Service* service, const std::string& path) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

// ---------------------------------------------------------------------------------------------
// The kubelet's side

struct Claim {
  std::string ns;
  std::string name;
  std::string uid;
  std::size_t devices = 0;
};

class Kubelet {
 public:
  explicit Kubelet(const std::string& socket)
      : stub_(v1::DRAPlugin::NewStub(grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()))) {}

  /// One NodePrepareResources of `c`: its time in ms, or negative when it failed (said on stderr).
  double prepare(const Claim& c) {
    v1::NodePrepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_(c.ns);
    claim->set_name(c.name);
    claim->set_uid(c.uid);
    v1::NodePrepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    const auto t0 = Clock::now();
    const grpc::Status status = stub_->NodePrepareResources(&context, request, &response);
    const double took = ms(Clock::now() - t0);
    if (!status.ok()) {
      std::fprintf(stderr, "NodePrepareResources: %s\n", status.error_message().c_str());
      return -1;
    }
    if (c.devices == 0) {  // the no-op server
      return took;
    }
    const auto it = response.claims().find(c.uid);
    if (it == response.claims().end() || !it->second.error().empty() ||
        static_cast<std::size_t>(it->second.devices_size()) != c.devices) {
      std::fprintf(stderr, "NodePrepareResources of %s: %s\n", c.name.c_str(),
                   it == response.claims().end() ? "no answer for the claim" : it->second.error().c_str());
      return -1;
    }
    return took;
  }

  /// One NodeUnprepareResources of `c`: as prepare().
  double unprepare(const Claim& c) {
    v1::NodeUnprepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_(c.ns);
    claim->set_name(c.name);
    claim->set_uid(c.uid);
    v1::NodeUnprepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    const auto t0 = Clock::now();
    const grpc::Status status = stub_->NodeUnprepareResources(&context, request, &response);
    const double took = ms(Clock::now() - t0);
    const auto it = response.claims().find(c.uid);
    if (!status.ok() || it == response.claims().end() || !it->second.error().empty()) {
      std::fprintf(stderr, "NodeUnprepareResources of %s: %s\n", c.name.c_str(),
                   !status.ok() ? status.error_message().c_str()
                   : it == response.claims().end() ? "no answer for the claim"
                                                   : it->second.error().c_str());
      return -1;
    }
    return took;
  }

 private:
  std::unique_ptr<v1::DRAPlugin::Stub> stub_;
};

// ---------------------------------------------------------------------------------------------
// The claims

/// Pod `pod` on `node` with claim `claim` allocated `devices` of the node's pool and reserved for
/// it, as the scheduler leaves them (as kubelet_dra_test's podWithClaim).
Claim podWithClaim(const ApiProxy& api, const std::string& ns, const std::string& node, const std::string& pod,
                   const std::string& claim, const std::vector<std::string>& devices) {
  json requests = json::array();
  json results = json::array();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string r = "rail-" + std::to_string(i);
    requests.push_back({{"name", r}, {"exactly", {{"deviceClassName", "vf.ibcni.io"}}}});
    results.push_back({{"request", r}, {"driver", ibcni::dra::kDriverName}, {"pool", node}, {"device", devices[i]}});
  }
  const std::string claims = "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims";
  auto [cs, c] = api.admin("POST", claims,
                           {{"metadata", {{"name", claim}}}, {"spec", {{"devices", {{"requests", requests}}}}}});
  if (cs != 201) {
    fail("create claim " + claim + ": " + std::to_string(cs) + " " + c.dump());
  }
  auto [ps, p] = api.admin(
      "POST", "/api/v1/namespaces/" + ns + "/pods",
      {{"metadata", {{"name", pod}}},
       {"spec",
        {{"nodeName", node},
         {"resourceClaims", {{{"name", "nics"}, {"resourceClaimName", claim}}}},
         {"containers",
          {{{"name", "app"},
            {"image", "registry.invalid/app"},
            {"resources", {{"claims", {{{"name", "nics"}}}}}}}}}}}});
  if (ps != 201) {
    fail("create pod " + pod + ": " + std::to_string(ps) + " " + p.dump());
  }
  c["status"] = {{"allocation", {{"devices", {{"results", results}}}}},
                 {"reservedFor", {{{"resource", "pods"}, {"name", pod}, {"uid", p["metadata"]["uid"]}}}}};
  auto [ss, s] = api.admin("PUT", claims + "/" + claim + "/status", c);
  if (ss != 200) {
    fail("allocate claim " + claim + ": " + std::to_string(ss) + " " + s.dump());
  }
  return {ns, claim, c["metadata"].value("uid", ""), devices.size()};
}

/// A node as tests/unit/dra/dra_devices.h's addEightVfs makes it, with `count` VFs: PF
/// 0000:3b:00.0 (ib0, mlx5_0), VF n at 0000:3b:<1 + n/8>.<n%8> (ib<n+1>, mlx5_<n+1>), each ACTIVE
/// with a GUID, its uverbs and umad devices; misc/rdma_cm.
void addVfs(support::FakeSysfsTree& sys, int count) {
  sys.addPf("0000:3b:00.0", "ib0", "mlx5_0", count)
      .setNodeGuid("mlx5_0", "0002:c903:00a1:b2c2")
      .setRdmaPort("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                   "fe80:0000:0000:0000:0002:c903:00a1:b2c2");
  for (int n = 0; n < count; ++n) {
    const std::string rdma = "mlx5_" + std::to_string(n + 1);
    char pci[16], guid[32], gid[48];
    std::snprintf(pci, sizeof pci, "0000:3b:%02x.%x", 1 + n / 8, n % 8);
    std::snprintf(guid, sizeof guid, "0200:0000:0000:0a%02x", n);
    std::snprintf(gid, sizeof gid, "fe80:0000:0000:0000:0002:c903:00a1:b3%02x", n);
    sys.addVf("0000:3b:00.0", n, pci, "ib" + std::to_string(n + 1), rdma)
        .setNodeGuid(rdma, guid)
        .setRdmaPort(rdma, 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)", gid)
        .addCharDevice("infiniband_verbs", "uverbs" + std::to_string(n + 1), rdma, 0, 231, 193 + n)
        .addCharDevice("infiniband_mad", "umad" + std::to_string(n + 1), rdma, 1, 231, 1 + n);
  }
  sys.addCharDevice("misc", "rdma_cm", "", 0, 10, 58);
}

// ---------------------------------------------------------------------------------------------
// ibcni-dra

class Driver {
 public:
  Driver(const std::vector<std::string>& args, const std::string& log) : process_(args, log) {}

  [[nodiscard]] pid_t pid() const { return process_.pid(); }
  [[nodiscard]] bool running() const { return pid() > 0 && ::waitpid(pid(), nullptr, WNOHANG) == 0; }

  /// "VmHWM" or "VmRSS" of /proc/PID/status, in KiB; -1 when unknown.
  [[nodiscard]] long statusKiB(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(pid()) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(field + ":", 0) == 0) {
        return std::atol(line.c_str() + field.size() + 1);
      }
    }
    return -1;
  }
  [[nodiscard]] long threads() const { return statusKiB("Threads"); }

  /// SIGTERM, reaped; its wait status (-1: not running).
  int stop() { return process_.stop(SIGTERM); }

 private:
  ibcni::testing::DaemonProcess process_;  // spawned tied to the bench, its output in the log
};

// ---------------------------------------------------------------------------------------------
// ibcni's CNI ADD on veth stand-ins (cni_bench's ibcni contender)

std::string standIn(int k) { return "dvf" + std::to_string(k); }

struct CniFigures {
  double add = 0;
  double del = 0;
};

/// ADD of `count` stand-ins into one fresh pod netns (net1..netN, one network each), then their
/// DELs; the sums of the exec'd ADDs and DELs in ms. Fatal when one fails or a device is not back.
CniFigures cniCycle(const ibcni::bench::Paths& p, int count, int i) {
  using namespace ibcni::bench;
  auto ns = makeNetns("drab-" + std::to_string(count) + "-" + std::to_string(i));
  const std::string cid = "drab-" + std::to_string(count) + "-" + std::to_string(i);
  const std::vector<std::string> argv = {p.ibcni};
  CniFigures f;
  std::vector<std::string> confs;
  for (int k = 0; k < count; ++k) {
    confs.push_back(pluginConfig(Kind::kIbcni, p, "drab-rail" + std::to_string(k), "10." + std::to_string(20 + k),
                                 standIn(k))
                        .dump());
    const std::string ifName = "net" + std::to_string(k + 1);
    const ProgramRun add = ibcni::bench::run(argv, cniEnv("ADD", cid, ns.path(), ifName, p), confs.back());
    if (add.status != 0 || firstAddress(add.out).empty()) {
      printFailure("exec'd ibcni ADD of " + standIn(k), add);
      fail("ibcni's ADD failed", 1);
    }
    f.add += ms(add.elapsed());
  }
  for (int k = count - 1; k >= 0; --k) {
    const std::string ifName = "net" + std::to_string(k + 1);
    const ProgramRun del =
        ibcni::bench::run(argv, cniEnv("DEL", cid, ns.path(), ifName, p), confs[static_cast<std::size_t>(k)]);
    if (del.status != 0 || !linkInHost(standIn(k))) {
      printFailure("exec'd ibcni DEL of " + standIn(k) + " (or the device is not back)", del);
      fail("ibcni's DEL failed", 1);
    }
    f.del += ms(del.elapsed());
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// The GET's phases, by curl

struct CurlPhases {
  std::vector<double> connect, tls, firstByte, total, reused;
};

/// `name` looked up in $PATH ("" when not found).
std::string inPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) {
      return dir + "/" + name;
    }
  }
  return {};
}

/// One curl of the claim twice over one connection (HTTP/1.1, as CurlHttpClient): the first
/// request's phases and the second's total.
bool curlGet(const ControlPlane& cp, const std::string& path, CurlPhases& out) {
  const std::string url = cp.server() + path;
  const auto run = ibcni::testing::runProgram(
      {inPath("curl"), "-sS", "--http1.1", "--cacert", cp.ca(), "--cert", cp.adminCert(), "--key", cp.adminKey(), "-H",
       "Accept: application/json", "-o", "/dev/null", "-w",
       "%{time_connect} %{time_appconnect} %{time_starttransfer} %{time_total} %{num_connects}\\n", url, "-o",
       "/dev/null", url},
      {ibcni::testing::kPathEnv}, std::nullopt);
  std::istringstream in(run.out);
  double c1 = 0, a1 = 0, s1 = 0, t1 = 0, c2 = 0, a2 = 0, s2 = 0, t2 = 0;
  int n1 = 0, n2 = -1;
  if (run.status != 0 || !(in >> c1 >> a1 >> s1 >> t1 >> n1 >> c2 >> a2 >> s2 >> t2 >> n2) || n2 != 0) {
    std::fprintf(stderr, "curl of the claim (status %d, connections %d): %s %s\n", run.status, n2, run.out.c_str(),
                 run.err.c_str());
    return false;
  }
  out.connect.push_back(c1 * 1000);
  out.tls.push_back((a1 - c1) * 1000);
  out.firstByte.push_back((s1 - a1) * 1000);
  out.total.push_back(t1 * 1000);
  out.reused.push_back(t2 * 1000);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reporting

bool g_ok = true;
std::vector<std::string> g_verdicts;

void verdict(bool pass, bool targets, const std::string& what) {
  g_verdicts.push_back(std::string(pass ? "PASS " : (targets ? "FAIL " : "INFO ")) + what);
  g_ok = g_ok && (pass || !targets);
}

void row(const std::string& name, const Stats& s) {
  std::printf("| %-66s | %4zu | %8.3f | %8.3f | %8.3f |\n", name.c_str(), s.n, s.median, s.p99, s.max);
}

void header(const std::string& first) {
  std::printf("| %-66s | %4s | %8s | %8s | %8s |\n", first.c_str(), "n", "p50", "p99", "max");
  std::printf("|%s|------|----------|----------|----------|\n", std::string(68, '-').c_str());
}

// ---------------------------------------------------------------------------------------------
// The run

struct Setup {
  Args args;
  std::string root;  // tmpfs: CDI specs, pod netns, ibcni's state, the fake sysfs
  std::string disk;  // the kubelet's plugin folder (ibcni-dra's checkpoint)
};

/// Slice publication of 64 VFs on `samples` fresh nodes: {first, unchanged, change} in ms.
bool slicesPart(const ApiProxy& api, const ibcni::dra::KubeTarget& target, int samples) {
  http::CurlHttpClient client(std::vector<std::string>{"libcurl-gnutls.so.4", "libcurl.so.4"}, true);
  dra::KubeSliceApi sliceApi(client, target);
  std::vector<double> first, unchanged, change;
  std::vector<dra::IbDevice> devices = dra::vfs(64);
  std::vector<dra::IbDevice> changed = devices;
  changed[7].portState = "DOWN";
  std::size_t slices = 0;
  for (int k = 0; k < samples; ++k) {
    const std::string node = "dra-bench-slices-" + std::to_string(::getpid()) + "-" + std::to_string(k);
    if (!api.createNode(node)) {
      std::fprintf(stderr, "create node %s\n", node.c_str());
      return false;
    }
    dra::SliceOptions options;
    options.nodeName = node;
    options.nodeUid = api.admin("GET", "/api/v1/nodes/" + node).second["metadata"].value("uid", "");
    dra::SlicePublisher publisher(sliceApi, options);
    auto timed = [&](const std::vector<dra::IbDevice>& d, std::vector<double>& out, bool wantChange) {
      const auto t0 = Clock::now();
      auto report = publisher.publish(d);
      out.push_back(ms(Clock::now() - t0));
      if (!report || report->changed() != wantChange) {
        std::fprintf(stderr, "publish on %s: %s\n", node.c_str(),
                     report ? "changed is not what it should be" : report.error().message.c_str());
        return false;
      }
      slices = std::max(slices, report->created + report->updated);
      return true;
    };
    if (!timed(devices, first, true) || !timed(devices, unchanged, false) || !timed(changed, change, true)) {
      return false;
    }
    (void)api.admin("DELETE", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D" + node);
    (void)api.deleteNode(node);
  }
  std::printf("\n## ResourceSlices of 64 VFs: SlicePublisher::publish to the API server (%zu slice(s) per pass, "
              "%d fresh nodes; ms)\n\n",
              slices, samples);
  header("publish");
  row("first publication of the node (list, create)", stats(first));
  row("unchanged pass (list, nothing written)", stats(unchanged));
  row("a change: one VF's port DOWN (list, update)", stats(change));
  return true;
}

int run(const Setup& s, ControlPlane& cp, ApiProxy& api) {
  const Args& a = s.args;
  // The node: one PF and 8 VFs.
  support::FakeSysfsTree sys;
  dra::addEightVfs(sys);
  if (!sys.ok()) {
    fail("fake sysfs: " + sys.error());
  }
  const std::string node = "dra-bench-" + std::to_string(::getpid());
  auto ns = api.freshNamespace("dra-bench");
  if (!ns) {
    fail("namespace: " + ns.error());
  }
  const json account = {{"metadata", {{"name", "default"}}}};
  if (api.admin("POST", "/api/v1/namespaces/" + *ns + "/serviceaccounts", account).first != 201 ||
      !api.createNode(node)) {
    fail("set-up of namespace " + *ns + " and node " + node);
  }
  const Claim one = podWithClaim(api, *ns, node, "one", "one-vf", {dra::eightVfsName(0)});
  std::vector<std::string> all;
  for (int n = 0; n < kVfs; ++n) {
    all.push_back(dra::eightVfsName(n));
  }
  const Claim eight = podWithClaim(api, *ns, node, "eight", "eight-vfs", all);

  // ibcni-dra, as the kubelet's plugin.
  const std::string plugins = s.disk + "/plugins";
  const std::string cdi = s.root + "/cdi";
  for (const auto& d : {s.disk + "/registry", plugins, cdi}) {
    fs::create_directories(d);
  }
  const std::string log = s.root + "/ibcni-dra.log";
  Driver driver({a.dra, "--node", node, "--kubeconfig", cp.adminKubeconfig(), "--registry-dir", s.disk + "/registry",
                 "--plugins-dir", plugins, "--cdi-dir", cdi, "--sysfs", sys.root(), "--interval", "3600",
                 "--instance-id", ""},
                log);
  const std::string socket = plugins + "/" + dra::kDriverName + "/dra.sock";
  for (int i = 0; i < 300 && !fs::exists(socket) && driver.running(); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  if (!fs::exists(socket)) {
    fail("ibcni-dra did not serve " + socket + ":\n" + support::indentedTail(support::readFile(log), 20));
  }
  std::this_thread::sleep_for(1s);  // its first slice publication, at start, out of the way
  const long idleRss = driver.statusKiB("VmRSS");
  Kubelet kubelet(socket);

  // The floor's server and client.
  NoopDra noop;
  const std::string noopSocket = s.root + "/noop.sock";
  auto noopServer = serveNoop(&noop, noopSocket);
  if (!noopServer) {
    fail("no-op server on " + noopSocket);
  }
  Kubelet noopClient(noopSocket);
  const Claim noopClaim{one.ns, one.name, one.uid, 0};

  // The bare GET, with ibcni-dra's client and kubeconfig.
  auto kubeconfig = ipam::loadKubeconfig(cp.adminKubeconfig());
  if (!kubeconfig) {
    fail(kubeconfig.error().describe());
  }
  dra::KubeTarget target;
  target.server = kubeconfig->server;
  target.tls = kubeconfig->tls;
  target.token = kubeconfig->token;
  target.tokenFile = kubeconfig->tokenFile;
  http::CurlHttpClient getHttp(std::vector<std::string>{"libcurl-gnutls.so.4", "libcurl.so.4"}, true);
  dra::KubeClaimApi claimApi(getHttp, target);
  const std::string claimPath = "/apis/resource.k8s.io/v1/namespaces/" + one.ns + "/resourceclaims/" + one.name;

  // The parts of Prepare timed apart, in this process, on the same sysfs and file systems: device
  // discovery, and the three durable writes of the bytes ibcni-dra wrote for each claim (its
  // checkpoint and the claim's CDI spec, read after one Prepare).
  sysfs::SysfsDevices localDevices(sys.root());
  sysfs::SysfsInventory localInventory(sys.root());
  // The same discovery on a node of 64 VFs (ibcni-dra runs it at every Prepare and every --interval).
  support::FakeSysfsTree sys64;
  addVfs(sys64, 64);
  if (!sys64.ok()) {
    fail("fake sysfs of 64 VFs: " + sys64.error());
  }
  const std::set<std::string> firstVf = {"vf-0000-3b-01-0"};  // VF 0 of both nodes (addVfs)
  sysfs::SysfsDevices devices64(sys64.root());
  sysfs::SysfsInventory inventory64(sys64.root());
  if (auto found = dra::discoverDevices(devices64, inventory64); !found || found->size() != 65) {
    fail("discovery of the 64-VF node: " +
         (found ? std::to_string(found->size()) + " devices, not 65" : found.error().describe()));
  }
  std::map<std::size_t, std::pair<std::string, std::string>> writes;  // devices -> {checkpoint, CDI spec}
  for (const Claim* c : {&one, &eight}) {
    if (kubelet.prepare(*c) < 0) {
      fail("the first Prepare of " + c->name + "; ibcni-dra's log:\n" +
           support::indentedTail(support::readFile(log), 20));
    }
    std::string checkpoint;
    for (const auto& e : fs::directory_iterator(plugins + "/" + dra::kDriverName)) {
      if (e.is_regular_file() && e.path().extension() == ".json") {
        checkpoint += support::readFile(e.path());
      }
    }
    writes[c->devices] = {checkpoint, support::readFile(dra::cdiSpecPath(cdi, c->uid))};
    if (checkpoint.empty() || writes[c->devices].second.empty() || kubelet.unprepare(*c) < 0) {
      fail("no checkpoint or CDI spec after the first Prepare of " + c->name);
    }
  }
  const std::string writesDir = s.disk + "/writes";
  const std::string writesCdi = s.root + "/cdi-writes";
  fs::create_directories(writesDir);
  fs::create_directories(writesCdi);
  const std::string writesCheckpoint = writesDir + "/claims.json";
  const std::string writesSpec = writesCdi + "/spec.json";

  // ibcni's side.
  ibcni::bench::Paths p;
  p.ibcni = a.ibcni;
  p.disk = p.tmpfs = s.root;

  // The parts of a round.
  enum Part {
    kPrep1, kPrep8, kFloorGrpc, kFloorGet, kCurl, kDiscover, kDiscover64, kWrites1, kWrites8, kCni1, kCni8, kParts
  };
  std::map<std::string, std::vector<double>> f;  // figure -> samples (ms)
  CurlPhases curl;
  bool recording = false;
  auto keep = [&](const std::string& name, double v) {
    if (v < 0) {
      fail(name + " failed; ibcni-dra's log:\n" + support::indentedTail(support::readFile(log), 20), 1);
    }
    if (recording) {
      f[name].push_back(v);
    }
  };
  auto timeMs = [](const std::function<void()>& fn) {
    const auto t0 = Clock::now();
    fn();
    return ms(Clock::now() - t0);
  };
  auto runPart = [&](int part, int round) {
    const bool even = round % 2 == 0;
    switch (part) {
      case kPrep1:
        keep("prepare1", kubelet.prepare(one));
        keep("unprepare1", kubelet.unprepare(one));
        break;
      case kPrep8:
        if (even) {
          keep("prepare8", kubelet.prepare(eight));
          keep("unprepare8", kubelet.unprepare(eight));
        }
        break;
      case kFloorGrpc:
        keep("grpc", noopClient.prepare(noopClaim));
        break;
      case kFloorGet:
        keep("get", timeMs([&] {
               if (!claimApi.get(one.ns, one.name, dra::Read::kLatest)) {
                 fail("bare GET of the claim");
               }
             }));
        break;
      case kCurl:
        if (round % 4 == 0 && !inPath("curl").empty() && !curlGet(cp, claimPath, curl)) {
          fail("curl of the claim failed", 1);
        }
        break;
      case kDiscover:
        keep("discover", timeMs([&] {
               if (!dra::discoverDevices(localDevices, localInventory)) {
                 fail("discoverDevices");
               }
             }));
        keep("discover1", timeMs([&] {
               if (!dra::discoverDevices(localDevices, localInventory, &firstVf)) {
                 fail("discoverDevices of one VF");
               }
             }));
        break;
      case kDiscover64:
        if (round % 4 == 0) {
          keep("discover64", timeMs([&] {
                 if (!dra::discoverDevices(devices64, inventory64)) {
                   fail("discoverDevices of 64 VFs");
                 }
               }));
          keep("discover64one", timeMs([&] {
                 if (!dra::discoverDevices(devices64, inventory64, &firstVf)) {
                   fail("discoverDevices of one VF of 64");
                 }
               }));
        }
        break;
      case kWrites1:
      case kWrites8: {
        if (part == kWrites8 && !even) {
          break;
        }
        const auto& [checkpoint, spec] = writes[part == kWrites1 ? 1 : kVfs];
        keep(part == kWrites1 ? "writes1" : "writes8", timeMs([&] {
               if (!os::writeFileAtomic(writesCheckpoint, checkpoint) || !os::writeFileAtomic(writesSpec, spec) ||
                   !os::writeFileAtomic(writesCheckpoint, checkpoint)) {
                 fail("the writes");
               }
             }));
        break;
      }
      case kCni1:
      case kCni8: {
        if (part == kCni8 && !even) {
          break;
        }
        const int count = part == kCni1 ? 1 : kVfs;
        const CniFigures c = cniCycle(p, count, round);
        keep("cni-add" + std::to_string(count), c.add);
        keep("cni-del" + std::to_string(count), c.del);
        break;
      }
      default:
        break;
    }
  };
  for (int r = -a.warmup; r < a.rounds; ++r) {
    recording = r >= 0;
    const int round = r < 0 ? -r : r;
    for (int k = 0; k < kParts; ++k) {
      runPart((k + round) % kParts, round);
    }
  }
  const long threads = driver.threads();

  // The report.
  auto st = [&](const std::string& name) { return stats(f[name]); };
  const Stats prep1 = st("prepare1"), prep8 = st("prepare8"), unprep1 = st("unprepare1"), unprep8 = st("unprepare8");
  const Stats grpc = st("grpc"), get = st("get");
  const Stats add1 = st("cni-add1"), add8 = st("cni-add8"), del1 = st("cni-del1"), del8 = st("cni-del8");
  const Stats discover = st("discover1"), writes1 = st("writes1"), writes8 = st("writes8");
  const double floor = grpc.median + get.median;
  std::printf("\n## ibcni-dra over its socket (DRAPlugin v1, gRPC, one kept connection), claims in a real "
              "kube-apiserver (%d rounds; ms)\n\n",
              a.rounds);
  header("call");
  row("NodePrepareResources, claim of 1 VF", prep1);
  row("NodeUnprepareResources, claim of 1 VF", unprep1);
  row("NodePrepareResources, claim of 8 VFs", prep8);
  row("NodeUnprepareResources, claim of 8 VFs", unprep8);
  std::printf("\n## The floor\n\n");
  header("floor");
  row("gRPC unary round trip to a no-op DRAPlugin on a Unix socket", grpc);
  row("bare GET of the claim: CurlHttpClient on a kept connection, as ibcni-dra's", get);
  std::printf("\nfloor (p50s summed) %.3f ms; Prepare of 1 VF / floor %.2f (p50), of 8 VFs / floor %.2f\n", floor,
              prep1.median / floor, prep8.median / floor);

  std::printf("\n## Where Prepare's time goes (ms)%s\n\n",
              curl.total.empty() ? ": no curl here, no phases of the GET" : "");
  header("part");
  row("GET by curl: TCP connect", stats(curl.connect));
  row("GET by curl: TLS handshake (client certificate)", stats(curl.tls));
  row("GET by curl: request to first byte (the API server's answer)", stats(curl.firstByte));
  row("GET by curl: total, new connection", stats(curl.total));
  row("GET by curl: on a kept connection (the same curl's second request)", stats(curl.reused));
  row("device discovery, the node's (a slice pass): PF + 8 VFs", st("discover"));
  row("device discovery, the node's: PF + 64 VFs", st("discover64"));
  row("device discovery, Prepare's (the claim's VF only): of 8 VFs", discover);
  row("device discovery, Prepare's: one VF of 64", st("discover64one"));
  row("the 3 durable writes of a Prepare (checkpoint x2, CDI spec), 1 VF", writes1);
  row("the 3 durable writes of a Prepare, 8 VFs", writes8);
  auto split = [&](const char* what, const Stats& prep, const Stats& w) {
    const double rest = prep.median - grpc.median - get.median - discover.median - w.median;
    std::printf("Prepare of %s (p50) %.3f = gRPC %.3f + GET %.3f + discovery %.3f + writes %.3f + %.3f the rest\n",
                what, prep.median, grpc.median, get.median, discover.median, w.median, rest);
  };
  std::printf("\n");
  split("1 VF", prep1, writes1);
  split("8 VFs", prep8, writes8);

  std::printf("\n## ibcni's CNI ADD of as many VFs: exec'd, sriov mode, veth stand-ins, a fresh pod netns (ms)\n\n");
  header("exec'd ibcni");
  row("ADD of 1 VF", add1);
  row("DEL of 1 VF", del1);
  row("ADD of 8 VFs (8 ADDs, one per rail)", add8);
  row("DEL of 8 VFs", del8);
  std::printf("\nPrepare / ADD (p50): 1 VF %.2f, 8 VFs %.2f; Unprepare / DEL: 1 VF %.2f, 8 VFs %.2f\n",
              prep1.median / add1.median, prep8.median / add8.median, unprep1.median / del1.median,
              unprep8.median / del8.median);

  if (!slicesPart(api, target, a.sliceSamples)) {
    return 1;
  }

  const long hwm = driver.statusKiB("VmHWM");
  const long rss = driver.statusKiB("VmRSS");
  std::printf("\n## ibcni-dra's resident set (/proc/PID/status)\n\n");
  std::printf("VmRSS idle after start %.1f MiB; after the runs VmRSS %.1f MiB, VmHWM %.1f MiB; %ld threads\n",
              static_cast<double>(idleRss) / 1024, static_cast<double>(rss) / 1024, static_cast<double>(hwm) / 1024,
              threads);
  const int status = driver.stop();
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    verdict(false, true, "ibcni-dra did not exit 0 on SIGTERM (wait status " + std::to_string(status) + ")");
  }

  char line[200];
  std::snprintf(line, sizeof line, "Prepare of a claim of 1 VF: p99 %.3f ms (target < %.0f ms)", prep1.p99,
                kTargetPrepareP99Ms);
  verdict(prep1.p99 < kTargetPrepareP99Ms, a.targets, line);
  std::snprintf(line, sizeof line, "ibcni-dra's peak resident set: VmHWM %.1f MiB (target < %.0f MiB)",
                static_cast<double>(hwm) / 1024, kTargetRssMiB);
  verdict(hwm > 0 && static_cast<double>(hwm) < kTargetRssMiB * 1024, a.targets, line);
  std::printf("\n");
  for (const auto& v : g_verdicts) {
    std::printf("%s\n", v.c_str());
  }
  return g_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  for (const auto& program : {args.dra, args.ibcni}) {
    if (::access(program.c_str(), X_OK) != 0) {
      fail("no program at " + program);
    }
  }
  if (::geteuid() != 0) {
    fail("needs root (network namespaces)");
  }
  if (!ControlPlane::built()) {
    std::printf("SKIP: %s\n", ControlPlane::kNotBuilt);
    return 77;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // Network and mount namespaces of our own: the control plane, ibcni-dra and the stand-ins on
  // their loopback. A control plane of a ctest run (IBCNI_CONTROL_PLANE) is outside them.
  ::unsetenv("IBCNI_CONTROL_PLANE");
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
    fail(std::string("unshare: ") + std::strerror(errno));
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fail(std::string("make / private: ") + std::strerror(errno));
  }
  char shm[] = "/dev/shm/ibcni-dra-bench-XXXXXX";
  char disk[] = "/var/tmp/ibcni-dra-bench-XXXXXX";
  if (::mkdtemp(shm) == nullptr || ::mkdtemp(disk) == nullptr) {
    fail("mkdtemp");
  }
  Setup s{args, shm, disk};
  fs::create_directories(s.root + "/netns");
  ::setenv("TMPDIR", (s.root + "/netns").c_str(), 1);  // the pod netns and the fake sysfs tree
  std::string links = "ip link set lo up";
  for (int k = 0; k < kVfs; ++k) {
    links += " && ip link add " + standIn(k) + " type veth peer name " + standIn(k) + "p";
  }
  ibcni::bench::sh(links);

  utsname u{};
  ::uname(&u);
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("# ibcni-dra: Prepare against the floor and ibcni's CNI ADD: %ld CPUs, kernel %s, %s\n",
              ::sysconf(_SC_NPROCESSORS_ONLN), u.release, date);
  std::printf("\nibcni-dra %s (checkpoint under /var/tmp, CDI specs on /dev/shm); ibcni %s (state on /dev/shm)\n",
              args.dra.c_str(), args.ibcni.c_str());
  std::fflush(stdout);

  int status = 2;
  try {
    ControlPlane cp;
    ApiProxy api;
    if (auto started = ibcni::testing::startApi(cp, api); started) {
      status = run(s, cp, api);
    } else {
      std::fprintf(stderr, "starting the control plane: %s\n", started.message());
    }
  } catch (const Failure& f) {
    std::fprintf(stderr, "dra_bench: %s\n", f.what.c_str());
    status = f.status;
  }
  std::error_code ec;
  fs::remove_all(s.root, ec);
  fs::remove_all(s.disk, ec);
  return status;
} catch (const Failure& f) {
  std::fprintf(stderr, "dra_bench: %s\n", f.what.c_str());
  return f.status;
}
