// SPDX-License-Identifier: Apache-2.0
#include "plugin/cli/command_line.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "ibcni/cni/error.h"
#include "lib/version/version.h"

namespace ibcni::plugin {

namespace {

constexpr Flag kHelpFlag{"-h, --help", "", "print this help"};

bool isHelpFlag(std::string_view arg) { return arg == "--help" || arg == "-h"; }

const Flag* findFlag(std::span<const Flag> flags, std::string_view name) {
  const auto it = std::find_if(flags.begin(), flags.end(), [name](const Flag& f) { return f.name == name; });
  return it != flags.end() ? &*it : nullptr;
}

std::unexpected<UsageProblem> problem(std::string what) { return std::unexpected(UsageProblem{std::move(what)}); }

// Takes the flag args[i] (and its value, i advanced past it) into `line`.
std::optional<UsageProblem> takeFlag(std::span<const Flag> flags, std::span<char* const> args, std::size_t& i,
                                     CommandLine& line) {
  const std::string_view arg = args[i];
  const Flag* flag = findFlag(flags, arg);
  if (flag == nullptr) {
    return UsageProblem{"unknown flag " + cni::quoted(arg)};
  }
  if (!flag->repeatable && line.has(*flag)) {
    return UsageProblem{std::string(arg) + " given twice"};
  }
  std::string value;
  if (!flag->value.empty()) {
    if (i + 1 >= args.size()) {
      return UsageProblem{std::string(arg) + " needs its " + std::string(flag->value)};
    }
    value = args[++i];
  }
  line.flags.emplace_back(flag->name, std::move(value));
  return std::nullopt;
}

// "  LEFT   RIGHT" rows, the right column aligned.
std::string columns(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::size_t width = 0;
  for (const auto& [left, right] : rows) {
    width = std::max(width, left.size());
  }
  std::string out;
  for (const auto& [left, right] : rows) {
    out += "  " + left + std::string(width - left.size() + 2, ' ');
    out += right;
    out += '\n';
  }
  return out;
}

std::string flagRows(std::span<const Flag> flags) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Flag& f : flags) {
    std::string left(f.name);
    if (!f.value.empty()) {
      left += ' ';
      left += f.value;
    }
    rows.emplace_back(std::move(left), std::string(f.help) + (f.repeatable ? "; repeatable" : ""));
  }
  rows.emplace_back(std::string(kHelpFlag.name), std::string(kHelpFlag.help));
  return columns(rows);
}

std::string usageLine(const Program& program, const Subcommand* command) {
  std::string line = "usage: " + std::string(program.name);
  if (command == nullptr) {
    return line + (program.flags.empty() ? " COMMAND [ARGS]" : " [FLAGS]");
  }
  line += ' ';
  line += command->name;
  if (!command->flags.empty()) {
    line += " [FLAGS]";
  }
  if (!command->operands.empty()) {
    line += ' ';
    line += command->operands;
  }
  return line;
}

int printHelp(const std::string& text) {
  std::fputs(text.c_str(), stderr);
  return 0;
}

}  // namespace

bool CommandLine::has(const Flag& flag) const {
  return std::any_of(flags.begin(), flags.end(), [&flag](const auto& f) { return f.first == flag.name; });
}

std::optional<std::string> CommandLine::value(const Flag& flag) const {
  std::optional<std::string> last;
  for (const auto& [name, value] : flags) {
    if (name == flag.name) {
      last = value;
    }
  }
  return last;
}

std::vector<std::string> CommandLine::values(const Flag& flag) const {
  std::vector<std::string> out;
  for (const auto& [name, value] : flags) {
    if (name == flag.name) {
      out.push_back(value);
    }
  }
  return out;
}

std::expected<CommandLine, UsageProblem> parseCommandLine(const Program& program, const Subcommand* command,
                                                          std::span<char* const> args) {
  CommandLine line{.program = &program, .command = command};
  line.args.assign(args.begin(), args.end());
  const std::span<const Flag> flags = command != nullptr ? command->flags : program.flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (isHelpFlag(arg)) {
      line.helpAsked = true;
      return line;
    }
    if (arg.size() > 1 && arg.front() == '-') {
      if (auto bad = takeFlag(flags, args, i, line)) {
        return problem(std::move(bad->what));
      }
    } else {
      line.operands.emplace_back(arg);
    }
  }
  const std::size_t least = command != nullptr ? static_cast<std::size_t>(command->minOperands) : 0;
  const std::size_t most = command != nullptr ? static_cast<std::size_t>(command->maxOperands) : 0;
  if (line.operands.size() < least) {
    return problem("missing " + std::string(command->operands));
  }
  if (line.operands.size() > most) {
    return problem("unexpected argument " + cni::quoted(line.operands[most]));
  }
  return line;
}

