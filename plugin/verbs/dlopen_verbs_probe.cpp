// SPDX-License-Identifier: Apache-2.0
#include "plugin/verbs/dlopen_verbs_probe.h"
#include "ibcni/os/dl_symbol.h"

#include <dlfcn.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ibcni/os/child_process.h"
#include "ibcni/os/unique_fd.h"
#include "plugin/verbs/probe_codec.h"

namespace ibcni::verbs {

namespace {

constexpr std::uint32_t kProbeQkey = 0x11111111;

/// "strerror (ENAME)"
std::string errText(int err) {
  if (err == 0) {
    return "failed (no errno)";
  }
  return std::string(std::strerror(err)) + " (" + os::errnoName(err) + ")";
}

// ---------------------------------------------------------------------------------------------
// libibverbs through dlsym. The types come from <infiniband/verbs.h>; naming a function without
// calling it does not expand the function-like macros that wrap some of them (ibv_query_port,
// ibv_get_device_list), and decltype does not make the object reference the symbol.

/// The exported ibv_query_port takes the old struct _compat_ibv_port_attr; the header's inline
/// wrapper passes a struct ibv_port_attr (a superset with the same leading layout) to it, and so
/// do we.
using QueryPortFn = int (*)(ibv_context*, std::uint8_t, ibv_port_attr*);

struct Verbs {
  decltype(&::ibv_get_device_list) getDeviceList = nullptr;
  decltype(&::ibv_free_device_list) freeDeviceList = nullptr;
  decltype(&::ibv_get_device_name) getDeviceName = nullptr;
  decltype(&::ibv_get_device_guid) getDeviceGuid = nullptr;
  decltype(&::ibv_open_device) openDevice = nullptr;
  decltype(&::ibv_close_device) closeDevice = nullptr;
  QueryPortFn queryPort = nullptr;
  decltype(&::ibv_query_gid) queryGid = nullptr;
  decltype(&::ibv_query_pkey) queryPkey = nullptr;
  decltype(&::ibv_alloc_pd) allocPd = nullptr;
  decltype(&::ibv_dealloc_pd) deallocPd = nullptr;
  decltype(&::ibv_create_cq) createCq = nullptr;
  decltype(&::ibv_destroy_cq) destroyCq = nullptr;
  decltype(&::ibv_create_qp) createQp = nullptr;
  decltype(&::ibv_modify_qp) modifyQp = nullptr;
  decltype(&::ibv_destroy_qp) destroyQp = nullptr;
  // Optional (rdma-core >= 32): the whole GID table with types in one call.
  decltype(&::_ibv_query_gid_table) queryGidTable = nullptr;
  // Optional (rdma-core >= 32): one GID with its type.
  decltype(&::_ibv_query_gid_ex) queryGidEx = nullptr;
};

/// Loads `library` and resolves the functions the probe calls.
/// @return empty on success, else the reason (dlerror()'s text).
std::string loadVerbs(const std::string& library, Verbs& v) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return why != nullptr ? why : "dlopen " + library + ": failed";
  }
  std::string missing;
  const bool ok = os::resolveSymbols(
      lib, missing, os::Symbol{"ibv_get_device_list", v.getDeviceList},
      os::Symbol{"ibv_free_device_list", v.freeDeviceList}, os::Symbol{"ibv_get_device_name", v.getDeviceName},
      os::Symbol{"ibv_get_device_guid", v.getDeviceGuid}, os::Symbol{"ibv_open_device", v.openDevice},
      os::Symbol{"ibv_close_device", v.closeDevice}, os::Symbol{"ibv_query_port", v.queryPort},
      os::Symbol{"ibv_query_gid", v.queryGid}, os::Symbol{"ibv_query_pkey", v.queryPkey},
      os::Symbol{"ibv_alloc_pd", v.allocPd}, os::Symbol{"ibv_dealloc_pd", v.deallocPd},
      os::Symbol{"ibv_create_cq", v.createCq}, os::Symbol{"ibv_destroy_cq", v.destroyCq},
      os::Symbol{"ibv_create_qp", v.createQp}, os::Symbol{"ibv_modify_qp", v.modifyQp},
      os::Symbol{"ibv_destroy_qp", v.destroyQp});
  if (!ok) {
    return missing;
  }
  std::string ignored;
  (void)os::resolveSymbol(lib, "_ibv_query_gid_table", v.queryGidTable, ignored);
  (void)os::resolveSymbol(lib, "_ibv_query_gid_ex", v.queryGidEx, ignored);
  return {};
}

// ---------------------------------------------------------------------------------------------
// The child's work.

std::string gidTypeName(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
    case IBV_GID_TYPE_ROCE_V1:
      return "IB/RoCE v1";  // the kernel writes both this way in gid_attrs/types
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return {};
  }
}

/// gid_attrs/types/<index> of the device's port, without the newline; empty when unreadable
/// (the kernel refuses to read the type of an empty slot).
std::string sysfsGidType(const std::string& device, std::uint32_t port, std::uint32_t index) {
  std::ifstream in("/sys/class/infiniband/" + device + "/ports/" + std::to_string(port) +
                   "/gid_attrs/types/" + std::to_string(index));
  std::string line;
  if (!in || !std::getline(in, line)) {
    return {};
  }
  return line;
}

