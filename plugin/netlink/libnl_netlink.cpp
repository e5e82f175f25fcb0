// SPDX-License-Identifier: Apache-2.0
// LibnlNetlink's lifetime and its socket cache. The operations are in libnl_link_ops.cpp and
// libnl_addr_route_ops.cpp, the socket and request machinery in libnl_socket.cpp, the
// translation of libnl's objects in libnl_parse.cpp.
#include "plugin/netlink/libnl_netlink.h"

#include <memory>

#include "plugin/netlink/libnl_socket.h"

namespace ibcni::nl {

LibnlNetlink::LibnlNetlink() : sockets_(std::make_unique<RtnlSockets>()) {}
LibnlNetlink::~LibnlNetlink() = default;
LibnlNetlink::LibnlNetlink(LibnlNetlink&&) noexcept = default;
LibnlNetlink& LibnlNetlink::operator=(LibnlNetlink&&) noexcept = default;

void LibnlNetlink::closeSockets() noexcept {
  if (sockets_) {
    sockets_->closeAll();
  }
}

}  // namespace ibcni::nl
