// SPDX-License-Identifier: Apache-2.0
#include "chaos/claims/claim_world.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "fakes/fake_netlink.h"
#include "fakes/fake_sysfs_tree.h"
#include "ipam/embedded_ipam_guids.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_preparation.h"
#include "plugin/dra/claim_sweep.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"
#include "support/fault/faulty_claim_effects.h"
#include "support/temp_dir.h"
#include "unit/dra/dra_devices.h"
#include "unit/dra/memory_claims.h"

namespace ibcni::chaos::claims {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kVfs = 8;
constexpr int kSlots = 4;
constexpr std::uint64_t kFirmware = 0x020000000000a000ULL;  // VF n's GUID from the firmware: kFirmware + n ...
constexpr int kFirstUnset = 6;                              // ... but VFs 6 and 7 have none
constexpr std::uint64_t kPoolFirst = 0x0200000000b00000ULL;  // the pool: 32 GUIDs in blocks of 8
constexpr std::uint64_t kAllOnes = ~std::uint64_t{0};
const char* const kNodeName = "node-a";

/// The driver's death after the change it was asked to die after (a kill -9: nothing runs after it).
struct Killed {};

const char* kindText(Step::Kind k) {
  switch (k) {
    case Step::Kind::kPrepare:
      return "prepare";
    case Step::Kind::kUnprepare:
      return "unprepare";
    case Step::Kind::kDelete:
      return "delete";
    case Step::Kind::kSweep:
      return "sweep";
    case Step::Kind::kCniAdd:
      return "cni-add";
    case Step::Kind::kCniDel:
      return "cni-del";
    case Step::Kind::kAgent:
      return "agent-pass";
    case Step::Kind::kReboot:
      break;
  }
  return "reboot";
}

/// The bugs planted in the checkpoint's writes (the rest passes through). Under FaultyClaimEffects,
/// which numbers the driver's changes and fails or kills at the step's: the kill is an exception
/// (FaultPlan::onKill), after which nothing of the driver runs.
class PlantedEffects final : public fault::ForwardingClaimEffects {
 public:
  PlantedEffects(dra::ClaimEffects& real, Plant plant) : ForwardingClaimEffects(real), plant_(plant) {}

  [[nodiscard]] os::SysResult<void> store(const dra::ClaimRecords& records) override {
    dra::ClaimRecords planted = records;
    for (auto& [uid, r] : planted) {
      for (auto& c : r.changes) {
        if (plant_ == Plant::kForgetLinkState) {
          c.oldLinkState.reset();
        }
        if (plant_ == Plant::kPoolRecordedLate && r.state != dra::ClaimRecord::State::kPrepared) {
          c.guidPool.clear();
          c.guidPoolDir.clear();
        }
      }
    }
    return real().store(planted);
  }

 private:
  Plant plant_;
};

/// A live claim of a slot, as the API server and the kubelet know it.
struct Claim {
  std::string uid;
  std::string name;
  std::vector<int> vfs;
  json parameters;          ///< its opaque configuration for every request
  bool mayFail = false;     ///< a Prepare may fail by design (a pkey the VFs lack, a GUID held by another)
  bool prepared = false;
};

class Node {
 public:
  explicit Node(Plant plant) : plant_(plant) {
    dra::addEightVfs(sys_);
    for (int n = 0; n < kVfs; ++n) {
      const std::string rdma = "mlx5_" + std::to_string(n + 1);
      sys_.setPkeys(rdma, 1, {"0xffff", "0x8123"});
      if (n >= kFirstUnset) {
        sys_.setNodeGuid(rdma, "0000:0000:0000:0000");
      }
    }
    nl::Link pf;
    pf.name = "ib0";
    pfIndex_ = nl_.addLink(host_, pf);
    nl_.setVfs(host_, pfIndex_, firmware());
    fs::create_directories(cdiDir());
    owner_.fill(-1);
    // sriov mode's network "ibnet" on the same pool, as the CNI parses its guidPool.
    const json nad = {{"cniVersion", "1.1.0"}, {"name", "ibnet"}, {"type", "ibcni"}, {"mode", "sriov"},
                      {"deviceID", "0000:3b:01.0"}, {"guidPool", poolObject("always")}};
    cniPool_ = **config::parseNetConf(nad.dump(), cni::Command::kAdd)->guidPool;
  }