bool isZero(const std::array<std::uint8_t, 16>& raw) {
  return std::all_of(raw.begin(), raw.end(), [](std::uint8_t b) { return b == 0; });
}

void readGids(const Verbs& v, ibv_context* ctx, const ibv_port_attr& attr, PortFacts& facts) {
  const auto port = static_cast<std::uint8_t>(facts.port);
  const auto tableLen = static_cast<std::size_t>(std::max(attr.gid_tbl_len, 0));
  if (v.queryGidTable != nullptr && tableLen > 0) {
    std::vector<ibv_gid_entry> entries(tableLen);
    const ssize_t n = v.queryGidTable(ctx, entries.data(), entries.size(), 0, sizeof(ibv_gid_entry));
    if (n >= 0) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
        const ibv_gid_entry& e = entries[i];
        if (e.port_num != facts.port) {
          continue;
        }
        Gid gid;
        gid.index = e.gid_index;
        std::memcpy(gid.raw.data(), e.gid.raw, gid.raw.size());
        if (isZero(gid.raw)) {
          continue;
        }
        gid.type = gidTypeName(e.gid_type);
        facts.gids.push_back(std::move(gid));
      }
      std::sort(facts.gids.begin(), facts.gids.end(),
                [](const Gid& a, const Gid& b) { return a.index < b.index; });
      return;
    }
    // Fall through to the per-index queries.
  }
  for (std::size_t i = 0; i < tableLen; ++i) {
    ibv_gid raw{};
    if (v.queryGid(ctx, port, static_cast<int>(i), &raw) != 0) {
      continue;
    }
    Gid gid;
    gid.index = static_cast<std::uint32_t>(i);
    std::memcpy(gid.raw.data(), raw.raw, gid.raw.size());
    if (isZero(gid.raw)) {
      continue;
    }
    ibv_gid_entry entry{};
    if (v.queryGidEx != nullptr &&
        v.queryGidEx(ctx, facts.port, gid.index, &entry, 0, sizeof(ibv_gid_entry)) == 0) {
      gid.type = gidTypeName(entry.gid_type);
    } else {
      gid.type = sysfsGidType(facts.device, facts.port, gid.index);
    }
    facts.gids.push_back(std::move(gid));
  }
}

PortFacts readPort(const Verbs& v, ibv_device* dev, ibv_context* ctx, const ibv_port_attr& attr,
                   std::uint32_t portNum) {
  PortFacts facts;
  facts.device = v.getDeviceName(dev);
  facts.port = portNum;
  facts.state = static_cast<int>(attr.state);
  facts.physState = static_cast<int>(attr.phys_state);
  switch (attr.link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      facts.linkLayer = LinkLayer::kInfiniband;
      break;
    case IBV_LINK_LAYER_ETHERNET:
      facts.linkLayer = LinkLayer::kEthernet;
      break;
    default:
      facts.linkLayer = LinkLayer::kUnspecified;
  }
  facts.lid = attr.lid;
  facts.smLid = attr.sm_lid;
  facts.nodeGuid = be64toh(v.getDeviceGuid(dev));
  const auto port = static_cast<std::uint8_t>(portNum);
  for (int i = 0; i < attr.pkey_tbl_len; ++i) {
    __be16 pkey = 0;
    if (v.queryPkey(ctx, port, i, &pkey) == 0 && pkey != 0) {
      facts.pkeys.push_back(net::Pkey::fromWire(be16toh(pkey)));
    }
  }
  readGids(v, ctx, attr, facts);
  if (facts.linkLayer == LinkLayer::kInfiniband) {
    ibv_gid gid0{};
    if (v.queryGid(ctx, port, 0, &gid0) == 0) {
      std::uint64_t ifaceId = 0;
      std::memcpy(&ifaceId, gid0.raw + 8, sizeof ifaceId);
      facts.portGuid = be64toh(ifaceId);
    }
  }
  return facts;
}

