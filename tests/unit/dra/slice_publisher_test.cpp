// SPDX-License-Identifier: Apache-2.0
// SlicePublisher over an in-memory SliceApi that keeps resourceVersions and uids as the API server
// does: what it writes, when it writes nothing, generations, stale slices, conflicts.
#include "plugin/dra/slice_publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "unit/dra/dra_devices.h"

namespace ibcni::dra {
namespace {

using nlohmann::json;

/// ResourceSlices by name, with the server's bookkeeping (uid, resourceVersion) and a record of
/// the calls made.
class MemorySliceApi final : public SliceApi {
 public:
  ApiResult<std::vector<json>> list(const std::string& driver, const std::string& nodeName) override {
    calls.push_back("list");
    if (failNext) {
      failNext = false;
      return std::unexpected(ApiError{ApiError::Kind::kOther, "list: 503"});
    }
    std::vector<json> out;
    for (const auto& [name, s] : slices) {
      if (s["spec"]["driver"] == driver && s["spec"]["nodeName"] == nodeName) {
        out.push_back(s);
      }
    }
    return out;
  }
  ApiResult<void> create(const json& slice) override {
    const std::string name = slice["metadata"]["name"];
    calls.push_back("create " + name);
    if (slices.contains(name)) {
      return std::unexpected(ApiError{ApiError::Kind::kConflict, "create: 409"});
    }
    store(slice, "uid-" + std::to_string(++uids));
    return {};
  }
  ApiResult<void> update(const json& slice) override {
    const std::string name = slice["metadata"]["name"];
    calls.push_back("update " + name);
    auto it = slices.find(name);
    if (it == slices.end() || it->second["metadata"]["resourceVersion"] != slice["metadata"]["resourceVersion"]) {
      return std::unexpected(ApiError{ApiError::Kind::kConflict, "update: 409"});
    }
    store(slice, it->second["metadata"]["uid"]);
    return {};
  }
  ApiResult<void> remove(const std::string& name, const std::string& uid) override {
    calls.push_back("delete " + name);
    auto it = slices.find(name);
    if (it != slices.end() && it->second["metadata"]["uid"] == uid) {
      slices.erase(it);
    }
    return {};
  }
  /// Someone else's write: a new resourceVersion.
  void touch(const std::string& name) { slices[name]["metadata"]["resourceVersion"] = std::to_string(++version); }

  std::map<std::string, json> slices;
  std::vector<std::string> calls;
  bool failNext = false;

 private:
  void store(json slice, const std::string& uid) {
    slice["metadata"]["uid"] = uid;
    slice["metadata"]["resourceVersion"] = std::to_string(++version);
    // The server adds to what it is sent (a taint's timeAdded): not a change of the driver's.
    for (auto& d : slice["spec"]["devices"]) {
      if (d.contains("taints")) {
        for (auto& t : d["taints"]) {
          t["timeAdded"] = "2026-12-02T00:00:00Z";
        }
      }
    }
    const std::string name = slice["metadata"]["name"];
    slices[name] = std::move(slice);
  }
  int version = 0;
  int uids = 0;
};

class SlicePublisherTest : public ::testing::Test {
 protected:
  SlicePublisherTest() {
    options_.nodeName = "node-a";
    // Another node's slice and another driver's: never touched.
    api_.slices["node-b-ibcni-io-0"] = buildSlices(vfs(1), [] {
      SliceOptions o;
      o.nodeName = "node-b";
      return o;
    }())[0];
    json other = buildSlices(vfs(1), options_)[0];
    other["metadata"]["name"] = "node-a-gpu-0";
    other["spec"]["driver"] = "gpu.example.com";
    api_.slices["node-a-gpu-0"] = other;
  }

  ApiResult<PublishReport> publish(const std::vector<IbDevice>& devices) {
    api_.calls.clear();
    return SlicePublisher(api_, options_).publish(devices);
  }

  std::size_t devicesOnServer() {
    std::size_t n = 0;
    for (const auto& [name, s] : api_.slices) {
      if (s["spec"]["nodeName"] == "node-a" && s["spec"]["driver"] == "ibcni.io") {
        n += s["spec"]["devices"].size();
        EXPECT_EQ(s["spec"]["pool"]["generation"], generation_) << name;
      }
    }
    return n;
  }

