// SPDX-License-Identifier: Apache-2.0
#include "plugin/verbs/probe_codec.h"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace ibcni::verbs {

namespace {

constexpr std::string_view kMagic = "IBVP";
constexpr std::uint8_t kVersion = 1;
constexpr char kKindResult = 'R';
constexpr char kKindError = 'E';
constexpr std::size_t kHeaderSize = 4 + 1 + 1 + 4;

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { le(v, 2); }
  void u32(std::uint32_t v) { le(v, 4); }
  void u64(std::uint64_t v) { le(v, 8); }
  void i32(int v) { u32(static_cast<std::uint32_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  void bytes(const std::uint8_t* p, std::size_t n) { out_.append(reinterpret_cast<const char*>(p), n); }
  [[nodiscard]] std::string take() && { return std::move(out_); }

 private:
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
      out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
    }
  }
  std::string out_;
};

// Every read checks the remaining size; the first failure sticks (ok() false) and later reads
// return zeros, so the decoders can read straight through and check once.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  [[nodiscard]] bool atEnd() const noexcept { return ok_ && pos_ == in_.size(); }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - pos_; }
  void fail() noexcept { ok_ = false; }

  std::uint8_t u8() { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() { return le(8); }
  int i32() { return static_cast<int>(u32()); }
  bool boolean() {
    const std::uint8_t v = u8();
    if (v > 1) {
      fail();
    }
    return v == 1;
  }
  std::string str() {
    const std::uint32_t n = u32();
    if (!take(n)) {
      return {};
    }
    return std::string(in_.substr(pos_ - n, n));
  }
  void bytes(std::uint8_t* p, std::size_t n) {
    if (!take(n)) {
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      p[i] = static_cast<std::uint8_t>(in_[pos_ - n + i]);
    }
  }
  /// An element count, refused when even `minElementSize`-byte elements could not fit.
  std::uint32_t count(std::size_t minElementSize) {
    const std::uint32_t n = u32();
    if (ok_ && static_cast<std::uint64_t>(n) * minElementSize > remaining()) {
      fail();
      return 0;
    }
    return ok_ ? n : 0;
  }

 private:
  bool take(std::size_t n) {
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::uint64_t le(int n) {
    if (!take(static_cast<std::size_t>(n))) {
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in_[pos_ - static_cast<std::size_t>(n) +
                                                                    static_cast<std::size_t>(i)]))
           << (8 * i);
    }
    return v;
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

void writePort(Writer& w, const PortFacts& p) {
  w.str(p.device);
  w.u32(p.port);
  w.i32(p.state);
  w.i32(p.physState);
  w.u8(static_cast<std::uint8_t>(p.linkLayer));
  w.u16(p.lid);
  w.u16(p.smLid);
  w.u64(p.nodeGuid);
  w.u64(p.portGuid);
  w.u32(static_cast<std::uint32_t>(p.pkeys.size()));
  for (net::Pkey pkey : p.pkeys) {
    w.u16(pkey.wire());
  }
  w.u32(static_cast<std::uint32_t>(p.gids.size()));
  for (const Gid& gid : p.gids) {
    w.u32(gid.index);
    w.bytes(gid.raw.data(), gid.raw.size());
    w.str(gid.type);
  }
}

PortFacts readPort(Reader& r) {
  PortFacts p;
  p.device = r.str();
  p.port = r.u32();
  p.state = r.i32();
  p.physState = r.i32();
  const std::uint8_t linkLayer = r.u8();
  if (linkLayer > static_cast<std::uint8_t>(LinkLayer::kEthernet)) {
    r.fail();
  }
  p.linkLayer = static_cast<LinkLayer>(linkLayer);
  p.lid = r.u16();
  p.smLid = r.u16();
  p.nodeGuid = r.u64();
  p.portGuid = r.u64();
  const std::uint32_t npkeys = r.count(2);
  for (std::uint32_t i = 0; i < npkeys && r.ok(); ++i) {
    p.pkeys.push_back(net::Pkey::fromWire(r.u16()));
  }
  const std::uint32_t ngids = r.count(4 + 16 + 4);
  for (std::uint32_t i = 0; i < ngids && r.ok(); ++i) {
    Gid gid;
    gid.index = r.u32();
    r.bytes(gid.raw.data(), gid.raw.size());
    gid.type = r.str();
    p.gids.push_back(std::move(gid));
  }
  return p;
}

void writeResult(Writer& w, const ProbeResult& res) {
  w.boolean(res.available);
  w.str(res.unavailableReason);
  w.u32(static_cast<std::uint32_t>(res.devices.size()));
  for (const std::string& dev : res.devices) {
    w.str(dev);
  }
  w.boolean(res.opened);
  w.str(res.openError);
  w.boolean(res.port.has_value());
  if (res.port) {
    writePort(w, *res.port);
  }
  w.u8(!res.qpProbeOk ? 0 : (*res.qpProbeOk ? 2 : 1));
  w.str(res.qpProbeError);
}

ProbeResult readResult(Reader& r) {
  ProbeResult res;
  res.available = r.boolean();
  res.unavailableReason = r.str();
  const std::uint32_t ndevices = r.count(4);
  for (std::uint32_t i = 0; i < ndevices && r.ok(); ++i) {
    res.devices.push_back(r.str());
  }
  res.opened = r.boolean();
  res.openError = r.str();
  if (r.boolean()) {
    res.port = readPort(r);
  }
  switch (r.u8()) {
    case 0:
      break;
    case 1:
      res.qpProbeOk = false;
      break;
    case 2:
      res.qpProbeOk = true;
      break;
    default:
      r.fail();
  }
  res.qpProbeError = r.str();
  return res;
}

}  // namespace

std::string encodeProbeAnswer(const ProbeAnswer& answer) {
  Writer body;
  if (answer) {
    writeResult(body, *answer);
  } else {
    body.i32(answer.error().err);
    body.str(answer.error().op);
    body.str(answer.error().extAck);
  }
  std::string bodyBytes = std::move(body).take();
  Writer frame;
  for (char c : kMagic) {
    frame.u8(static_cast<std::uint8_t>(c));
  }
  frame.u8(kVersion);
  frame.u8(static_cast<std::uint8_t>(answer ? kKindResult : kKindError));
  frame.u32(static_cast<std::uint32_t>(bodyBytes.size()));
  std::string out = std::move(frame).take();
  out += bodyBytes;
  return out;
}

std::optional<ProbeAnswer> decodeProbeAnswer(std::string_view bytes) {
  if (bytes.size() < kHeaderSize || bytes.size() > kMaxProbeFrame || bytes.substr(0, 4) != kMagic) {
    return std::nullopt;
  }
  Reader r(bytes.substr(4));
  const std::uint8_t version = r.u8();
  const auto kind = static_cast<char>(r.u8());
  const std::uint32_t length = r.u32();
  if (!r.ok() || version != kVersion || length != r.remaining()) {
    return std::nullopt;
  }
  std::optional<ProbeAnswer> answer;
  if (kind == kKindResult) {
    answer = readResult(r);
  } else if (kind == kKindError) {
    os::SysError err;
    err.err = r.i32();
    err.op = r.str();
    err.extAck = r.str();
    answer = std::unexpected(std::move(err));
  } else {
    return std::nullopt;
  }
  if (!r.atEnd()) {
    return std::nullopt;
  }
  return answer;
}

}  // namespace ibcni::verbs