/// PD, CQ, UD QP to RTS. @return empty on success, else "<step>: <strerror> (<ENAME>)".
std::string qpProbe(const Verbs& v, ibv_context* ctx, std::uint8_t port) {
  std::string error;
  ibv_pd* pd = v.allocPd(ctx);
  if (pd == nullptr) {
    return "ibv_alloc_pd: " + errText(errno);
  }
  ibv_cq* cq = v.createCq(ctx, 1, nullptr, nullptr, 0);
  if (cq == nullptr) {
    error = "ibv_create_cq: " + errText(errno);
    v.deallocPd(pd);
    return error;
  }
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.cap.max_send_wr = 1;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.qp_type = IBV_QPT_UD;
  ibv_qp* qp = v.createQp(pd, &init);
  if (qp == nullptr) {
    error = "ibv_create_qp UD: " + errText(errno);
  } else {
    auto modify = [&](const char* step, ibv_qp_attr attr, int mask) {
      if (!error.empty()) {
        return;
      }
      errno = 0;
      const int rc = v.modifyQp(qp, &attr, mask);
      if (rc != 0) {
        error = std::string("ibv_modify_qp ") + step + ": " + errText(rc > 0 ? rc : errno);
      }
    };
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = port;
    attr.qkey = kProbeQkey;
    modify("INIT", attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    modify("RTR", attr, IBV_QP_STATE);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 0;
    modify("RTS", attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    v.destroyQp(qp);
  }
  v.destroyCq(cq);
  v.deallocPd(pd);
  return error;
}

/// Everything the child does once inside the namespace.
ProbeResult inspect(const std::string& library, const ProbeRequest& req) {
  ProbeResult res;
  Verbs v;
  res.unavailableReason = loadVerbs(library, v);
  if (!res.unavailableReason.empty()) {
    res.available = false;
    return res;
  }
  int count = 0;
  errno = 0;
  ibv_device** list = v.getDeviceList(&count);
  if (list == nullptr) {
    res.openError = "ibv_get_device_list: " + errText(errno);
    return res;
  }
  ibv_device* chosen = nullptr;
  for (int i = 0; i < count && list[i] != nullptr; ++i) {
    res.devices.emplace_back(v.getDeviceName(list[i]));
    if (req.device.empty() ? count == 1 : res.devices.back() == req.device) {
      chosen = list[i];
    }
  }
  if (chosen != nullptr) {
    errno = 0;
    ibv_context* ctx = v.openDevice(chosen);
    if (ctx == nullptr) {
      res.openError = errText(errno);
    } else {
      res.opened = true;
      ibv_port_attr attr{};
      int rc = EINVAL;
      if (req.port >= 1 && req.port <= 255) {
        errno = 0;
        rc = v.queryPort(ctx, static_cast<std::uint8_t>(req.port), &attr);
        rc = rc > 0 ? rc : (rc < 0 ? (errno != 0 ? errno : EINVAL) : 0);
      }
      if (rc != 0) {
        res.openError = "ibv_query_port " + std::to_string(req.port) + ": " + errText(rc);
      } else {
        res.port = readPort(v, chosen, ctx, attr, req.port);
        if (req.qpProbe) {
          res.qpProbeError = qpProbe(v, ctx, static_cast<std::uint8_t>(req.port));
          res.qpProbeOk = res.qpProbeError.empty();
        }
      }
      v.closeDevice(ctx);
    }
  }
  v.freeDeviceList(list);
  return res;
}

/// Writes all of `data`; errors are ignored (the parent sees a short answer).
void writeAll(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

/// The forked child: never returns (no destructor of the parent's objects runs here).
[[noreturn]] void runChild(pid_t parent, int nsFd, int outFd, const std::string& library,
                           const ProbeRequest& req) {
  if (!os::dieWithParent(parent)) {
    ::_exit(3);  // the parent died before prctl
  }
  const int devNull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devNull >= 0) {
    ::dup2(devNull, STDOUT_FILENO);
    ::close(devNull);
  }
  try {
    ProbeAnswer answer;
    if (::setns(nsFd, CLONE_NEWNET) != 0) {
      answer = os::sysFail(errno, "setns " + req.netnsPath);
    } else {
      ::close(nsFd);
      answer = inspect(library, req);
    }
    writeAll(outFd, encodeProbeAnswer(answer));
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);
}

}  // namespace

os::SysResult<ProbeResult> DlopenVerbsProbe::probe(const ProbeRequest& request) {
  const std::string what = "verbs probe of device '" + request.device + "' port " +
                           std::to_string(request.port) + " in " + request.netnsPath;
  auto ns = os::UniqueFd::open(request.netnsPath, O_RDONLY);
  if (!ns) {
    return std::unexpected(ns.error());
  }
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return os::sysFail(errno, "pipe2 for " + what);
  }
  os::UniqueFd readEnd(fds[0]);
  os::UniqueFd writeEnd(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + request.timeout;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return os::sysFail(errno, "fork for " + what);
  }
  if (pid == 0) {
    ::close(readEnd.get());
    runChild(parent, ns.value().get(), writeEnd.get(), library_, request);
  }
  writeEnd.reset();
  ns.value().reset();

  auto answer = os::readChildAnswer(readEnd.get(), deadline, kMaxProbeFrame, what);
  if (!answer) {
    os::killAndReapChild(pid);
    if (answer.error().err == ETIMEDOUT) {
      return os::sysFail(ETIMEDOUT, what + ": no answer within " + std::to_string(request.timeout.count()) +
                                        " ms (child killed)");
    }
    return std::unexpected(answer.error());
  }
  const int status = os::reapChild(pid);
  auto decoded = decodeProbeAnswer(*answer);
  if (!decoded) {
    return os::sysFail(EPROTO, what + ": child " + os::describeWaitStatus(status) + " without a well-formed answer (" +
                                   std::to_string(answer->size()) + " bytes)");
  }
  return std::move(*decoded);
}

}  // namespace ibcni::verbs
