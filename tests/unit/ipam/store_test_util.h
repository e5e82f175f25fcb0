// SPDX-License-Identifier: Apache-2.0
// Helpers for the FileStore and EmbeddedIpam suites: a temporary data directory on tmpfs (as
// /run is in production), requests, and stores built from a config.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "ipam/policy/allocator.h"
#include "ipam/store/file_store.h"
#include "ipam/embedded_ipam.h"
#include "fakes/ipam_call.h"
#include "support/temp_dir.h"
#include "ibcni/config/net_conf.h"

namespace ibcni::ipam::testing {

/// A temporary directory, removed with everything in it by the destructor. On /dev/shm when
/// possible: the production default (/run/ibcni-ipam) is tmpfs, and a disk's fsync would make
/// the suites slow without testing anything more.
class TempDir : public ibcni::testing::TempDir {
 public:
  TempDir() : ibcni::testing::TempDir("ibcni-ipam-test", {"/dev/shm", "/tmp"}) {
    if (path().empty()) {
      ADD_FAILURE() << "cannot create a temporary directory";
    }
  }
};

inline net::IpAddress ip(const char* s) { return *net::IpAddress::parse(s); }

/// The GUID pools' tests start their ranges here; g(v) is GUID v as the IPAM stores it.
inline constexpr std::uint64_t kFirst = 0x0200000000000100ULL;
inline net::IpAddress g(std::uint64_t v) { return net::IpAddress::fromGuid(net::Guid{v}); }

/// A GUID pool's configuration (what guidPool gives the IPAM): one range set of family
/// net::kFamilyGuid holding the GUIDs first..last (no subnet, no gateway).
inline IpamConfig guidRangeConfig(std::uint64_t first, std::uint64_t last) {
  config::Range r;
  r.rangeStart = net::IpAddress::fromGuid(net::Guid{first});
  r.rangeEnd = net::IpAddress::fromGuid(net::Guid{last});
  r.path = "guidPool.range";
  config::RangeSet set;
  set.ranges = {r};
  set.path = "guidPool.range";
  set.family = net::kFamilyGuid;
  IpamConfig c;
  c.type = "ibcni-ipam";
  c.rangeSets = {set};
  return c;
}

/// The whole network config for `ipamBody` (the members of the ipam object, without braces).
inline std::string netConfig(const std::string& dataDir, const std::string& ipamBody,
                             const std::string& extraTopLevel = "", const std::string& name = "net1") {
  return R"({"cniVersion": "1.1.0", "name": ")" + name + R"(", "type": "ibcni", )" + extraTopLevel +
         R"("ipam": {"type": "ibcni-ipam", "dataDir": ")" + dataDir + R"(", )" + ipamBody + "}}";
}

/// The request ibcni-ipam's dispatcher makes of `rawConfig` and the CNI_* values (config/ parses it).
inline ibcni::testing::IpamCall makeRequest(const std::string& rawConfig, const std::string& containerId,
                                            const std::string& netns = "", const std::string& cniArgs = "",
                                            const std::string& ifName = "net1",
                                            cni::Command command = cni::Command::kAdd) {
  return ibcni::testing::IpamCall::fromText(rawConfig, containerId, netns, cniArgs, ifName, command);
}

/// A parsed config with a FileStore and an Allocator over it, for direct store calls.
struct StoreFixture {
  StoreFixture(const std::string& dir, const std::string& ipamJson, os::NetnsChecker& checker) {
    auto c = config::parseIpamConfig(ipamJson);
    EXPECT_TRUE(c) << (c ? "" : c.error().msg);
    config = std::make_unique<IpamConfig>(*c);
    store = std::make_unique<FileStore>(FileStore::Options{dir, Allocator::spansOf(*config), std::chrono::seconds(10)});
    allocator = std::make_unique<Allocator>(*config, *store, checker);
  }
  std::unique_ptr<IpamConfig> config;
  std::unique_ptr<FileStore> store;
  std::unique_ptr<Allocator> allocator;
};

/// Runs `fn` with the store locked, and returns the problems FileStore::verify() finds.
inline std::vector<std::string> verifyStore(FileStore& store) {
  auto lock = StoreLock::acquire(store);
  EXPECT_TRUE(lock) << (lock ? "" : lock.error().describe());
  if (!lock) {
    return {"cannot lock"};
  }
  auto problems = store.verify();
  EXPECT_TRUE(problems) << (problems ? "" : problems.error().describe());
  return problems ? *problems : std::vector<std::string>{"verify failed"};
}

/// Number of entries in a directory (0 when it does not exist).
inline std::size_t countEntries(const std::string& dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace ibcni::ipam::testing
