// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's store files as ibcni-ipam reads them from disk (ipam/store/file_store.cpp; the
// formats in ipam/store/record_codec.cpp and ipam/store/free_index.cpp): the attachment record and the
// per-range-set index, both framed with length and CRC-32. The first byte picks the file, the
// rest is its content:
//   'r'  attachments/<containerID>:<ifname>  -> FileStore::parseRecord, then find(), list(), verify()
//   'i'  index of range set 0 (two IPv4 ranges with bitmaps)
//   'j'  index of range set 1 (an IPv6 /64: no bitmap, probed)
//        -> FileStore::parseIndex, then firstFree(), lastReserved(), countInUse(), verify()
//   'R', 'I', 'J'  the same with the rest as the body only: the header line with its length and
//        CRC-32 is made here, so that mutations get past the checksum to the body's parser
//   else the whole input through both parsers only.
// The files go to a store directory under $TMPDIR made once per process; the calls run under the
// store's lock as ibcni-ipam makes them, and nothing is written back (no commit()).

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "ipam/store/file_store.h"
#include "fuzz_util.h"
#include "ibcni/net/ip.h"

namespace {

std::string hex32(std::uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

using ibcni::fuzz::require;
using ibcni::ipam::AttachmentKey;
using ibcni::ipam::FileStore;
using ibcni::net::IpAddress;

IpAddress ip(const char* text) { return *IpAddress::parse(text); }

// The store's frame: "ibcni-ipam <kind> 1 <body length> <crc32 hex>\n" + body, CRC-32 as zlib's.
std::string frame(const char* kind, const std::string& body) {
  std::uint32_t c = 0xffffffffu;
  for (unsigned char ch : body) {
    c ^= ch;
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
  }
  return "ibcni-ipam " + std::string(kind) + " 1 " + std::to_string(body.size()) + " " + hex32(c ^ 0xffffffffu) + "\n" +
         body;
}

const AttachmentKey kKey{"c0ffee", "net1"};

struct Fixture {
  std::string dir;
  std::optional<FileStore> store;

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ibcni-ipam-fuzz.XXXXXX";
    require(::mkdtemp(tmpl.data()) != nullptr, "cannot create the store directory", tmpl);
    dir = tmpl;
    FileStore::Options o;
    o.dir = dir;
    o.rangeSets = {
        {{ip("10.0.0.1"), ip("10.0.0.100")}, {ip("10.0.1.0"), ip("10.0.1.63")}},
        {{ip("fd00::1"), ip("fd00::ffff:ffff:ffff:ffff")}},
    };
    store.emplace(std::move(o));
    // The lock creates the layout; one claim, held by kKey, gives verify() and firstFree()
    // something to compare the files with.
    require(store->lock().has_value(), "cannot lock the store", dir);
    store->unlock();
    require(::symlink("../attachments/c0ffee:net1", (dir + "/ips/10.0.0.5").c_str()) == 0, "cannot create a claim");
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void writeFile(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  require(fd >= 0, "cannot write", path);
  for (std::size_t off = 0; off < content.size();) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    require(n > 0, "cannot write", path);
    off += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

void throughStoreRecord(FileStore& store, const std::string& text) {
  const std::string path = store.recordPath(kKey);
  writeFile(path, text);
  require(store.lock().has_value(), "cannot lock the store");
  auto found = store.find(kKey);
  if (found && *found) {
    require((*found)->key == kKey, "find() returned a record of another attachment");
  }
  (void)store.list();
  (void)store.verify();
  store.unlock();
  ::unlink(path.c_str());
}

void throughStoreIndex(FileStore& store, std::size_t set, const std::string& text) {
  const std::string path = store.indexPath(set);
  writeFile(path, text);
  require(store.lock().has_value(), "cannot lock the store");
  if (set == 0) {
    for (std::size_t range : {0u, 1u}) {
      auto free = store.firstFree(set, range, ip("10.0.0.0"), ip("10.0.1.255"));
      if (free && *free) {
        require(**free != ip("10.0.0.5"), "firstFree() returned a claimed address");
      }
    }
  } else {
    (void)store.firstFree(set, 0, ip("fd00::"), ip("fd00::10"));
  }
  (void)store.lastReserved(set);
  (void)store.countInUse(set);
  (void)store.verify();
  store.unlock();
  ::unlink(path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FileStore& store = *fixture().store;
  if (size == 0) {
    return 0;
  }
  char kind = static_cast<char>(data[0]);
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (kind == 'R' || kind == 'I' || kind == 'J') {
    body = frame(kind == 'R' ? "attachment" : "index", body);
    kind = static_cast<char>(kind - 'A' + 'a');
  }
  switch (kind) {
    case 'r': {
      auto rec = FileStore::parseRecord(body, kKey, "record");
      if (rec) {
        require(rec->key == kKey, "parseRecord() accepted a record of another attachment");
      }
      throughStoreRecord(store, body);
      break;
    }
    case 'i':
    case 'j': {
      const std::size_t set = kind == 'i' ? 0 : 1;
      auto cursor = store.parseIndex(set, body, "index");
      if (cursor && *cursor) {
        require((*cursor)->isV4() == (set == 0), "parseIndex() accepted a cursor of the other family");
      }
      throughStoreIndex(store, set, body);
      break;
    }
    default: {
      const std::string all(reinterpret_cast<const char*>(data), size);
      (void)FileStore::parseRecord(all, kKey, "record");
      (void)store.parseIndex(0, all, "index");
      (void)store.parseIndex(1, all, "index");
      break;
    }
  }
  return 0;
}
