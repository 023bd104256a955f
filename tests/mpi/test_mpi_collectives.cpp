// allgather, broadcast and gather of the MPI process group, and its user errors.
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

#include <vktower/runtime/mpi/detail/mpi_process_group.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/error.h>

#include "mpi_test_support.h"

namespace {

std::byte pattern(int rank, std::size_t i) {
  return static_cast<std::byte>((rank * 37 + static_cast<int>(i) * 11 + 5) & 0xff);
}

std::string rank_string(int rank) {
  // Rank 0's is empty, rank 1's long (past the eager limit), the others short.
  return rank == 1 ? std::string(100'000, 'q')
                   : std::string(static_cast<std::size_t>(rank) * 3, static_cast<char>('a' + rank));
}

}  // namespace

TEST_CASE("mpi_world is MPI_COMM_WORLD's ranks and launched_by_mpirun sees mpirun", "[mpi]") {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(vkt::mpi_world().rank() == rank);
  CHECK(vkt::mpi_world().size() == size);
  CHECK(&vkt::mpi_world() == &vkt::mpi_world());
  CHECK(vkt::launched_by_mpirun());
  CHECK(vkt::mpi_available());
}

TEST_CASE("allgather of bytes puts every rank's bytes in rank order, mine aliasing my slot",
          "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  const auto ranks = static_cast<std::size_t>(world.size());
  for (std::size_t n : {std::size_t{1}, std::size_t{13}, std::size_t{70'000}}) {
    std::vector<std::byte> all(n * ranks, std::byte{0xEE});
    const std::span<std::byte> slot(all.data() + static_cast<std::size_t>(world.rank()) * n, n);
    for (std::size_t i = 0; i < n; ++i) slot[i] = pattern(world.rank(), i);
    world.allgather(slot, all, "aliased allgather");
    std::vector<std::byte> separate(n * ranks);
    std::vector<std::byte> mine(slot.begin(), slot.end());
    world.allgather(mine, separate, "separate allgather");
    for (int r = 0; r < world.size(); ++r) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = static_cast<std::size_t>(r) * n + i;
        if (all[at] != pattern(r, i) || separate[at] != pattern(r, i)) {
          FAIL("rank " << world.rank() << ": byte " << i << " of rank " << r << " is wrong (n=" << n
                       << ")");
        }
      }
    }
  }
}

TEST_CASE("allgather of strings of different lengths, in rank order", "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  const std::vector<std::string> all = world.allgather(rank_string(world.rank()), "names");
  REQUIRE(all.size() == static_cast<std::size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) CHECK(all[static_cast<std::size_t>(r)] == rank_string(r));
}

TEST_CASE("broadcast from a non-zero root: bytes and strings", "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  const int root = world.size() - 1;
  std::vector<std::byte> data(5000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern(world.rank(), i);
  world.broadcast(data, root, "variables");
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != pattern(root, i))
      FAIL("rank " << world.rank() << ": byte " << i << " is not root's");
  }
  const std::string text = world.broadcast(rank_string(world.rank()) + "!", root, "text");
  CHECK(text == rank_string(root) + "!");
  CHECK(world.broadcast(world.rank() == 1 ? std::string() : std::string("x"), 1, "empty") == "");
}

TEST_CASE("gather: every rank's bytes of any length on rank 0, in rank order", "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  std::vector<std::byte> mine(static_cast<std::size_t>(world.rank()) * 5 +
                              (world.rank() == 1 ? 40'000 : 0));
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = pattern(world.rank(), i);
  const std::vector<std::vector<std::byte>> all = world.gather(mine, "predictions");
  if (world.rank() != 0) {
    CHECK(all.empty());
    return;
  }
  REQUIRE(all.size() == static_cast<std::size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) {
    const std::vector<std::byte>& theirs = all[static_cast<std::size_t>(r)];
    REQUIRE(theirs.size() == static_cast<std::size_t>(r) * 5 + (r == 1 ? 40'000 : 0));
    for (std::size_t i = 0; i < theirs.size(); ++i) {
      if (theirs[i] != pattern(r, i)) FAIL("byte " << i << " of rank " << r << " is wrong");
    }
  }
}

TEST_CASE("user mistakes are vkt::Error before any message and leave the group working", "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  std::vector<std::byte> mine(4), all(4 * static_cast<std::size_t>(world.size()) + 1);
  CHECK_THROWS_WITH(world.allgather(mine, all, "bad allgather"),
                    Catch::Contains("bad allgather") && Catch::Contains("must hold"));
  CHECK_THROWS_WITH(
      world.broadcast(mine, world.size(), "bad root"),
      Catch::Contains("root rank " + std::to_string(world.size()) + " is not in the group"));
  CHECK_THROWS_WITH(world.broadcast(std::string("x"), -1, "bad root"),
                    Catch::Contains("root rank -1"));
  CHECK_THROWS_WITH(world.set_timeout(std::chrono::milliseconds(0)), Catch::Contains("0 ms"));
  CHECK(world.timeout() == std::chrono::seconds(60));
  CHECK_THROWS_WITH(vkt::detail::MpiProcessGroup(MPI_COMM_WORLD, 0), Catch::Contains("0 bytes"));
  // Still working: a collective after the mistakes.
  std::vector<float> one{1.0f};
  world.allreduce_sum(std::span<float>(one), "after the mistakes");
  CHECK(one[0] == static_cast<float>(world.size()));
}
