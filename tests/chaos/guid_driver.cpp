// SPDX-License-Identifier: Apache-2.0
// ibcni-guidpool-preloadable: sriov mode's GUID-pool half as a program the chaos checker can exec.
// ibcni itself cannot run without VFs, so this test-only driver calls the embedded GUID pools
// (ipam/embedded_ipam_guids.h) exactly as sriov mode does (plugin/modes/sriov_vf_guid_pool.cpp,
// plugin/agent/reconcile_guid_pools.cpp) and leaves the VF out: no GUID is set on a VF or restored.
//
//   CNI_COMMAND=ADD|DEL|GC, CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS, CNI_ARGS; on stdin a network
//   configuration {"name": N, "guidPool": {...}} (GC: with cni.dev/valid-attachments)
//     ADD  writes the attachment's record ahead (<dataDir>/guid-records/<network>/<containerID>:<ifname>,
//          holding the pool's store directory), then allocates (CNI_ARGS GUID= asks for one);
//          prints {"guid": "..."}; a failed allocation removes the record again
//     DEL  releases by the store directory its record names (no record: the configured pool's), then
//          removes the record
//     GC   releases the network's GUIDs whose attachment is not valid, and their records
//   ibcni-guidpool-preloadable pass STORE_DIR
//        the node agent's pass: maintain(), an allocation without a record is released
//   ibcni-guidpool-preloadable pools CONFIG_FILE [--json]
//        the cluster pool's report as JSON (ibcni pools' for a GUID pool)
//
// Errors: a CNI error object on stdout, exit 1. IBCNI_GUID_DRIVER_PLANT=skip-record plants a bug
// for the checker to find: ADD writes no record, so an agent pass releases a GUID a pod holds.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/os/file_io.h"
#include "ipam/backends/production_backends.h"
#include "ipam/pool_report.h"
#include "ipam/config/guid_pool.h"
#include "ipam/embedded_ipam_guids.h"
#include "lib/result/result_json.h"
#include "plugin/agent/reconcile_guid_pools.h"
#include "plugin/cli/production_http.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ibcni::cni::Errc;
using ibcni::cni::Error;

[[noreturn]] void failWith(const Error& e) {
  std::printf("%s\n", ibcni::result::printError(e, "1.0.0").c_str());
  std::exit(1);
}

template <typename T>
T orFail(ibcni::cni::Result<T> r) {
  if (!r) {
    failWith(r.error());
  }
  return std::move(*r);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The records of the attachments given GUIDs from the pools of the data directory `dataDir`.
std::string recordsDir(const std::string& dataDir) { return dataDir + "/guid-records"; }

// <dataDir>/.guid/<pool> -> <dataDir>
std::string dataDirOfStore(const std::string& storeDir) {
  return fs::path(storeDir).lexically_normal().parent_path().parent_path().string();
}

std::string recordPath(const std::string& dataDir, const std::string& network, const ibcni::cni::AttachmentKey& key) {
  return recordsDir(dataDir) + "/" + network + "/" + key.containerId + ":" + key.ifName;
}

void writeRecord(const std::string& path, const std::string& storeDir) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (auto w = ibcni::os::writeFileAtomic(path, storeDir); !w) {
    failWith(Error{Errc::kStateFailure, "cannot write the record " + path, w.error().describe()});
  }
}

void removeRecord(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    failWith(Error{Errc::kStateFailure, "cannot remove the record " + path, std::strerror(errno)});
  }
}

struct Network {
  std::string name;
  ibcni::config::GuidPoolConf pool;
  json conf;
};

Network readNetwork(const std::string& text) {
  Network n;
  n.conf = json::parse(text, nullptr, false);
  if (!n.conf.is_object() || !n.conf.contains("name") || !n.conf["name"].is_string() || !n.conf.contains("guidPool")) {
    failWith(Error{Errc::kDecodingFailure, "the network configuration is no object with \"name\" and \"guidPool\"", {}});
  }
  n.name = n.conf["name"].get<std::string>();
  n.pool = orFail(ibcni::config::guidPoolObject(n.conf["guidPool"], n.name));
  return n;
}

// The production options, on the checker's node: IBCNI_DRIVER_DATA_DIR stands for the default data
// directory and IBCNI_DRIVER_POOL_INDEX for the pool index (unset: none).
ibcni::ipam::EmbeddedIpamOptions driverOptions() {
  auto o = ibcni::plugin::clusterCapable(ibcni::plugin::productionHttpClient());
  if (const std::string d = env("IBCNI_DRIVER_DATA_DIR"); !d.empty()) {
    o.defaultDataDir = d;
  }
  o.poolIndexDir = env("IBCNI_DRIVER_POOL_INDEX");
  return o;
}

ibcni::ipam::EmbeddedGuidPools& pools() {
  static ibcni::ipam::EmbeddedGuidPools p{driverOptions()};
  return p;
}

// As the node agent does first: the stores a reboot wiped, given back from the pool index with
// their pool.json (the agent's own code).
void restoreFromIndex() {
  ibcni::plugin::ReconcileOptions options;
  options.poolIndexDir = env("IBCNI_DRIVER_POOL_INDEX");
  ibcni::plugin::ReconcileReport report;
  ibcni::plugin::restorePoolsFromIndex(options, report);
  if (!report.errors.empty()) {
    failWith(Error{Errc::kIoFailure, report.errors.front(), {}});
  }
}