const Subcommand* findSubcommand(const Program& program, std::string_view name) {
  if (isHelpFlag(name)) {
    name = kHelpCommand.name;
  } else if (name == "--version") {
    name = kVersionCommand.name;
  }
  const auto& commands = program.commands;
  const auto it =
      std::find_if(commands.begin(), commands.end(), [name](const Subcommand& c) { return c.name == name; });
  return it != commands.end() ? &*it : nullptr;
}

std::string programHelp(const Program& program) {
  const std::string name(program.name);
  std::string out = name + " v" + std::string(releaseVersion()) + ": " + std::string(program.about) + "\n";
  if (program.cniPlugin) {
    out += supportedVersionsLine() + "\n";
  }
  std::vector<std::pair<std::string, std::string>> usage;
  if (program.cniPlugin) {
    usage.emplace_back(name, "a CNI call: CNI_COMMAND and the other CNI_* variables set, the network "
                             "configuration on stdin");
  }
  if (!program.flags.empty()) {
    usage.emplace_back(name + " [FLAGS]", "see flags below");
  }
  usage.emplace_back(name + " COMMAND [ARGS]", "one of the commands below");
  out += "\nusage:\n" + columns(usage) + "\ncommands:\n";
  std::vector<std::pair<std::string, std::string>> commands;
  for (const Subcommand& c : program.commands) {
    commands.emplace_back(std::string(c.name), c.summary);
  }
  out += columns(commands);
  if (!program.flags.empty()) {
    out += "\nflags:\n" + flagRows(program.flags);
  }
  if (!program.details.empty()) {
    out += "\n" + std::string(program.details);
  }
  return out + "\n`" + name + " help COMMAND` (or `" + name + " COMMAND --help`) prints a command's usage and flags.\n";
}

std::string commandHelp(const Program& program, const Subcommand& command) {
  std::string out = usageLine(program, &command) + "\n  " + std::string(command.summary) + "\n";
  out += "\nflags:\n" + flagRows(command.flags);
  if (!command.details.empty()) {
    out += "\n" + std::string(command.details);
  }
  return out;
}

int usageError(const Program& program, const Subcommand* command, std::string_view problem) {
  std::string who(program.name);
  if (command != nullptr) {
    who += ' ';
    who += command->name;
  }
  std::string text = who + ": " + std::string(problem) + "\n" + usageLine(program, command) + "\n";
  text += command != nullptr || !program.flags.empty() ? "see `" + who + " --help`\n"
                                                       : "see `" + who + " help` for the commands\n";
  std::fputs(text.c_str(), stderr);
  return 2;
}

bool helpWithoutArguments(const char* const* environment, bool stdinIsTerminal) {
  if (!stdinIsTerminal) {
    return false;
  }
  for (auto entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::string_view(*entry).starts_with("CNI_")) {
      return false;
    }
  }
  return true;
}

int runCommandLine(const Program& program, int argc, char** argv,
                   const std::function<int(const CommandLine&)>& withoutSubcommand) {
  const std::span<char* const> args(argv + std::min(argc, 1), argv + std::max(argc, 1));
  if (args.empty()) {
    // The rule is helpWithoutArguments's: stdin is only looked at, never read, so a runtime's
    // configuration is still there for the CNI call.
    if (program.cniPlugin && helpWithoutArguments(::environ, ::isatty(STDIN_FILENO) == 1)) {
      return printHelp(programHelp(program));
    }
    return withoutSubcommand(CommandLine{.program = &program});
  }
  const std::string_view first = args.front();
  const Subcommand* command = findSubcommand(program, first);
  const bool ownFlags = command == nullptr && !program.flags.empty() && first.starts_with('-');
  if (command == nullptr && !ownFlags) {
    return usageError(program, nullptr,
                      (first.starts_with('-') ? "unknown flag " : "unknown subcommand ") + cni::quoted(first));
  }
  auto line = parseCommandLine(program, command, command != nullptr ? args.subspan(1) : args);
  if (!line) {
    return usageError(program, command, line.error().what);
  }
  if (line->helpAsked) {
    return printHelp(command != nullptr ? commandHelp(program, *command) : programHelp(program));
  }
  return command != nullptr ? command->run(*line) : withoutSubcommand(*line);
}

int runHelpCommand(const CommandLine& line) {
  const Program& program = *line.program;
  if (line.operands.empty()) {
    return printHelp(programHelp(program));
  }
  const Subcommand* command = findSubcommand(program, line.operands.front());
  if (command == nullptr) {
    return usageError(program, nullptr, "unknown subcommand " + cni::quoted(line.operands.front()));
  }
  return printHelp(commandHelp(program, *command));
}

int runVersionCommand(const CommandLine& line) {
  std::puts(versionLine(line.program->name).c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace ibcni::plugin
