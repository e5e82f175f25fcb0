// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's CDI spec consumed by a real container runtime, inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 1 -- <build>/tests/kernel-lab/cdi_podman_vm_test
// Soft-RoCE rxe0 on eth0 stands in for a VF's RDMA device: the claim's device is eth0's PCI
// function (the VM's virtio-net NICs stand in for VFs), with rxe0 as its RDMA device and eth0 as
// its netdev. The test reads rxe0's character devices and rdma_cm with the production
// SysfsInventory on the VM's /sys, builds the claim's CDI device with vfCdiDevice, writes the spec
// with writeCdiSpec into a private directory and runs Debian's podman (4.3) with
// `--device ibcni.io/vf=<name>`. In the container the injected /dev/infiniband nodes must carry
// sysfs' major:minor, the IBCNI_* env must be set, `ibv_devices` must list rxe0 and
// `ibv_devinfo -d rxe0` open it through them; a container without the device must not see it, a
// spec with a wrong minor must not let verbs open it, and once the spec is removed podman must
// refuse the device.
//
// podman 4.3 reads CDI specs only from /etc/cdi and /var/run/cdi (no --cdi-spec-dir), so each
// podman runs in a private mount namespace (unshare -m) where a tmpfs over /run holds /run/cdi,
// bound to the spec directory (and a tmpfs hides /etc/cdi when the machine has one): the VM's own
// /run and /etc are not written. Its --root, --runroot and --tmpdir are in the test's temporary
// directory; the image is the VM's own root file system (`--rootfs`, a recursive bind mount of /
// in that namespace: runc's pivot_root refuses / itself), which has ibverbs-utils and rxe's
// provider. Outside the VM every test skips: the host's RDMA devices and mounts are not ours.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "ibcni/net/ip.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/device_metadata.h"
#include "plugin/dra/ib_devices.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"
#include "vm_test_util.h"

namespace ibcni::dra {
namespace {

namespace fs = std::filesystem;
using ::ibcni::testing::lab::Cmd;
using ::ibcni::testing::lab::inKernelLab;
using ::ibcni::testing::lab::sh;

constexpr const char* kNic = "eth0";
constexpr const char* kRequest = "rdma-0";

/// The podman runner: a private mount namespace with the spec directory ($1, "-" for none) as
/// /run/cdi, then `podman run` with the remaining arguments. Run through `unshare -m`.
constexpr const char* kPodmanSh = R"sh(set -e
t=$(dirname "$(readlink -f "$0")")
spec=$1
shift
mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs /run
if [ -d /etc/cdi ]; then mount -t tmpfs tmpfs /etc/cdi; fi
if [ "$spec" != - ]; then
  mkdir /run/cdi
  mount --bind "$spec" /run/cdi
fi
mount --rbind / "$t/rootfs"
exec podman --root "$t/root" --runroot "$t/runroot" --tmpdir "$t/tmp" --storage-driver vfs \
  --cgroup-manager cgroupfs --events-backend none \
  run --rm --network none --log-driver k8s-file --security-opt apparmor=unconfined "$@"
)sh";

/// What runs in the container: the /dev/infiniband nodes, the IBCNI_* env, then what verbs see.
constexpr const char* kProbeSh = R"sh(for n in /dev/infiniband/*; do
  [ -e "$n" ] && stat -c 'node %n %F %Hr:%Lr' "$n"
done
env | grep '^IBCNI_' | sed 's/^/env /'
echo "devices:"
ibv_devices
echo "devinfo:"
ibv_devinfo -d rxe0
echo "devinfo exit $?"
)sh";

/// What runs in the container to read a claim's device metadata (argument: its path) and try to write it.
constexpr const char* kMetadataSh = R"sh(cat "$1" && echo "read exit 0"
if echo x >> "$1" 2>/dev/null; then echo "metadata writable"; else echo "metadata read-only"; fi
)sh";

/// What the container showed.
struct Seen {
  bool ok = false;  ///< podman exited 0
  std::string out;
  std::vector<std::string> nodes;  ///< "/dev/infiniband/uverbs0 character special file 231:192"
  std::vector<std::string> env;    ///< "IBCNI_..=..."
  bool listsRxe0 = false;          ///< ibv_devices lists rxe0
  bool devinfoOk = false;          ///< ibv_devinfo -d rxe0 exited 0 and named it
};