std::string storeDataDir(const Network& n) { return dataDirOfStore(pools().storeDirOf(n.pool)); }

int add(const Network& n, const ibcni::cni::CmdArgs& args, const ibcni::cni::CniArgs& cniArgs) {
  std::optional<ibcni::net::Guid> requested;
  if (!cniArgs.guid.empty()) {
    requested = ibcni::net::Guid::parse(cniArgs.guid);
    if (!requested) {
      failWith(Error{Errc::kInvalidConfig, "CNI_ARGS GUID=" + cniArgs.guid + " is not a GUID", {}});
    }
  }
  const ibcni::cni::AttachmentKey key{args.containerId, args.ifName};
  const std::string record = recordPath(storeDataDir(n), n.name, key);
  if (env("IBCNI_GUID_DRIVER_PLANT") != "skip-record") {
    writeRecord(record, pools().storeDirOf(n.pool));  // ahead, as sriov mode's RecordAhead
  }
  const ibcni::ipam::GuidRequest request{n.pool, n.name, args, cniArgs, requested, "CNI_ARGS GUID"};
  auto lease = pools().allocate(request);
  if (!lease) {
    removeRecord(record);  // sriov mode's rollback removes the record written ahead
    failWith(lease.error());
  }
  std::printf("%s\n", json{{"cniVersion", "1.0.0"}, {"guid", lease->guid.toString()}}.dump().c_str());
  return 0;
}

int del(const Network& n, const ibcni::cni::CmdArgs& args) {
  const ibcni::cni::AttachmentKey key{args.containerId, args.ifName};
  const std::string record = recordPath(storeDataDir(n), n.name, key);
  auto kept = ibcni::os::readFile(record, 4096);
  const std::string storeDir = kept ? *kept : pools().storeDirOf(n.pool);
  (void)orFail(pools().release(storeDir, key, n.name));
  removeRecord(record);
  return 0;
}

int gc(const Network& n) {
  std::vector<ibcni::cni::AttachmentKey> keep;
  for (const auto& a : n.conf.value("cni.dev/valid-attachments", json::array())) {
    keep.push_back({a.value("containerID", ""), a.value("ifname", "")});
  }
  const auto released = orFail(pools().gc(n.pool, n.name, keep));
  for (const auto& r : released) {
    removeRecord(recordPath(storeDataDir(n), n.name, {r.containerId, r.ifName}));
  }
  return 0;
}

// Whether the record of (network, key) exists; one that cannot be looked at counts as there.
bool recorded(const std::string& dataDir, const std::string& network, const ibcni::cni::AttachmentKey& key) {
  struct stat st{};
  return ::stat(recordPath(dataDir, network, key).c_str(), &st) == 0 || errno != ENOENT;
}

int pass(const std::string& storeDir) {
  restoreFromIndex();
  const std::string dataDir = dataDirOfStore(storeDir);
  const auto outcome = orFail(pools().maintain(storeDir, false, [&](const std::string& network, const auto& key) {
    return recorded(dataDir, network, key);
  }));
  std::printf("%s\n", json{{"released", outcome.released.size()}}.dump().c_str());
  return 0;
}

int poolsReport(const std::string& file) {
  auto text = ibcni::os::readFile(file, std::size_t{1} << 20);
  if (!text) {
    failWith(Error{Errc::kIoFailure, "cannot read " + file, text.error().describe()});
  }
  const Network n = readNetwork(*text);
  const auto report = orFail(pools().pools(n.pool, n.name));
  std::printf("%s\n", ibcni::ipam::printPoolReport(report).c_str());
  return 0;
}

int cni() {
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const Network n = readNetwork(input);
  const std::string command = env("CNI_COMMAND");
  ibcni::cni::CmdArgs args;
  args.containerId = env("CNI_CONTAINERID");
  args.ifName = env("CNI_IFNAME");
  args.netns = env("CNI_NETNS");
  if (command == "GC") {
    return gc(n);
  }
  const auto cniArgs = orFail(ibcni::cni::parseCniArgs(env("CNI_ARGS")));
  if (command == "ADD") {
    return add(n, args, cniArgs);
  }
  if (command == "DEL") {
    return del(n, args);
  }
  failWith(Error{Errc::kInvalidEnvironment, "CNI_COMMAND=" + command + ": only ADD, DEL and GC", {}});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string verb = argc >= 2 ? argv[1] : "";
    if (verb == "pass" && argc == 3) {
      return pass(argv[2]);
    }
    if (verb == "pools" && argc >= 3) {
      return poolsReport(argv[2]);
    }
    if (argc > 1) {
      std::fputs("usage: ibcni-guidpool-preloadable [pass STORE_DIR | pools CONFIG_FILE [--json]]\n", stderr);
      return 2;
    }
    return cni();
  } catch (const std::exception& e) {
    failWith(Error{Errc::kInternal, std::string("exception: ") + e.what(), {}});
  }
}
