// SPDX-License-Identifier: Apache-2.0
//
// testing/child_process.h
//
// ChildProcess: runs a program (the slurm-bridge binary, in e2e tests) with extra environment
// variables and its output appended to a log file; killed (SIGKILL) when destroyed. Alive()
// tells a process that still runs from one that exited or crashed on its own (e2e tests check it
// before each "X did not happen" assertion: a dead bridge does nothing either). The child is
// killed when the test process dies (PR_SET_PDEATHSIG).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace sb::testing {

class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
               const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test: a test binary that crashes must not leave a bridge running that
      // acts on the environment during the next tests.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      FILE* f = std::fopen(log.c_str(), "a");
      if (f != nullptr) {
        ::dup2(::fileno(f), 1);
        ::dup2(::fileno(f), 2);
      }
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~ChildProcess() { Kill(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Sends `sig` and reaps the process; returns its wait status (-1 if it was gone already).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    killed_ = true;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = status;
    return status;
  }
  // Whether the process still runs (false after Kill, or once it exited by itself: Exited()).
  [[nodiscard]] bool Alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return true;
    exit_status_ = r == pid_ ? status : -1;
    pid_ = -1;
    return false;
  }
  // True when the process ended without Kill (checked by Alive).
  [[nodiscard]] bool Exited() { return !Alive() && !killed_; }
  // The wait status once it ended ("exit 1", "signal 11"), for messages.
  [[nodiscard]] std::string HowItEnded() const {
    if (exit_status_ < 0) return "not ended";
    if (WIFEXITED(exit_status_)) return "exit " + std::to_string(WEXITSTATUS(exit_status_));
    if (WIFSIGNALED(exit_status_)) return "signal " + std::to_string(WTERMSIG(exit_status_));
    return "status " + std::to_string(exit_status_);
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool killed_ = false;
  int exit_status_ = -1;
};

}  // namespace sb::testing
