// SPDX-License-Identifier: Apache-2.0
#include "hostile/hostile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <ostream>

namespace ibcni::hostile {

namespace {

std::string netState(const os::Netns& ns) {
  std::string out;
  for (const std::vector<std::string>& args : {std::vector<std::string>{"-o", "link", "show"},
                                               {"-o", "addr", "show"},
                                               {"route", "show", "table", "all"},
                                               {"-6", "route", "show", "table", "all"}}) {
    out += conformance::ip(ns, args);
  }
  return out;
}

std::string describeFile(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    return p.string() + " (absent)";
  }
  std::string out = p.string() + " mode " + std::to_string(st.st_mode) + " uid " + std::to_string(st.st_uid);
  // A directory is described by its entries (listed too): its mtime also moves when a failed ADD
  // writes its record ahead and removes it again, which leaves the store as it was.
  if (!S_ISDIR(st.st_mode)) {
    out += " size " + std::to_string(st.st_size) + " mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + " links " + std::to_string(st.st_nlink);
  }
  return out;
}

// The call-event ring (<stateDir>/events, plugin/state/call_event_ring.h): a bounded log of every
// invocation, which a refused or failed one appends to as well, by design. Not what an invocation
// leaves of itself on the node.
bool isCallEventRing(const fs::path& p) { return p.filename() == "events" && p.parent_path().filename() == "state"; }

void listTree(const fs::path& root, std::vector<std::string>& out) {
  out.push_back(describeFile(root));
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(root, ec))) {
    return;
  }
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      break;
    }
    if (isCallEventRing(it->path())) {
      continue;
    }
    out.push_back(describeFile(it->path()));
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const NodeState& s) {
  os << "host:\n" << s.host;
  for (const auto& p : s.pods) {
    os << "pod:\n" << p;
  }
  os << "files:\n";
  for (const auto& f : s.files) {
    os << "  " << f << "\n";
  }
  return os;
}

NodeState capture(const World& w, const std::vector<const TestNetns*>& pods, const std::vector<fs::path>& watched) {
  NodeState s;
  s.host = netState(w.host());
  for (const auto* pod : pods) {
    s.pods.push_back(netState(pod->netns()));
  }
  listTree(w.tmp(), s.files);
  for (const auto& p : watched) {
    s.files.push_back(describeFile(p));
  }
  std::sort(s.files.begin(), s.files.end());
  return s;
}

void prime(Scene& s) {
  s.pod = &s.w.pod();
  s.vf = s.w.vf();
  for (const std::string verb : {"ADD", "DEL"}) {
    Exec r = s.w.ibcni(World::env(verb, "prime", *s.pod), s.w.conf("1.1.0", s.vf, s.w.ipam()));
    ASSERT_EQ(r.status, 0) << r.describe();
    Exec i = s.w.ipamPlugin(World::env(verb, "prime", *s.pod), s.w.ipamConf("1.1.0"));
    ASSERT_EQ(i.status, 0) << i.describe();
  }
}

void expectRefused(const Exec& run, unsigned code, const std::vector<std::string>& words) {
  EXPECT_EQ(run.status, 1) << "expected error " << code << "\n" << run.describe();
  EXPECT_EQ(run.code(), code) << run.describe();
  const std::string msg = run.msg();
  EXPECT_FALSE(msg.empty()) << run.describe();
  EXPECT_LE(msg.size(), kMaxMsgBytes) << "msg is not bounded\n" << run.describe().substr(0, 4000);
  EXPECT_LE(run.out.size(), 2 * kMaxMsgBytes + 8192) << "the error object is not bounded";
  EXPECT_TRUE(std::none_of(msg.begin(), msg.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      << "msg carries a control character\n"
      << run.describe().substr(0, 4000);
  for (const auto& w : words) {
    EXPECT_NE(msg.find(w), std::string::npos) << "msg does not name \"" << w << "\"\n"
                                              << run.describe().substr(0, 4000);
  }
}

}  // namespace ibcni::hostile