  std::string apply(const Step& s);
  [[nodiscard]] std::optional<Violation> check();
  std::optional<Violation> violation;

 private:
  std::string cdiDir() const { return dir_.path() + "/cdi"; }
  std::string ipamDir() const { return dir_.path() + "/ipam"; }
  std::string storeDir() const { return ipamDir() + "/.guid/rail"; }
  json poolObject(const char* assign) const {
    return {{"pool", "rail"}, {"range", "02:00:00:00:00:b0:00:00-02:00:00:00:00:b0:00:1f"}, {"blockSize", 8},
            {"assign", assign}, {"dataDir", ipamDir()}};
  }
  static std::vector<nl::VfInfo> firmware() {
    std::vector<nl::VfInfo> vfs;
    for (int n = 0; n < kVfs; ++n) {
      const net::Guid g{n >= kFirstUnset ? 0 : kFirmware + static_cast<std::uint64_t>(n)};
      vfs.push_back(nl::VfInfo{static_cast<std::uint32_t>(n), nl::VfLinkState::kAuto, g, g});
    }
    return vfs;
  }
  nl::VfInfo vfNow(int n) { return nl_.vf(host_, pfIndex_, static_cast<std::uint32_t>(n)).value_or(nl::VfInfo{}); }
  void violate(const std::string& kind, const std::string& what) {
    if (!violation) {
      violation = Violation{kind, what};
    }
  }
  /// The driver running `call` with the step's faults: its answer, or "killed".
  template <class Call>
  std::string withDriver(const Step& s, Call&& call) {
    dra::NodeClaimEffects real(dra::ClaimCheckpoint(dir_.path() + "/claims.json"), {dir_.path(), cdiDir()},
                               {nl_, host_, devices_, guids_});
    PlantedEffects planted(real, plant_);
    fault::FaultPlan plan(static_cast<unsigned>(s.failAt), 0, "", static_cast<unsigned>(s.killAfter));
    plan.onKill([] { throw Killed{}; });
    fault::FaultyClaimEffects effects(planted, plan);
    dra::ClaimPreparation driver(api_, devices_, inventory_, effects,
                                 {.driver = "ibcni.io", .nodeName = kNodeName, .bootId = boot_});
    try {
      return call(driver);
    } catch (const Killed&) {
      return "killed";
    }
  }
  /// One kubelet call to the driver, with the step's faults: its answer, or "killed".
  std::string callDriver(const Step& s, bool prepare, const dra::ClaimRef& ref) {
    return withDriver(s, [&](dra::ClaimPreparation& driver) {
      return prepare ? driver.prepare(ref).error : driver.unprepare(ref);
    });
  }
  dra::ClaimRecords records() {
    auto r = dra::ClaimCheckpoint(dir_.path() + "/claims.json").load();
    if (!r) {
      violate("CHECKPOINT", r.error().describe());
      return {};
    }
    return *r;
  }
  Claim newClaim(std::uint64_t pick);
  std::string prepare(const Step& s);
  std::string unprepare(const Step& s);
  std::string deleteClaim(const Step& s);
  std::string sweep(const Step& s);
  [[nodiscard]] bool heldByAnother(const Claim& c);
  std::string cniAdd(const Step& s);
  std::string cniDel(const Step& s);
  std::string agentPass();
  std::string reboot();
  void checkPrepared(const Claim& c);
  void checkGone(const Claim& c);

