//===- PowerSgd.cpp - Low-rank gradient all-reduce with error feedback ----===//
//
// allReduceMeanPowerSgd (kiln/runtime/Collective.h): PowerSGD (Vogels,
// Karimireddy and Jaggi, NeurIPS 2019), one power-iteration step per
// training step, warm-started from the previous step's Q, with error
// feedback. Per matrix M (n x m) of a bucket, on every rank:
//
//   M = gradient + error         P = M Q          all-reduce-mean(P)
//   P = orthonormalise(P)        Q = M^T P        all-reduce-mean(Q)
//   gradient = P Q^T             error = M - P Q^T
//
// P and Q of every matrix of a bucket, and the bucket's uncompressed
// elements, travel in two all-reduces per bucket. Storage is f32 (what the
// wire carries); products accumulate in f64 and the orthonormalisation
// (modified Gram-Schmidt, twice: "twice is enough") runs in f64 on the
// host. Every rank sees the same all-reduced P and Q, so every rank gets
// the same gradient and the same next Q.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Collective.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime {

namespace {
/// SplitMix64 (Steele, Lea and Flood 2014): small, and trivially written
/// again in numpy for the tests' reference.
uint64_t splitMix64(uint64_t &state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform double in (0, 1]: 53 random bits, never 0 (log below).
double uniformOpenZero(uint64_t &state) {
  return double((splitMix64(state) >> 11) + 1) * 0x1.0p-53;
}

/// Modified Gram-Schmidt on the columns of `p` (rows x cols, row-major,
/// f64), run twice so that the columns come out orthogonal to f64
/// rounding even when P is ill-conditioned. A column with nothing left
/// (P's rank below `cols`) becomes zero; NaN (from an inf or NaN
/// gradient) stays NaN.
void orthonormaliseColumns(std::vector<double> &p, uint64_t rows,
                           uint64_t cols) {
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t k = 0; k < cols; ++k) {
      for (uint64_t j = 0; j < k; ++j) {
        double dot = 0;
        for (uint64_t i = 0; i < rows; ++i)
          dot += p[i * cols + j] * p[i * cols + k];
        for (uint64_t i = 0; i < rows; ++i)
          p[i * cols + k] -= dot * p[i * cols + j];
      }
      double norm = 0;
      for (uint64_t i = 0; i < rows; ++i)
        norm += p[i * cols + k] * p[i * cols + k];
      norm = std::sqrt(norm);
      for (uint64_t i = 0; i < rows; ++i)
        p[i * cols + k] = norm != 0 ? p[i * cols + k] / norm : 0.0;
    }
  }
}
} // namespace

