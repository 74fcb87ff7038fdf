#pragma once
// The run's one channel to its caller: every event goes to RunOptions::callback, which can stop the run, as
// can RunOptions::stop (a signal handler's flag).
#include <cstdint>
#include <string>

#include "mlalpha/run.h"

namespace mlalpha {

class Reporter {
 public:
  explicit Reporter(const RunOptions& o) : opt_(o) {}
  // Passes the event on; a callback that returns false requests a stop (stop_requested).
  void emit(const RunEvent& e) {
    if (opt_.callback && !opt_.callback(e)) stop_ = true;
  }
  // A line for the user; member -1: not about one member of a population.
  void message(const std::string& m, int fold, int64_t step, int member = -1, const std::string& member_name = "") {
    RunEvent e;
    e.kind = RunEvent::Kind::message;
    e.fold = fold;
    e.step = step;
    e.member = member;
    e.member_name = member_name;
    e.message = m;
    emit(e);
  }
  bool stop_requested() const { return stop_ || (opt_.stop && opt_.stop->load()); }

 private:
  const RunOptions& opt_;
  bool stop_ = false;
};

}  // namespace mlalpha