Seen parse(const Cmd& run) {
  Seen s;
  s.ok = run.ok;
  s.out = run.out;
  std::istringstream in(run.out);
  std::string line;
  enum { kOther, kDevices, kDevinfo } where = kOther;
  while (std::getline(in, line)) {
    if (line.rfind("node ", 0) == 0) {
      s.nodes.push_back(line.substr(5));
    } else if (line.rfind("env ", 0) == 0) {
      s.env.push_back(line.substr(4));
    } else if (line == "devices:") {
      where = kDevices;
    } else if (line == "devinfo:") {
      where = kDevinfo;
    } else if (line == "devinfo exit 0") {
      s.devinfoOk = s.devinfoOk && where == kDevinfo;
    } else if (line.rfind("devinfo exit ", 0) == 0) {
      s.devinfoOk = false;
    } else if (where == kDevices) {
      std::istringstream words(line);
      std::string first;
      words >> first;
      s.listsRxe0 = s.listsRxe0 || first == "rxe0";
    } else if (where == kDevinfo && line.find("hca_id:") != std::string::npos &&
               line.find("rxe0") != std::string::npos) {
      s.devinfoOk = true;
    }
  }
  return s;
}

std::string nodeLine(const sysfs::CharDevice& c) {
  return "/dev/infiniband/" + c.name + " character special file " + std::to_string(c.major) + ":" +
         std::to_string(c.minor);
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  for (const auto& e : v) {
    if (e == x) {
      return true;
    }
  }
  return false;
}