  Plant plant_;
  testing::TempDir dir_{"ibcni-claim-chaos"};
  testing::FakeSysfsTree sys_;
  sysfs::SysfsDevices devices_{sys_.root()};
  sysfs::SysfsInventory inventory_{sys_.root()};
  testing::FakeNetlink nl_;
  const os::Netns host_ = os::Netns::fakeForTest("/proc/1/ns/net", 1);
  int pfIndex_ = 0;
  ipam::EmbeddedGuidPools guids_;
  dra::MemoryClaims api_;
  std::string boot_ = "boot-1";
  int boots_ = 1;
  int counter_ = 0;
  std::array<std::optional<Claim>, kSlots> claims_;
  std::vector<Claim> deleted_;  // deleted from the API server behind the kubelet's back, not yet swept
  std::array<std::optional<std::string>, kSlots> cni_;  // the CNI pod holding a pool GUID, by slot
  std::array<int, kVfs> owner_{};                       // the slot whose claim was allocated the VF
  config::GuidPoolConf cniPool_;
};

Claim Node::newClaim(std::uint64_t pick) {
  Claim c;
  c.uid = "claim-" + std::to_string(++counter_);
  c.name = "c" + std::to_string(counter_);
  const int choice = static_cast<int>(pick % 7);
  switch (choice) {
    case 1:  // a GUID of its own, outside the pool: unique, as an operator gives them
      c.parameters = {{"guid", net::Guid{0x02000000c0000000ULL + static_cast<std::uint64_t>(counter_)}.toString()}};
      break;
    case 2:  // a GUID of the pool, which another holder may have
      c.parameters = {{"guid", net::Guid{kPoolFirst + (pick >> 8U) % 32}.toString()},
                      {"guidPool", poolObject("when-unset")}};
      c.mayFail = true;
      break;
    case 3:
      c.parameters = {{"guidPool", poolObject("always")}};
      break;
    case 4:
      c.parameters = {{"guidPool", poolObject("when-unset")}, {"linkState", "enable"}};
      break;
    case 5:  // a pkey the VFs lack
      c.parameters = {{"pkey", "0x0999"}};
      c.mayFail = true;
      break;
    case 6:
      c.parameters = {{"linkState", "disable"}, {"pkey", "0x0123"}};
      break;
    default:
      c.parameters = json::object();
  }
  // A GUID asked for is one VF's: two VFs of one claim would carry it both.
  const std::size_t wanted = (choice == 1 || choice == 2) ? 1 : 1 + (pick >> 16U) % 2;
  for (int i = 0; i < kVfs && c.vfs.size() < wanted; ++i) {
    const int n = static_cast<int>((pick >> 20U) + static_cast<std::uint64_t>(i)) % kVfs;
    if (owner_[static_cast<std::size_t>(n)] < 0) {
      c.vfs.push_back(n);
    }
  }
  const bool getsGuid = c.parameters.contains("guid") || c.parameters.contains("guidPool");
  if (!getsGuid && std::any_of(c.vfs.begin(), c.vfs.end(), [](int n) { return n >= kFirstUnset; })) {
    c.mayFail = true;  // a VF without a GUID, and nothing gives it one: refused
  }
  return c;
}

std::string Node::prepare(const Step& s) {
  auto& slot = claims_[static_cast<std::size_t>(s.slot)];
  if (!slot) {
    Claim c = newClaim(s.pick);
    if (c.vfs.empty()) {
      return "no VF free";
    }
    json results = json::array();
    for (std::size_t i = 0; i < c.vfs.size(); ++i) {
      results.push_back({{"request", "rail-" + std::to_string(i)}, {"driver", "ibcni.io"}, {"pool", kNodeName},
                         {"device", dra::eightVfsName(c.vfs[i])}});
      owner_[static_cast<std::size_t>(c.vfs[i])] = s.slot;
    }
    json config = json::array();
    if (!c.parameters.empty()) {
      config.push_back({{"source", "FromClaim"}, {"opaque", {{"driver", "ibcni.io"}, {"parameters", c.parameters}}}});
    }
    api_.claims["ns/" + c.name] = {{"metadata", {{"name", c.name}, {"namespace", "ns"}, {"uid", c.uid}}},
                                   {"status", {{"allocation", {{"devices", {{"results", results}, {"config", config}}}}}}}};
    slot = c;
  }
  Claim& c = *slot;
  const bool held = heldByAnother(c);  // refused until the sweep has undone that claim
  const std::string answer = callDriver(s, true, {"ns", c.uid, c.name});
  const bool faulted = s.killAfter > 0 || s.failAt > 0;
  c.prepared = answer.empty();
  if (!faulted && !c.mayFail && !held && !answer.empty()) {
    violate("PREPARE", "Prepare of " + c.uid + " " + c.parameters.dump() + " failed: " + answer);
  }
  if (c.prepared) {
    checkPrepared(c);
  }
  return c.uid + " " + c.parameters.dump() + ": " + (answer.empty() ? "ok" : answer);
}

void Node::checkPrepared(const Claim& c) {
  if (!fs::exists(dra::cdiSpecPath(cdiDir(), c.uid))) {
    violate("PREPARED", c.uid + " was prepared, but its CDI spec is not there");
  }
  for (int n : c.vfs) {
    const nl::VfInfo v = vfNow(n);
    if (c.parameters.contains("guid") && v.nodeGuid != net::Guid::parse(c.parameters["guid"].get<std::string>())) {
      violate("PREPARED", c.uid + ": VF " + std::to_string(n) + " does not carry the GUID the claim asked for");
    }
    if (c.parameters.contains("linkState") &&
        v.linkState != (c.parameters["linkState"] == "enable" ? nl::VfLinkState::kEnable : nl::VfLinkState::kDisable)) {
      violate("PREPARED", c.uid + ": VF " + std::to_string(n) + " is not in the link state the claim asked for");
    }
    if (!v.nodeGuid || v.nodeGuid->value == 0 || v.nodeGuid->value == kAllOnes) {
      violate("PREPARED", c.uid + ": VF " + std::to_string(n) + " was prepared without a GUID");
    }
  }
}

std::string Node::unprepare(const Step& s) {
  auto& slot = claims_[static_cast<std::size_t>(s.slot)];
  const bool faulted = s.killAfter > 0 || s.failAt > 0;
  if (!slot) {
    const std::string answer = callDriver(s, false, {"ns", "never-" + std::to_string(++counter_), "gone"});
    if (!faulted && !answer.empty()) {
      violate("UNPREPARE", "Unprepare of a claim never prepared failed: " + answer);
    }
    return "unknown claim: " + (answer.empty() ? "ok" : answer);
  }
  Claim& c = *slot;
  const std::string answer = callDriver(s, false, {"ns", c.uid, c.name});
  if (!answer.empty()) {
    if (!faulted) {
      violate("UNPREPARE", "Unprepare of " + c.uid + " failed: " + answer);
    }
    c.prepared = false;
    return c.uid + ": " + answer;  // the kubelet calls again
  }
  // Unprepared: the pod and its claim are gone; the scheduler may give the VFs to another claim.
  const Claim gone = c;
  api_.claims.erase("ns/" + c.name);
  for (int n : c.vfs) {
    owner_[static_cast<std::size_t>(n)] = -1;
  }
  slot.reset();
  checkGone(gone);
  return gone.uid + ": ok";
}

bool Node::heldByAnother(const Claim& c) {
  for (const auto& [uid, r] : records()) {
    for (const auto& d : r.devices) {
      for (int n : c.vfs) {
        if (uid != c.uid && d.deviceName == dra::eightVfsName(n)) {
          return true;
        }
      }
    }
  }
  return false;
}

std::string Node::deleteClaim(const Step& s) {
  auto& slot = claims_[static_cast<std::size_t>(s.slot)];
  if (!slot) {
    return "no claim";
  }
  // The claim is deleted and the kubelet never unprepares it (it lost the pod): the scheduler may
  // give its VFs to another claim at once.
  api_.claims.erase("ns/" + slot->name);
  for (int n : slot->vfs) {
    owner_[static_cast<std::size_t>(n)] = -1;
  }
  deleted_.push_back(*slot);
  const std::string out = slot->uid + " deleted";
  slot.reset();
  return out;
}

std::string Node::sweep(const Step& s) {
  const bool faulted = s.killAfter > 0 || s.failAt > 0;
  const dra::ClaimRecords before = records();
  std::string answer = withDriver(s, [&](dra::ClaimPreparation& driver) {
    dra::ClaimSweep sweep(api_, driver, std::chrono::seconds(0));
    const auto report = sweep.pass(before, dra::ClaimSweep::Clock::now());
    std::string out = std::to_string(report.undone.size()) + " undone";
    for (const auto& e : report.errors) {
      out += "; " + e;
    }
    return out;
  });
  // The live claims are left alone, whatever the fault.
  const dra::ClaimRecords after = records();
  for (const auto& c : claims_) {
    if (c && before.count(c->uid) != 0 && after.count(c->uid) == 0) {
      violate("SWEEP", "the sweep undid " + c->uid + ", which the API server still has");
    }
  }
  if (!faulted) {
    if (answer.find(';') != std::string::npos) {
      violate("SWEEP", "a sweep without a fault failed: " + answer);
    }
    for (const Claim& c : deleted_) {
      checkGone(c);  // nothing of a deleted claim outlives the sweep after it
    }
    deleted_.clear();
  }
  return answer;
}

void Node::checkGone(const Claim& c) {
  if (records().count(c.uid) != 0) {
    violate("GONE", c.uid + " was unprepared, but its record is still there");
  }
  if (fs::exists(dra::cdiSpecPath(cdiDir(), c.uid))) {
    violate("GONE", c.uid + " was unprepared, but its CDI spec is still there");
  }
  if (fs::exists(dir_.path() + "/dra-device-metadata/ns_" + c.name)) {
    violate("GONE", c.uid + " was unprepared, but its device metadata is still there");
  }
  for (const auto& h : guids_.holders(storeDir()).value_or(std::vector<ipam::ReleasedAllocation>{})) {
    if (h.containerId == c.uid) {
      violate("GONE", c.uid + " was unprepared, but the pool still gives it GUID " + h.addresses.at(0));
    }
  }
}

std::string Node::cniAdd(const Step& s) {
  auto& pod = cni_[static_cast<std::size_t>(s.slot)];
  if (pod) {
    return "held already";
  }
  const std::string cid = "pod-" + std::to_string(++counter_);
  const cni::CmdArgs args{cni::Command::kAdd, cid, "/proc/1/ns/net", "net1", "", {}};
  const cni::CniArgs cniArgs;
  auto lease = guids_.allocate({cniPool_, "ibnet", args, cniArgs, std::nullopt, ""});
  if (!lease) {
    return cid + ": " + lease.error().msg;
  }
  pod = cid;
  return cid + ": " + lease->guid.toString();
}

std::string Node::cniDel(const Step& s) {
  auto& pod = cni_[static_cast<std::size_t>(s.slot)];
  if (!pod) {
    return "no pod";
  }
  auto released = guids_.release(storeDir(), {*pod, "net1"}, "ibnet");
  if (!released) {
    violate("CNI-DEL", "DEL of " + *pod + " failed: " + released.error().msg);
  }
  const std::string out = *pod + ": ok";
  pod.reset();
  return out;
}

std::string Node::agentPass() {
  // The node agent's rule (plugin/agent/reconcile_guid_pools): a GUID whose attachment has no CNI
  // record is released, but a claim's (ibcni-dra's network), which ibcni-dra's checkpoint records.
  auto out = guids_.maintain(storeDir(), false, [&](const std::string& network, const cni::AttachmentKey& key) {
    if (network == ipam::kDraGuidNetwork) {
      return true;
    }
    return std::any_of(cni_.begin(), cni_.end(), [&](const auto& p) { return p && *p == key.containerId; });
  });
  return out ? std::to_string(out->released.size()) + " released" : out.error().msg;
}

std::string Node::reboot() {
  boot_ = "boot-" + std::to_string(++boots_);
  nl_.setVfs(host_, pfIndex_, firmware());  // the firmware's GUIDs and link state again
  fs::remove_all(cdiDir());                 // /run is empty again: the CDI specs ...
  fs::remove_all(ipamDir());                // ... and the node-local pool
  fs::create_directories(cdiDir());
  for (auto& pod : cni_) {
    pod.reset();  // the pods are made again by the runtime (a new ADD)
  }
  for (auto& c : claims_) {
    if (c) {
      c->prepared = false;  // the kubelet prepares them again
    }
  }
  return boot_;
}

std::string Node::apply(const Step& s) {
  switch (s.kind) {
    case Step::Kind::kPrepare:
      return prepare(s);
    case Step::Kind::kUnprepare:
      return unprepare(s);
    case Step::Kind::kDelete:
      return deleteClaim(s);
    case Step::Kind::kSweep:
      return sweep(s);
    case Step::Kind::kCniAdd:
      return cniAdd(s);
    case Step::Kind::kCniDel:
      return cniDel(s);
    case Step::Kind::kAgent:
      return agentPass();
    case Step::Kind::kReboot:
      break;
  }
  return reboot();
}

std::optional<Violation> Node::check() {
  if (violation) {
    return violation;
  }
  const dra::ClaimRecords recs = records();
  std::map<std::uint64_t, int> carriers;
  for (int n = 0; n < kVfs; ++n) {
    const nl::VfInfo v = vfNow(n);
    const std::uint64_t g = v.nodeGuid ? v.nodeGuid->value : 0;
    const std::uint64_t fw = n >= kFirstUnset ? 0 : kFirmware + static_cast<std::uint64_t>(n);
    if (g != 0 && g != kAllOnes) {
      if (auto [it, fresh] = carriers.emplace(g, n); !fresh) {
        violate("G1", "VFs " + std::to_string(it->second) + " and " + std::to_string(n) + " both carry GUID " +
                          v.nodeGuid->toString());
      }
    }
    // Nothing outlives its holder: a VF changed from what the firmware gave it is named by a record.
    const bool guidChanged = g != fw && !(fw == 0 && g == kAllOnes);
    const bool linkChanged = v.linkState != nl::VfLinkState::kAuto;
    bool guidNamed = false;
    bool linkNamed = false;
    for (const auto& [uid, r] : recs) {
      for (const auto& c : r.changes) {
        if (c.vf == static_cast<std::uint32_t>(n)) {
          guidNamed = guidNamed || (v.nodeGuid && c.guid == v.nodeGuid->toString());
          linkNamed = linkNamed || c.oldLinkState.has_value();
        }
      }
    }
    if (guidChanged && !guidNamed) {
      violate("G3", "VF " + std::to_string(n) + " carries GUID " + v.nodeGuid->toString() + " that no claim's record names");
    }
    if (linkChanged && !linkNamed) {
      violate("G3", "VF " + std::to_string(n) + " has a link state no claim's record names");
    }
  }
  // G5: a VF is prepared for one claim at a time (a new claim's Prepare waits for the old record).
  std::map<std::string, std::string> preparedFor;
  for (const auto& [uid, r] : recs) {
    for (const auto& d : r.devices) {
      if (auto [it, fresh] = preparedFor.emplace(d.deviceName, uid); !fresh) {
        violate("G5", "VF " + d.deviceName + " is in the records of " + it->second + " and " + uid);
      }
    }
  }
  std::set<std::string> given;
  for (const auto& h : guids_.holders(storeDir()).value_or(std::vector<ipam::ReleasedAllocation>{})) {
    const std::string g = h.addresses.empty() ? "" : h.addresses[0];
    if (!given.insert(g).second) {
      violate("G1", "the pool gives GUID " + g + " twice");
    }
    if (h.network == ipam::kDraGuidNetwork && recs.count(h.containerId) == 0) {
      violate("G2", "the pool gives GUID " + g + " to claim " + h.containerId + ", which has no record");
    }
    if (h.network == "ibnet" &&
        std::none_of(cni_.begin(), cni_.end(), [&](const auto& p) { return p && *p == h.containerId; })) {
      violate("G2", "the pool gives GUID " + g + " to pod " + h.containerId + ", which is gone");
    }
    // A VF carrying a pool GUID carries its own claim's, never another holder's.
    if (auto carrier = carriers.find(net::Guid::parse(g).value_or(net::Guid{}).value); carrier != carriers.end()) {
      if (h.network != ipam::kDraGuidNetwork || h.ifName != dra::eightVfsName(carrier->second)) {
        violate("G1", "VF " + std::to_string(carrier->second) + " carries GUID " + g + ", which the pool gives " +
                          h.network + " " + h.containerId + "/" + h.ifName);
      }
    }
  }
  for (const auto& e : fs::directory_iterator(cdiDir())) {
    const std::string file = e.path().filename().string();
    const bool recorded = std::any_of(recs.begin(), recs.end(), [&](const auto& r) {
      return file == fs::path(dra::cdiSpecPath("", r.first)).filename().string() ||
             file.starts_with("ibcni.io_metadata_" + r.first + "_");
    });
    if (!recorded) {
      violate("G4", "CDI spec " + file + " belongs to no claim's record");
    }
  }
  if (fs::exists(dir_.path() + "/dra-device-metadata")) {
    for (const auto& e : fs::directory_iterator(dir_.path() + "/dra-device-metadata")) {
      const std::string folder = e.path().filename().string();  // <namespace>_<claim name>
      const bool recorded = std::any_of(recs.begin(), recs.end(),
                                        [&](const auto& r) { return folder == r.second.ref.ns + "_" + r.second.ref.name; });
      if (!recorded) {
        violate("G4", "device metadata " + folder + " belongs to no claim's record");
      }
    }
  }
  return violation;
}

}  // namespace

