#include "step_pacing.h"

namespace vkt {

void StepPacing::submitted(std::span<const Device* const> devices) {
  std::vector<Ticket> tickets;
  for (const Device* device : devices) {
    const std::vector<Ticket> latest = device->submitted();
    tickets.insert(tickets.end(), latest.begin(), latest.end());
  }
  submitted_.push_back(std::move(tickets));
}

bool StepPacing::wait_two_back(std::span<const Device* const> devices) {
  if (submitted_.size() < 2) return false;
  const std::vector<Ticket> tickets = std::move(submitted_.front());
  submitted_.pop_front();
  for (const Device* device : devices) {
    std::vector<Ticket> mine;
    for (const Ticket& t : tickets) {
      if (t.device == device) mine.push_back(t);
    }
    device->wait_all(mine);
  }
  return true;
}

}  // namespace vkt
