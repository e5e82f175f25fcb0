// SPDX-License-Identifier: Apache-2.0
#include "schedule.h"

#include <cstdlib>
#include <sstream>

namespace ibcni::chaos {

bool Step::has(const std::string& key) const {
  for (const auto& [k, v] : args) {
    if (k == key) {
      return true;
    }
  }
  return false;
}

std::string Step::arg(const std::string& key) const {
  for (const auto& [k, v] : args) {
    if (k == key) {
      return v;
    }
  }
  return {};
}

int Step::intArg(const std::string& key, int otherwise) const {
  const std::string v = arg(key);
  if (v.empty()) {
    return otherwise;
  }
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  return end != nullptr && *end == '\0' ? static_cast<int>(n) : otherwise;
}

Step& Step::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : args) {
    if (k == key) {
      v = value;
      return *this;
    }
  }
  args.emplace_back(key, value);
  return *this;
}

std::string Step::text() const {
  std::string s = op;
  for (const auto& [k, v] : args) {
    s += " " + k + "=" + v;
  }
  return s;
}

std::optional<Step> Step::parse(const std::string& line) {
  std::istringstream in(line.substr(0, line.find('#')));
  Step s;
  if (!(in >> s.op)) {
    return std::nullopt;
  }
  for (std::string word; in >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      return std::nullopt;
    }
    s.args.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  return s;
}

std::string stepLine(std::size_t number, const Step& step, bool withOutcome) {
  std::string s = std::to_string(number) + " " + step.text();
  if (withOutcome && !step.outcome.empty()) {
    if (s.size() < 48) {
      s.append(48 - s.size(), ' ');
    }
    s += "  # " + step.outcome;
  }
  return s;
}

std::string Schedule::text(bool withOutcomes) const {
  std::ostringstream out;
  const auto& p = params;
  out << "# ibcni_chaos schedule (replay: ibcni_chaos --plugin PATH --replay FILE)\n"
      << "backend " << p.backend << "\n"
      << "compat " << (p.baseline ? "baseline" : "new") << "\n"
      << "plant " << (p.plant.empty() ? "none" : p.plant) << "\n"
      << "profile " << p.profile << "\n"
      << "seed " << p.seed << "\n"
      << "nodes " << p.nodes << "\n"
      << "networks " << p.networks << "\n"
      << "guidNetworks " << (p.guids ? 1 : 0) << "\n"
      << "leaseDurationSeconds " << p.leaseSeconds << "\n"
      << "releaseAfterSeconds " << p.releaseAfterSeconds << "\n"
      << "minBlocksPerNode " << p.minBlocksPerNode << "\n"
      << "timeoutMs " << p.timeoutMs << "\n"
      << "steps\n";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    out << stepLine(i + 1, steps[i], withOutcomes) << "\n";
  }
  return out.str();
}

namespace {

// Applies one "key value" header line to `p`; false when the key is unknown.
bool readParam(ScheduleParams& p, const std::string& key, const std::string& value) {
  const auto num = [&] { return std::atoll(value.c_str()); };
  if (key == "backend") {
    p.backend = value;
  } else if (key == "compat") {
    p.baseline = value == "baseline";
  } else if (key == "plant") {
    p.plant = value == "none" ? "" : value;
  } else if (key == "profile") {
    p.profile = value;
  } else if (key == "seed") {
    p.seed = std::strtoull(value.c_str(), nullptr, 10);
  } else if (key == "nodes") {
    p.nodes = static_cast<int>(num());
  } else if (key == "networks") {
    p.networks = static_cast<int>(num());
  } else if (key == "guidNetworks") {
    p.guids = num() != 0;
  } else if (key == "leaseDurationSeconds") {
    p.leaseSeconds = static_cast<int>(num());
  } else if (key == "releaseAfterSeconds") {
    p.releaseAfterSeconds = static_cast<int>(num());
  } else if (key == "minBlocksPerNode") {
    p.minBlocksPerNode = static_cast<int>(num());
  } else if (key == "timeoutMs") {
    p.timeoutMs = static_cast<int>(num());
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::expected<Schedule, std::string> Schedule::parse(const std::string& text) {
  Schedule s;
  std::istringstream in(text);
  bool inSteps = false;
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    const std::string body = line.substr(0, line.find('#'));
    std::istringstream words(body);
    std::string first;
    if (!(words >> first)) {
      continue;
    }
    if (!inSteps) {
      if (first == "steps") {
        inSteps = true;
        continue;
      }
      std::string value;
      words >> value;
      if (!readParam(s.params, first, value)) {
        return std::unexpected("line " + std::to_string(lineNo) + ": unknown parameter \"" + first + "\"");
      }
      continue;
    }
    // "12 add node=3 ...": the number is for people (and may be left out); the order of the lines
    // is the order of the steps.
    const bool numbered = first.find_first_not_of("0123456789") == std::string::npos;
    const std::string rest = numbered ? body.substr(body.find(first) + first.size()) : body;
    auto step = Step::parse(rest);
    if (!step) {
      return std::unexpected("line " + std::to_string(lineNo) + ": not a step: " + line);
    }
    s.steps.push_back(std::move(*step));
  }
  if (!inSteps) {
    return std::unexpected("no \"steps\" line: not an ibcni_chaos schedule");
  }
  return s;
}

}  // namespace ibcni::chaos