/// rxe0 on eth0 and a temporary directory with the podman runner, for the whole suite (every
/// podman run costs 5-20 s in the emulated VM).
class CdiPodmanVm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!inKernelLab()) {
      return;
    }
    if (!sh("command -v podman && command -v ibv_devices && command -v unshare").ok) {
      setupError_ = "podman, ibverbs-utils or unshare is not installed";
      return;
    }
    char tmpl[] = "/tmp/ibcni-cdi.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      setupError_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    for (const char* sub : {"rootfs", "root", "runroot", "tmp"}) {
      fs::create_directory(dir_ / sub);
    }
    std::ofstream(dir_ / "podman.sh") << kPodmanSh;
    std::ofstream(dir_ / "probe.sh") << kProbeSh;
    std::ofstream(dir_ / "metadata.sh") << kMetadataSh;
    const Cmd add = sh(std::string("rdma link add rxe0 type rxe netdev ") + kNic);
    if (!add.ok) {
      setupError_ = "rdma link add rxe0: " + add.out;
      return;
    }
    made_ = true;
  }

  static void TearDownTestSuite() {
    if (made_) {
      const Cmd del = sh("rdma link delete rxe0");
      if (!del.ok) {
        std::cout << "[ error   ] rdma link delete rxe0: " << del.out << std::endl;
      }
      made_ = false;
    }
    if (!dir_.empty()) {
      // rootfs is a mount point only in the podman runs' namespaces, gone with them: here it is an
      // empty directory. Should it hold anything (the VM's root), nothing is removed.
      std::error_code ec;
      if (fs::remove(dir_ / "rootfs", ec) || !fs::exists(dir_ / "rootfs")) {
        fs::remove_all(dir_, ec);
      } else {
        std::cout << "[ error   ] " << (dir_ / "rootfs").string() << " is not empty: left in place" << std::endl;
      }
      dir_.clear();
    }
  }

  void SetUp() override {
    if (!inKernelLab()) {
      GTEST_SKIP() << "not in the kernel-lab VM (KERNEL_LAB=1 unset): run it with "
                      "../shared/kernel-lab/run.sh --nics 1 -- <this binary>";
    }
    ASSERT_TRUE(setupError_.empty()) << setupError_;
    ASSERT_TRUE(made_);
  }

  /// The claim's device: eth0's PCI function as a VF whose RDMA device is rxe0.
  static IbDevice claimDevice() {
    IbDevice d;
    d.kind = DeviceKind::kVf;
    std::error_code ec;
    const fs::path fn = fs::canonical(fs::path("/sys/class/net") / kNic / "device", ec).parent_path();
    auto pci = net::PciAddress::parse(fn.filename().string());
    EXPECT_TRUE(pci.has_value()) << fn;
    if (pci) {
      d.pci = *pci;
      d.pfPci = *pci;
    }
    d.name = deviceName(d.kind, d.pci);
    d.rdmaDevice = "rxe0";
    d.ifName = kNic;
    return d;
  }

  /// Writes claim `claimUid`'s spec with `device` into a spec directory of its own.
  static fs::path writeSpec(const std::string& claimUid, const CdiDevice& device) {
    const fs::path spec = dir_ / ("spec-" + claimUid);
    fs::create_directory(spec);
    auto written = writeCdiSpec(spec.string(), claimUid, {device});
    EXPECT_TRUE(written.has_value()) << written.error().describe();
    std::ifstream in(cdiSpecPath(spec.string(), claimUid));
    std::cout << "[ info    ] " << cdiSpecPath(spec.string(), claimUid) << ":\n" << in.rdbuf() << std::endl;
    return spec;
  }

  /// podman run [--device <id>] of the probe (or `probe`, a script of dir_ with its arguments),
  /// with `spec` as /run/cdi ("" for none).
  static Seen run(const fs::path& spec, const std::string& deviceId, const std::string& probe = "probe.sh") {
    std::string cmd = "timeout 300 unshare -m sh " + (dir_ / "podman.sh").string() + " " +
                      (spec.empty() ? std::string("-") : spec.string());
    if (!deviceId.empty()) {
      cmd += " --device " + deviceId;
    }
    cmd += " --rootfs " + (dir_ / "rootfs").string() + " sh " + (dir_ / probe).string();
    Cmd out = sh(cmd);
    std::cout << "[ info    ] " << cmd << " (" << (out.ok ? "exit 0" : "failed") << "):\n" << out.out << std::endl;
    return parse(out);
  }

  /// rxe0's character devices and rdma_cm as the DRA driver reads them: SysfsInventory on /sys.
  /// Should that fail (CharDevicesOfRxe0FromTheRealSys says why), through SysfsInventory on a view
  /// of /sys with only the RDMA device entries (links to the real ones, as /sys/class has), so that
  /// what podman makes of the spec is still shown.
  static void readChars(sysfs::RdmaCharDevices& chars, std::optional<sysfs::CharDevice>& cm) {
    sysfs::SysfsInventory inv("/sys");
    auto c = inv.charDevices("rxe0");
    if (!c) {
      std::cout << "[ info    ] SysfsInventory(\"/sys\").charDevices(\"rxe0\"): " << c.error().describe()
                << "; read through " << sysView().string() << " instead" << std::endl;
      c = sysfs::SysfsInventory(sysView().string()).charDevices("rxe0");
    }
    ASSERT_TRUE(c.has_value()) << c.error().describe();
    chars = *c;
    auto r = inv.rdmaCm();
    ASSERT_TRUE(r.has_value()) << r.error().describe();
    cm = *r;
    ASSERT_TRUE(chars.uverbs.has_value()) << "rxe0 has no uverbs device (ib_uverbs not loaded?)";
    ASSERT_TRUE(cm.has_value()) << "no rdma_cm (rdma_ucm not loaded?)";
  }

  /// <dir>/sys: class/infiniband_verbs and class/infiniband_mad with links to the real devices'
  /// folders only (no abi_version file), class/misc/rdma_cm.
  static fs::path sysView() {
    const fs::path view = dir_ / "sys";
    if (fs::exists(view)) {
      return view;
    }
    for (const char* cls : {"infiniband_verbs", "infiniband_mad"}) {
      const fs::path real = fs::path("/sys/class") / cls;
      fs::create_directories(view / "class" / cls);
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(real, ec)) {
        if (e.is_directory()) {
          fs::create_directory_symlink(fs::canonical(e.path(), ec), view / "class" / cls / e.path().filename(), ec);
        }
      }
    }
    std::error_code ec;
    fs::create_directories(view / "class" / "misc");
    fs::create_directory_symlink(fs::canonical("/sys/class/misc/rdma_cm", ec), view / "class" / "misc" / "rdma_cm", ec);
    return view;
  }

  static inline fs::path dir_;
  static inline bool made_ = false;
  static inline std::string setupError_;
};