std::vector<float> powerSgdInitialQ(uint64_t seed, uint64_t id, uint64_t cols,
                                    uint32_t rank) {
  uint64_t state = seed ^ (id * 0xD1B54A32D192ED03ull);
  std::vector<float> q(cols * rank);
  // Box-Muller, two normals per pair of uniforms, in row-major order.
  for (uint64_t i = 0; i < q.size(); i += 2) {
    double u1 = uniformOpenZero(state), u2 = uniformOpenZero(state);
    double radius = std::sqrt(-2.0 * std::log(u1));
    double angle = 2.0 * M_PI * u2;
    q[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < q.size())
      q[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
  return q;
}

Error allReduceMeanPowerSgd(Communicator &communicator, float *data,
                            uint64_t count,
                            const std::vector<PowerSgdBlock> &blocks,
                            uint32_t rank, uint64_t seed,
                            PowerSgdMemory &memory, std::string_view what) {
  if (rank == 0)
    return makeError("PowerSGD all-reduce of {}: rank 0", what);
  uint64_t covered = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const PowerSgdBlock &block = blocks[b];
    if (block.rows == 0 || block.cols == 0 || block.offset < covered ||
        block.offset > count || block.rows > (count - block.offset) /
                                                  block.cols)
      return makeError("PowerSGD all-reduce of {}: matrix {} ({} x {} at "
                       "element {}) is outside the bucket ({} elements) or "
                       "overlaps the one before",
                       what, b, block.rows, block.cols, block.offset, count);
    covered = block.offset + block.rows * block.cols;
  }
  // First use: zero error, Q from the seed (the same on every rank).
  if (memory.error.size() != blocks.size()) {
    memory.error.assign(blocks.size(), {});
    memory.q.assign(blocks.size(), {});
    for (size_t b = 0; b < blocks.size(); ++b) {
      const PowerSgdBlock &block = blocks[b];
      uint32_t r = uint32_t(std::min<uint64_t>(
          rank, std::min(block.rows, block.cols)));
      memory.error[b].assign(block.rows * block.cols, 0.0f);
      memory.q[b] = powerSgdInitialQ(seed, block.id, block.cols, r);
    }
  }
  auto rankOf = [&](const PowerSgdBlock &block) {
    return std::min<uint64_t>(rank, std::min(block.rows, block.cols));
  };

  // All-reduce 1: the uncompressed elements, then every P = M Q.
  std::vector<float> first;
  std::vector<std::pair<uint64_t, uint64_t>> plain; // [begin, end)
  uint64_t at = 0;
  for (const PowerSgdBlock &block : blocks) {
    if (block.offset > at)
      plain.push_back({at, block.offset});
    at = block.offset + block.rows * block.cols;
  }
  if (count > at)
    plain.push_back({at, count});
  for (auto [begin, end] : plain)
    first.insert(first.end(), data + begin, data + end);
  uint64_t plainCount = first.size();
  std::vector<std::vector<float>> matrices(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    const PowerSgdBlock &block = blocks[b];
    uint64_t n = block.rows, m = block.cols, r = rankOf(block);
    std::vector<float> &mat = matrices[b];
    mat.resize(n * m);
    for (uint64_t i = 0; i < n * m; ++i)
      mat[i] = data[block.offset + i] + memory.error[b][i];
    const std::vector<float> &q = memory.q[b];
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t k = 0; k < r; ++k) {
        double sum = 0;
        for (uint64_t j = 0; j < m; ++j)
          sum += double(mat[i * m + j]) * double(q[j * r + k]);
        first.push_back(static_cast<float>(sum));
      }
  }
  if (!first.empty())
    if (Error err = communicator.allReduceMean(
            first.data(), first.size(), fmt::format("{} (PowerSGD P)", what)))
      return err;
  uint64_t index = 0;
  for (auto [begin, end] : plain)
    for (uint64_t i = begin; i < end; ++i)
      data[i] = first[index++];

  // Orthonormalise each P, then all-reduce 2: every Q = M^T P.
  std::vector<std::vector<float>> ps(blocks.size());
  std::vector<float> second;
  uint64_t pAt = plainCount;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const PowerSgdBlock &block = blocks[b];
    uint64_t n = block.rows, m = block.cols, r = rankOf(block);
    std::vector<double> p(first.begin() + pAt, first.begin() + pAt + n * r);
    pAt += n * r;
    orthonormaliseColumns(p, n, r);
    ps[b].assign(p.begin(), p.end());
    const std::vector<float> &mat = matrices[b];
    for (uint64_t j = 0; j < m; ++j)
      for (uint64_t k = 0; k < r; ++k) {
        double sum = 0;
        for (uint64_t i = 0; i < n; ++i)
          sum += double(mat[i * m + j]) * double(ps[b][i * r + k]);
        second.push_back(static_cast<float>(sum));
      }
  }
  if (!second.empty())
    if (Error err = communicator.allReduceMean(
            second.data(), second.size(),
            fmt::format("{} (PowerSGD Q)", what)))
      return err;

  // The gradient is P Q^T; what it missed is the next step's error.
  uint64_t qAt = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const PowerSgdBlock &block = blocks[b];
    uint64_t n = block.rows, m = block.cols, r = rankOf(block);
    std::vector<float> &q = memory.q[b];
    q.assign(second.begin() + qAt, second.begin() + qAt + m * r);
    qAt += m * r;
    const std::vector<float> &p = ps[b];
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t j = 0; j < m; ++j) {
        double sum = 0;
        for (uint64_t k = 0; k < r; ++k)
          sum += double(p[i * r + k]) * double(q[j * r + k]);
        float approx = static_cast<float>(sum);
        memory.error[b][i * m + j] = matrices[b][i * m + j] - approx;
        data[block.offset + i * m + j] = approx;
      }
    // An inf or NaN in any rank's gradient (an fp16 overflow) reaches
    // every rank through P and Q; the update skips that step (loss
    // scaling), and the memory must not carry it into the next ones:
    // restart from zero error and the seeded Q, as on the first step.
    bool finite = true;
    for (float value : q)
      finite &= std::isfinite(value);
    for (float value : memory.error[b])
      finite &= std::isfinite(value);
    if (!finite) {
      memory.error[b].assign(n * m, 0.0f);
      q = powerSgdInitialQ(seed, block.id, m, uint32_t(r));
    }
  }
  return Error::success();
}

} // namespace kiln::runtime