std::string Step::text() const {
  std::string out = kindText(kind);
  if (kind != Kind::kAgent && kind != Kind::kReboot && kind != Kind::kSweep) {
    out += " slot=" + std::to_string(slot);
  }
  if (kind == Kind::kPrepare) {
    out += " pick=" + std::to_string(pick);
  }
  if (killAfter > 0) {
    out += " kill-after=" + std::to_string(killAfter);
  }
  if (failAt > 0) {
    out += " fail-at=" + std::to_string(failAt);
  }
  return out;
}

Outcome run(const std::vector<Step>& schedule, Plant plant) {
  Outcome out;
  Node node(plant);
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    out.log.push_back(schedule[i].text() + " -> " + node.apply(schedule[i]));
    if (auto v = node.check()) {
      out.violation = v;
      out.failedStep = i;
      return out;
    }
  }
  return out;
}

std::vector<Step> generate(std::uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  std::vector<Step> out;
  for (int i = 0; i < steps; ++i) {
    Step s;
    const auto r = rng() % 100;
    s.kind = r < 38   ? Step::Kind::kPrepare
             : r < 62 ? Step::Kind::kUnprepare
             : r < 67 ? Step::Kind::kDelete
             : r < 73 ? Step::Kind::kSweep
             : r < 81 ? Step::Kind::kCniAdd
             : r < 88 ? Step::Kind::kCniDel
             : r < 95 ? Step::Kind::kAgent
                      : Step::Kind::kReboot;
    s.slot = static_cast<int>(rng() % kSlots);
    s.pick = rng();
    if (s.kind == Step::Kind::kPrepare || s.kind == Step::Kind::kUnprepare || s.kind == Step::Kind::kSweep) {
      const auto f = rng() % 10;
      if (f < 3) {
        s.killAfter = 1 + static_cast<int>(rng() % 14);
      } else if (f < 5) {
        s.failAt = 1 + static_cast<int>(rng() % 14);
      }
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace ibcni::chaos::claims