// The DRA driver's read of the character devices on a real kernel's /sys, checked against it:
// /sys/class/infiniband_verbs and infiniband_mad hold an abi_version file beside the devices.
TEST_F(CdiPodmanVm, CharDevicesOfRxe0FromTheRealSys) {
  sysfs::SysfsInventory inv("/sys");
  auto c = inv.charDevices("rxe0");
  ASSERT_TRUE(c.has_value()) << c.error().describe();
  ASSERT_TRUE(c->uverbs.has_value());
  EXPECT_EQ(c->uverbs->name, "uverbs0");
  const auto dev = [](const std::string& path) {
    std::ifstream in(path);
    std::string text;
    std::getline(in, text);
    return text;
  };
  EXPECT_EQ(std::to_string(c->uverbs->major) + ":" + std::to_string(c->uverbs->minor),
            dev("/sys/class/infiniband_verbs/uverbs0/dev"));
  ASSERT_EQ(c->umad.size(), 1U);
  EXPECT_EQ(std::to_string(c->umad[0].major) + ":" + std::to_string(c->umad[0].minor),
            dev("/sys/class/infiniband_mad/" + c->umad[0].name + "/dev"));
  ASSERT_EQ(c->issm.size(), 1U);
  EXPECT_EQ(std::to_string(c->issm[0].major) + ":" + std::to_string(c->issm[0].minor),
            dev("/sys/class/infiniband_mad/" + c->issm[0].name + "/dev"));
  auto cm = inv.rdmaCm();
  ASSERT_TRUE(cm.has_value()) << cm.error().describe();
  ASSERT_TRUE(cm->has_value());
  EXPECT_EQ(std::to_string((*cm)->major) + ":" + std::to_string((*cm)->minor), dev("/sys/class/misc/rdma_cm/dev"));
}

// The driver's discovery over a real kernel's /sys (virtio PCI NICs without SR-IOV, rxe0 without a
// PCI function, Ethernet link layer): it reads every node the kernel shows without an error, and
// offers nothing (no InfiniBand VF or IPoIB port here), so the node publishes a slice of no devices.
TEST_F(CdiPodmanVm, DiscoveryReadsTheRealSysAndOffersNothingWithoutInfiniBand) {
  sysfs::SysfsDevices devices("/sys");
  sysfs::SysfsInventory inv("/sys");
  auto names = inv.rdmaDeviceNames();
  ASSERT_TRUE(names.has_value()) << names.error().describe();
  EXPECT_NE(std::find(names->begin(), names->end(), "rxe0"), names->end());
  auto found = dra::discoverDevices(devices, inv);
  ASSERT_TRUE(found.has_value()) << found.error().describe();
  EXPECT_TRUE(found->empty()) << found->size() << " devices, the first " << found->front().name;
}

TEST_F(CdiPodmanVm, PodmanGivesTheContainerTheClaimsRdmaDevice) {
  sysfs::RdmaCharDevices chars;
  std::optional<sysfs::CharDevice> cm;
  ASSERT_NO_FATAL_FAILURE(readChars(chars, cm));
  const std::string claimUid = "5f0c2d7e-3b1a-4c6d-9e8f-0a1b2c3d4e5f";
  const CdiDevice device = vfCdiDevice(claimUid, kRequest, claimDevice(), chars, cm);
  ASSERT_FALSE(device.env.empty());
  const fs::path spec = writeSpec(claimUid, device);

  const Seen with = run(spec, cdiDeviceId(device.name));
  ASSERT_TRUE(with.ok) << "podman did not run the container with " << cdiDeviceId(device.name) << ":\n" << with.out;
  // Every node of the spec, with sysfs' numbers (the spec's are sysfs', by construction above).
  ASSERT_EQ(with.nodes.size(), device.nodes.size()) << with.out;
  for (const auto& n : device.nodes) {
    EXPECT_TRUE(contains(with.nodes, nodeLine(n))) << nodeLine(n) << " is not in the container:\n" << with.out;
  }
  EXPECT_TRUE(contains(with.nodes, nodeLine(*chars.uverbs))) << with.out;
  EXPECT_TRUE(contains(with.nodes, nodeLine(*cm))) << with.out;
  for (const auto& e : device.env) {
    EXPECT_TRUE(contains(with.env, e)) << e << " is not in the container's env:\n" << with.out;
  }
  const std::string prefix = "IBCNI_RDMA_0_";
  EXPECT_TRUE(contains(with.env, prefix + "RDMA_DEVICE=rxe0")) << with.out;
  EXPECT_TRUE(contains(with.env, prefix + "NETDEV=" + kNic)) << with.out;
  EXPECT_TRUE(contains(with.env, prefix + "PCI_ADDRESS=" + claimDevice().pci.text)) << with.out;
  // The proof: verbs find rxe0 and open it through the injected node.
  EXPECT_TRUE(with.listsRxe0) << "ibv_devices in the container does not list rxe0:\n" << with.out;
  EXPECT_TRUE(with.devinfoOk) << "ibv_devinfo -d rxe0 failed in the container:\n" << with.out;

  // The same container without the device: a /dev of its own, no RDMA node, no rxe0 for verbs.
  const Seen without = run(spec, "");
  ASSERT_TRUE(without.ok) << without.out;
  EXPECT_TRUE(without.nodes.empty()) << without.out;
  EXPECT_TRUE(without.env.empty()) << without.out;
  EXPECT_FALSE(without.listsRxe0) << without.out;
  EXPECT_FALSE(without.devinfoOk) << without.out;

  // Unprepared (removeCdiSpec): podman no longer resolves the device and runs nothing.
  ASSERT_TRUE(removeCdiSpec(spec.string(), claimUid).has_value());
  const Seen gone = run(spec, cdiDeviceId(device.name));
  EXPECT_FALSE(gone.ok) << "podman ran a container with a device whose spec was removed:\n" << gone.out;
  EXPECT_NE(gone.out.find("CDI"), std::string::npos) << gone.out;
}