  MemorySliceApi api_;
  SliceOptions options_;
  std::int64_t generation_ = 1;
};

TEST_F(SlicePublisherTest, TheFirstPublishCreatesAtGenerationOne) {
  auto r = publish(vfs(3));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->generation, 1);
  EXPECT_EQ(r->created, 1U);
  EXPECT_THAT(api_.calls, ::testing::ElementsAre("list", "create node-a-ibcni-io-0"));
  EXPECT_EQ(devicesOnServer(), 3U);
}

TEST_F(SlicePublisherTest, NothingChangedWritesNothingEvenWhereTheServerAddedFields) {
  auto devices = vfs(3);
  devices[1].portState = "DOWN";  // tainted: the server stamps timeAdded on the taint
  ASSERT_TRUE(publish(devices));
  auto again = publish(devices);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(again->changed());
  EXPECT_EQ(again->generation, 1);
  EXPECT_THAT(api_.calls, ::testing::ElementsAre("list"));
}

TEST_F(SlicePublisherTest, AChangeIsWrittenAtTheNextGeneration) {
  ASSERT_TRUE(publish(vfs(3)));
  auto devices = vfs(3);
  devices[2].portState = "DOWN";
  auto r = publish(devices);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->generation, 2);
  EXPECT_EQ(r->updated, 1U);
  generation_ = 2;
  EXPECT_EQ(devicesOnServer(), 3U);
  EXPECT_TRUE(api_.slices["node-a-ibcni-io-0"]["spec"]["devices"][2].contains("taints"));
}

TEST_F(SlicePublisherTest, FewerDevicesDeleteTheSlicesNoLongerNeededAfterWritingTheRest) {
  ASSERT_TRUE(publish(vfs(300)));  // 3 slices
  auto r = publish(vfs(100));     // 1 slice
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->updated, 1U);
  EXPECT_EQ(r->deleted, 2U);
  EXPECT_THAT(api_.calls, ::testing::ElementsAre("list", "update node-a-ibcni-io-0", "delete node-a-ibcni-io-1",
                                                 "delete node-a-ibcni-io-2"));
  generation_ = 2;
  EXPECT_EQ(devicesOnServer(), 100U);
  EXPECT_TRUE(api_.slices.contains("node-b-ibcni-io-0"));
  EXPECT_TRUE(api_.slices.contains("node-a-gpu-0"));
}

TEST_F(SlicePublisherTest, SlicesWipedByTheKubeletAreWrittenAgainAboveNoGeneration) {
  ASSERT_TRUE(publish(vfs(2)));
  std::erase_if(api_.slices, [](const auto& kv) { return kv.first.starts_with("node-a-ibcni"); });
  auto r = publish(vfs(2));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->created, 1U);
  EXPECT_EQ(devicesOnServer(), 2U);
}

TEST_F(SlicePublisherTest, ASliceOfAnotherNameIsStaleAndAGenerationAboveItIsUsed) {
  json old = buildSlices(vfs(1), options_)[0];
  old["metadata"]["name"] = "node-a-ibcni.io-x7k2p";  // as a generateName'd slice of another version
  old["metadata"]["uid"] = "old";
  old["spec"]["pool"]["generation"] = 41;
  api_.slices[old["metadata"]["name"]] = old;
  auto r = publish(vfs(1));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->generation, 42);
  EXPECT_EQ(r->created, 1U);
  EXPECT_EQ(r->deleted, 1U);
  generation_ = 42;
  EXPECT_EQ(devicesOnServer(), 1U);
}

TEST_F(SlicePublisherTest, AConflictEndsThePassAndTheNextOneSucceeds) {
  ASSERT_TRUE(publish(vfs(2)));
  auto changed = vfs(2);
  changed[0].portState = "INIT";
  // Someone writes between our list and our update: fake it by listing, touching, then publishing
  // with the stale view, which is what SlicePublisher does when the write lands in between.
  class Racing final : public SliceApi {
   public:
    explicit Racing(MemorySliceApi& api) : api_(api) {}
    ApiResult<std::vector<json>> list(const std::string& d, const std::string& n) override {
      auto r = api_.list(d, n);
      api_.touch("node-a-ibcni-io-0");
      return r;
    }
    ApiResult<void> create(const json& s) override { return api_.create(s); }
    ApiResult<void> update(const json& s) override { return api_.update(s); }
    ApiResult<void> remove(const std::string& n, const std::string& u) override { return api_.remove(n, u); }

   private:
    MemorySliceApi& api_;
  } racing(api_);
  auto lost = SlicePublisher(racing, options_).publish(changed);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().kind, ApiError::Kind::kConflict);
  auto next = publish(changed);
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(next->updated, 1U);
}

TEST_F(SlicePublisherTest, AFailedListWritesNothing) {
  api_.failNext = true;
  auto r = publish(vfs(2));
  ASSERT_FALSE(r);
  EXPECT_THAT(api_.calls, ::testing::ElementsAre("list"));
}

}  // namespace
}  // namespace ibcni::dra
