// SPDX-License-Identifier: Apache-2.0
// rdma_cm_resolve SRC DST: what RDMA CM makes of a connection from SRC to DST (IPv4) in the calling
// process's network namespace: rdma_resolve_addr and rdma_resolve_route on a synchronous CM ID,
// then the RDMA device the ID was bound to. Prints "device NAME" and exits 0, or says which step
// failed and exits 1. multi_rail_vm.sh runs it per rail in a pod: the device is the one whose
// netdev the pod's routing chose for SRC (and that netdev resolved DST's neighbour).
//
// rdma-core's librdmacm and libibverbs are loaded with dlopen (the run-time libraries are on the
// lab's machine, their headers need not be): an rdma_cm_id starts with its ibv_context, which starts
// with its ibv_device (rdma_cma.h, verbs.h), and that is all that is read of them.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

constexpr int kRdmaPsTcp = 0x0106;  // RDMA_PS_TCP
constexpr int kTimeoutMs = 5000;

struct CmId {
  void* verbs;  // struct ibv_context*, whose first member is its struct ibv_device*
};

using CreateId = int (*)(void* channel, CmId** id, void* context, int ps);
using ResolveAddr = int (*)(CmId* id, sockaddr* src, sockaddr* dst, int timeoutMs);
using ResolveRoute = int (*)(CmId* id, int timeoutMs);
using DestroyId = int (*)(CmId* id);
using DeviceName = const char* (*)(void* device);

bool parse(const char* text, sockaddr_in& out) {
  std::memset(&out, 0, sizeof out);
  out.sin_family = AF_INET;
  return ::inet_pton(AF_INET, text, &out.sin_addr) == 1;
}

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(::dlsym(lib, name));
}

}  // namespace

int main(int argc, char** argv) {
  sockaddr_in src{};
  sockaddr_in dst{};
  if (argc != 3 || !parse(argv[1], src) || !parse(argv[2], dst)) {
    std::fprintf(stderr, "usage: %s SRC_IPV4 DST_IPV4\n", argv[0]);
    return 2;
  }
  void* cm = ::dlopen("librdmacm.so.1", RTLD_NOW);
  void* verbs = ::dlopen("libibverbs.so.1", RTLD_NOW);
  if (cm == nullptr || verbs == nullptr) {
    std::printf("cannot load librdmacm.so.1 or libibverbs.so.1: %s\n", ::dlerror());
    return 1;
  }
  auto createId = symbol<CreateId>(cm, "rdma_create_id");
  auto resolveAddr = symbol<ResolveAddr>(cm, "rdma_resolve_addr");
  auto resolveRoute = symbol<ResolveRoute>(cm, "rdma_resolve_route");
  auto destroyId = symbol<DestroyId>(cm, "rdma_destroy_id");
  auto deviceName = symbol<DeviceName>(verbs, "ibv_get_device_name");
  if (!createId || !resolveAddr || !resolveRoute || !destroyId || !deviceName) {
    std::printf("librdmacm or libibverbs lacks a function this probe calls\n");
    return 1;
  }
  CmId* id = nullptr;
  if (createId(nullptr, &id, nullptr, kRdmaPsTcp) != 0) {  // no event channel: synchronous
    std::printf("rdma_create_id: %s\n", std::strerror(errno));
    return 1;
  }
  int rc = 1;
  if (resolveAddr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), kTimeoutMs) != 0) {
    std::printf("rdma_resolve_addr %s -> %s: %s\n", argv[1], argv[2], std::strerror(errno));
  } else if (resolveRoute(id, kTimeoutMs) != 0) {
    std::printf("rdma_resolve_route %s -> %s: %s\n", argv[1], argv[2], std::strerror(errno));
  } else if (id->verbs == nullptr) {
    std::printf("the CM ID is bound to no RDMA device\n");
  } else {
    std::printf("device %s\n", deviceName(*static_cast<void**>(id->verbs)));
    rc = 0;
  }
  destroyId(id);
  return rc;
}