// The claim's device metadata (KEP-5304) as ibcni-dra writes it: podman resolves the request's
// ibcni.io/metadata device from its CDI spec and bind-mounts the file read-only where the pod looks
// for it; without the device the file is not there.
TEST_F(CdiPodmanVm, PodmanMountsTheClaimsDeviceMetadataReadOnly) {
  const ClaimRef claim{"ml", "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "nics"};
  const fs::path spec = dir_ / "spec-metadata";
  fs::create_directory(spec);
  const MetadataPlace at{(dir_ / "plugin").string(), spec.string()};
  const nlohmann::json device = {{"driver", "ibcni.io"},
                                 {"pool", "lab"},
                                 {"name", claimDevice().name},
                                 {"attributes", {{"ibcni.io/rdmaDevice", {{"string", "rxe0"}}}}}};
  auto written = writeDeviceMetadata(at, claim, std::nullopt, {RequestMetadata{kRequest, {device}}});
  ASSERT_TRUE(written.has_value()) << written.error().describe();
  const std::string inContainer =
      std::string("/var/run/kubernetes.io/dra-device-attributes/resourceclaims/nics/") + kRequest + "/ibcni.io-metadata.json";
  const Seen with = run(spec, metadataCdiId(claim.uid, kRequest), "metadata.sh " + inContainer);
  ASSERT_TRUE(with.ok) << with.out;
  EXPECT_NE(with.out.find("\"kind\":\"DeviceMetadata\""), std::string::npos) << with.out;
  EXPECT_NE(with.out.find("\"rxe0\""), std::string::npos) << with.out;
  EXPECT_NE(with.out.find("read exit 0"), std::string::npos) << with.out;
  EXPECT_NE(with.out.find("metadata read-only"), std::string::npos) << with.out;
  const Seen without = run(spec, "", "metadata.sh " + inContainer);
  EXPECT_EQ(without.out.find("read exit 0"), std::string::npos) << without.out;
  ASSERT_TRUE(removeDeviceMetadata(at, claim).has_value());
  EXPECT_FALSE(fs::exists(metadataCdiPath(spec.string(), claim.uid, kRequest)));
}

// The check can fail: a spec whose uverbs node has a wrong minor gives the container a node that
// is not rxe0's, and verbs cannot open rxe0 through it. (ibv_devices still lists it: libibverbs
// lists what sysfs shows once a node of that name exists, whatever its numbers; opening the device,
// as ibv_devinfo does, is the proof.)
TEST_F(CdiPodmanVm, WrongMinorInTheSpecGivesNoVerbsDevice) {
  sysfs::RdmaCharDevices chars;
  std::optional<sysfs::CharDevice> cm;
  ASSERT_NO_FATAL_FAILURE(readChars(chars, cm));
  const std::string claimUid = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70";
  CdiDevice device = vfCdiDevice(claimUid, kRequest, claimDevice(), chars, cm);
  sysfs::CharDevice wrong = *chars.uverbs;
  wrong.minor += 1;
  bool replaced = false;
  for (auto& n : device.nodes) {
    if (n == *chars.uverbs) {
      n = wrong;
      replaced = true;
    }
  }
  ASSERT_TRUE(replaced);
  const Seen seen = run(writeSpec(claimUid, device), cdiDeviceId(device.name));
  ASSERT_TRUE(seen.ok) << seen.out;
  EXPECT_TRUE(contains(seen.nodes, nodeLine(wrong))) << seen.out;
  EXPECT_FALSE(contains(seen.nodes, nodeLine(*chars.uverbs))) << seen.out;
  EXPECT_FALSE(seen.devinfoOk) << "verbs opened rxe0 through a node with the wrong minor:\n" << seen.out;
  EXPECT_NE(seen.out.find("Failed to open device"), std::string::npos) << seen.out;
}

}  // namespace
}  // namespace ibcni::dra
